import { expect } from 'chai';

/** What a test holds after a request: status, headers and the parsed body. */
export interface ProblemResult {
  readonly status: number;
  readonly headers: Headers;
  readonly body: any;
  readonly text?: string;
}

/**
 * Asserts an RFC 9457 problem of `status` whose `type` is `<base>/problems/<slug>` (the
 * base is whatever PUBLIC_BASE_URL the test service has), consistent with its headers.
 *
 * @example
 * ```ts
 * expectProblem(await call(svc, 'GET', '/api/v1/runs/nope', { key }), 404, 'run-not-found');
 * ```
 */
export function expectProblem(result: ProblemResult, status: number, slug: string): void {
  expect(result.status, `status; body ${result.text ?? JSON.stringify(result.body)}`).to.equal(status);
  expect(result.headers.get('content-type')).to.match(/^application\/problem\+json(;|$)/);
  expect(typeof result.body.type === 'string' ? new URL(result.body.type).pathname : result.body.type).to.equal(`/problems/${slug}`);
  expect(result.body.status).to.equal(status);
  expect(result.body.title).to.be.a('string').that.is.not.empty;
  expect(result.body.request_id).to.equal(result.headers.get('x-request-id'));
  expect(JSON.stringify(result.body)).not.to.match(/\bat (?:async )?(?:\S+ \()?(?:file:\/\/|node:|\/)[^\s)]+:\d+:\d+/); // no stack frames
}

/** {@link expectProblem} on a fetch Response; returns the body for further checks. */
export async function expectProblemResponse(response: Response, status: number, slug: string): Promise<Record<string, any>> {
  const text = await response.text();
  const body = text === '' ? undefined : (JSON.parse(text) as Record<string, any>);
  expectProblem({ status: response.status, headers: response.headers, body, text }, status, slug);
  return body!;
}
