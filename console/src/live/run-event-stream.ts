import { EventSourceParserStream } from 'eventsource-parser/stream';
import { readApiKey } from '../session/api-key-store.ts';
import { apiPaths, retryAfterSeconds } from '../api/api-client.ts';

export type RunStreamEnd =
  | { readonly kind: 'finished' }
  | { readonly kind: 'failed'; readonly retryAfterSeconds: number | null };

/**
 * Follows GET /api/v1/runs/{id}/events (Server-Sent Events). EventSource cannot send an
 * Authorization header, so the stream is read with fetch and parsed by eventsource-parser.
 * `onEvent` gets each milestone's name; the promise settles when the server ends the stream.
 */
export async function followRunEvents(runId: string, onEvent: (name: string) => void, signal: AbortSignal): Promise<RunStreamEnd> {
  let lastEventId: string | undefined;
  for (let attempt = 0; attempt < 5 && !signal.aborted; attempt += 1) {
    const headers: Record<string, string> = { accept: 'text/event-stream', authorization: `Bearer ${readApiKey() ?? ''}` };
    if (lastEventId) headers['last-event-id'] = lastEventId;
    let response: Response;
    try {
      response = await fetch(apiPaths.runEvents(runId), { headers, signal, credentials: 'omit', cache: 'no-store' });
    } catch {
      return { kind: 'failed', retryAfterSeconds: null };
    }
    if (response.status === 204) return { kind: 'finished' };
    if (!response.ok || !response.body) return { kind: 'failed', retryAfterSeconds: retryAfterSeconds(response.headers) };
    let ended = false;
    try {
      const events = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
      for await (const event of events) {
        if (event.id) lastEventId = event.id;
        const name = event.event ?? 'message';
        onEvent(name);
        if (name === 'succeeded' || name === 'failed' || name === 'canceled') ended = true;
      }
    } catch {
      if (signal.aborted) return { kind: 'finished' };
    }
    if (ended) return { kind: 'finished' };
    // The server ended the stream (lifetime, shutdown): resume after the last event.
  }
  return { kind: 'failed', retryAfterSeconds: null };
}
