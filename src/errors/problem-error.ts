/**
 * Every error a client can see is a `ProblemError`: it maps to exactly one RFC 9457
 * problem type, so the HTTP layer never has to guess a status from a message.
 *
 * @example
 * ```ts
 * export class RunNotFoundError extends ProblemError {
 *   constructor(runId: string) {
 *     super({ type: 'run-not-found', status: 404, title: 'Run not found', detail: `No run ${runId}` });
 *   }
 * }
 * ```
 */
export interface ProblemFields {
  /** Short kebab-case slug; the full `type` URI is built by the HTTP layer from it. */
  readonly type: string;
  readonly status: number;
  readonly title: string;
  readonly detail?: string;
  /** Extension members (RFC 9457 §3.2), e.g. `errors` for validation failures. */
  readonly extensions?: Readonly<Record<string, unknown>>;
  /** Extra response headers, e.g. `Allow` for 405 or `WWW-Authenticate` for 401. */
  readonly headers?: Readonly<Record<string, string>>;
}

export class ProblemError extends Error {
  readonly problem: ProblemFields;

  constructor(problem: ProblemFields, options?: { cause?: unknown }) {
    super(problem.detail ?? problem.title, options);
    this.name = new.target.name;
    this.problem = problem;
  }

  get status(): number {
    return this.problem.status;
  }
}

export function isProblemError(error: unknown): error is ProblemError {
  return error instanceof ProblemError;
}
