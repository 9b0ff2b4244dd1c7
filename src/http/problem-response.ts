import type { Context } from 'koa';
import type { AppError } from '../errors/app-error.ts';
import { toHttpProblem, type HttpProblem } from './problems/problem-mapping.ts';

/** Members RFC 9457 (and our `request_id`) define; an extension must never shadow them. */
const CORE_MEMBERS = new Set(['type', 'title', 'status', 'detail', 'instance', 'request_id']);

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

export interface ProblemContext {
  readonly publicBaseUrl: string;
  readonly instance: string;
  readonly requestId: string;
}

/** The absolute URI of a problem type: clients can dereference it (GET answers its page). */
export function problemTypeUri(publicBaseUrl: string, slug: string): string {
  return `${publicBaseUrl}/problems/${slug}`;
}

/** Builds the RFC 9457 document for a problem. */
export function problemDocument(problem: HttpProblem, context: ProblemContext): Record<string, unknown> {
  const document: Record<string, unknown> = {
    type: problemTypeUri(context.publicBaseUrl, problem.slug),
    title: problem.title,
    status: problem.status,
    detail: problem.detail,
    instance: context.instance,
    request_id: context.requestId,
  };
  for (const [name, value] of Object.entries(problem.extensions)) {
    if (!CORE_MEMBERS.has(name)) document[name] = value;
  }
  return document;
}

/**
 * Writes `error` as the response: status, the problem's headers, and an
 * `application/problem+json` body.
 */
export function writeProblem(ctx: Context, error: AppError, options: { publicBaseUrl: string; requestId: string }): void {
  const problem = toHttpProblem(error);
  ctx.status = problem.status;
  for (const [name, value] of Object.entries(problem.headers)) ctx.set(name, value);
  // Content-Type goes first and the body as a string: koa would force `application/json` on an object body.
  ctx.type = PROBLEM_CONTENT_TYPE;
  ctx.body = JSON.stringify(
    problemDocument(problem, { publicBaseUrl: options.publicBaseUrl, instance: ctx.path, requestId: options.requestId }),
  );
}
