import { STATUS_CODES } from 'node:http';
import { ProblemError } from '../errors/problem-error.ts';

/**
 * A problem for a bare HTTP status (from `ctx.throw`, the router or raw-body) that has
 * no domain-specific error class; its slug is `http-<status>`.
 */
export class HttpStatusError extends ProblemError {
  constructor(status: number, detail?: string, headers?: Readonly<Record<string, string>>) {
    super({ type: `http-${status}`, status, title: STATUS_CODES[status] ?? 'Error', detail, headers });
  }
}
