import type { Context } from 'koa';
import type { ProblemError, ProblemFields } from '../errors/problem-error.ts';

/** Members RFC 9457 (and our `request_id`) define; an extension must never shadow them. */
const CORE_MEMBERS = new Set(['type', 'title', 'status', 'detail', 'instance', 'request_id']);

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export interface ProblemContext {
  readonly publicBaseUrl: string;
  readonly instance: string;
  readonly requestId: string;
}

/**
 * Builds the RFC 9457 document for a problem. The `type` is an absolute URI under the
 * public origin so clients can dereference it, while errors only carry a slug.
 */
export function problemDocument(problem: ProblemFields, context: ProblemContext): Record<string, unknown> {
  const document: Record<string, unknown> = {
    type: `${context.publicBaseUrl}/problems/${problem.type}`,
    title: problem.title,
    status: problem.status,
    detail: problem.detail,
    instance: context.instance,
    request_id: context.requestId,
  };
  for (const [name, value] of Object.entries(problem.extensions ?? {})) {
    if (!CORE_MEMBERS.has(name)) document[name] = value;
  }
  return document;
}

/**
 * Writes `error` as the response: status, the problem's own headers, and an
 * `application/problem+json` body.
 */
export function writeProblem(ctx: Context, error: ProblemError, options: { publicBaseUrl: string; requestId: string }): void {
  const { problem } = error;
  ctx.status = problem.status;
  for (const [name, value] of Object.entries(problem.headers ?? {})) ctx.set(name, value);
  // Content-Type goes first and the body as a string: koa would force `application/json` on an object body.
  ctx.type = PROBLEM_CONTENT_TYPE;
  ctx.body = JSON.stringify(
    problemDocument(problem, { publicBaseUrl: options.publicBaseUrl, instance: ctx.path, requestId: options.requestId }),
  );
}
