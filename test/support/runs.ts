import { eventually } from './eventually.ts';
import type { TestService } from './test-service.ts';

/** Polls GET /api/v1/runs/{id} until the run is terminal; returns the body. */
export async function waitForTerminalRun(svc: TestService, key: string, runId: string, timeoutMs = 20_000): Promise<any> {
  let body: any;
  await eventually(async () => {
    const response = await svc.request('GET', `/api/v1/runs/${runId}`, { key });
    body = await response.json();
    if (!['succeeded', 'failed', 'canceled'].includes(body.status)) throw new Error(`run is ${body.status}`);
  }, timeoutMs, 50);
  return body;
}

/** POST /api/v1/runs and return the run id (asserting 202). */
export async function startRun(svc: TestService, key: string, projectId: string, brief: string, autoApply = false): Promise<string> {
  const response = await svc.request('POST', '/api/v1/runs', { key, body: { brief, project_id: projectId, auto_apply: autoApply } });
  const body = (await response.json()) as { id: string };
  if (response.status !== 202) throw new Error(`POST /runs answered ${response.status}: ${JSON.stringify(body)}`);
  return body.id;
}
