import { expect } from 'chai';
import type { HttpServer } from '../../src/http/http-server.ts';
import { expectProblemResponse } from '../support/problem.ts';
import { createLogger } from '../../src/log/logger.ts';
import { eventually } from '../support/eventually.ts';
import { ECHO_LIMIT_BYTES, PUBLIC_BASE_URL, startTestServer } from './http-test-app.ts';

/** Every problem of this app carries PUBLIC_BASE_URL in its type. */
async function expectProblem(response: Response, status: number, slug: string): Promise<Record<string, unknown>> {
  const body = await expectProblemResponse(response, status, slug);
  expect(body.type).to.equal(`${PUBLIC_BASE_URL}/problems/${slug}`);
  return body;
}

describe('http app', () => {
  let server: HttpServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server.stop(1000);
  });

  const postEcho = (body: BodyInit | undefined, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
    fetch(`${server.url}/echo`, { method: 'POST', headers, body });

  it('echoes a valid JSON body', async () => {
    const response = await postEcho(JSON.stringify({ hello: 'world' }));
    expect(response.status).to.equal(200);
    expect(await response.json()).to.deep.equal({ received: { hello: 'world' } });
  });

  it('accepts application/*+json with a utf-8 charset', async () => {
    const response = await postEcho('[1,2]', { 'content-type': 'application/merge-patch+json; charset=UTF-8' });
    expect(response.status).to.equal(200);
    expect(await response.json()).to.deep.equal({ received: [1, 2] });
  });

  it('answers 404 problem for an unknown route', async () => {
    const response = await fetch(`${server.url}/nope?x=1`);
    const body = await expectProblem(response, 404, 'not-found');
    expect(body.instance).to.equal('/nope');
  });

  it('answers 405 with Allow for a method the route does not have', async () => {
    const response = await fetch(`${server.url}/only-get`, { method: 'POST' });
    await expectProblem(response, 405, 'method-not-allowed');
    const allow = (response.headers.get('allow') ?? '').split(/,\s*/);
    expect(allow).to.include('GET');
    expect(allow).not.to.include('POST');
  });

  it('answers 405 on the health routes too', async () => {
    const response = await fetch(`${server.url}/healthz`, { method: 'DELETE' });
    await expectProblem(response, 405, 'method-not-allowed');
    expect(response.headers.get('allow')).to.contain('GET');
  });

  it('answers 400 for malformed JSON with the parser message', async () => {
    const body = await expectProblem(await postEcho('{"a": '), 400, 'malformed-json');
    expect(body.detail).to.be.a('string').and.not.equal('body is empty');
  });

  it('answers 400 for an empty body', async () => {
    const body = await expectProblem(await postEcho(undefined), 400, 'malformed-json');
    expect(body.detail).to.equal('body is empty');
  });

  it('answers 400 for a whitespace-only body', async () => {
    const body = await expectProblem(await postEcho('   '), 400, 'malformed-json');
    expect(body.detail).to.equal('body is empty');
  });

  it('answers 413 when Content-Length exceeds the limit', async () => {
    const body = await expectProblem(await postEcho(JSON.stringify({ s: 'x'.repeat(2 * ECHO_LIMIT_BYTES) })), 413, 'payload-too-large');
    expect(body.limit_bytes).to.equal(ECHO_LIMIT_BYTES);
  });

  it('answers 413 when a chunked body grows past the limit', async () => {
    const chunk = new TextEncoder().encode(`"${'x'.repeat(600)}`);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(chunk);
        controller.enqueue(chunk);
        controller.close();
      },
    });
    const response = await fetch(`${server.url}/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    await expectProblem(response, 413, 'payload-too-large');
  });

  it('answers 415 for text/plain', async () => {
    await expectProblem(await postEcho('{}', { 'content-type': 'text/plain' }), 415, 'unsupported-media-type');
  });

  it('answers 415 for JSON in a non-UTF-8 charset', async () => {
    await expectProblem(await postEcho('{}', { 'content-type': 'application/json; charset=latin1' }), 415, 'unsupported-media-type');
  });

  it('answers 500 problem without leaking the error for a plain Error', async () => {
    const body = await expectProblem(await fetch(`${server.url}/boom`), 500, 'internal');
    expect(JSON.stringify(body)).not.to.contain('secret');
    expect(JSON.stringify(body)).not.to.contain('Error:');
    expect(body.detail).to.contain(String(body.request_id));
  });

  it('maps ctx.throw errors to http-<status> problems', async () => {
    const body = await expectProblem(await fetch(`${server.url}/teapot`), 418, 'http-418');
    expect(body.detail).to.equal('short and stout');
  });

  it('echoes a safe incoming X-Request-Id', async () => {
    const response = await fetch(`${server.url}/nope`, { headers: { 'x-request-id': 'client-trace_1.2' } });
    expect(response.headers.get('x-request-id')).to.equal('client-trace_1.2');
    const body = await expectProblem(response, 404, 'not-found');
    expect(body.request_id).to.equal('client-trace_1.2');
  });

  it('replaces an unsafe incoming X-Request-Id', async () => {
    const response = await fetch(`${server.url}/healthz`, { headers: { 'x-request-id': 'evil id;<script>' } });
    const id = response.headers.get('x-request-id');
    expect(id).to.match(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    await response.body?.cancel();
  });

  it('answers /healthz with 200', async () => {
    const response = await fetch(`${server.url}/healthz`);
    expect(response.status).to.equal(200);
    expect(response.headers.get('content-type')).to.match(/^application\/json/);
    expect(await response.json()).to.deep.equal({ status: 'ok' });
  });

  it('answers /readyz with 200 when there are no checks', async () => {
    const response = await fetch(`${server.url}/readyz`);
    expect(response.status).to.equal(200);
    expect(await response.json()).to.deep.equal({ status: 'ready', checks: {} });
  });

  describe('a client that leaves before the answer', () => {
    let quiet: HttpServer;
    const lines: Record<string, unknown>[] = [];
    before(async () => {
      const destination = { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) };
      quiet = await startTestServer({ logger: createLogger('debug', {}, destination) });
    });
    after(async () => {
      await quiet.stop(1000);
    });

    it('is not an error in the log when it closes a stream (the ordinary end of an EventSource)', async () => {
      const aborter = new AbortController();
      const response = await fetch(`${quiet.url}/stream`, { signal: aborter.signal });
      expect(response.status).to.equal(200);
      await new Promise((resolve) => setTimeout(resolve, 60));
      aborter.abort();
      const ended = (line: Record<string, unknown>) => line.msg === 'client closed the connection while the response was sent' || line.msg === 'error while sending a response';
      await eventually(() => expect(lines.some(ended)).to.equal(true), 2000, 20);
      expect(lines.filter((line) => line.level === 'error').map((line) => line.msg)).to.deep.equal([]);
    });

    it('is counted with the status it would have been answered, not 404', async () => {
      const aborter = new AbortController();
      const request = fetch(`${quiet.url}/refuse-after-leave`, { signal: aborter.signal }).catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 50));
      aborter.abort();
      await request;
      await eventually(() => expect(lines.find((line) => line.msg === 'http request' && line.path === '/refuse-after-leave')?.status).to.equal(422), 2000, 20);
    });
  });
});
