/**
 * The kinds of failure the domain and the infrastructure can report, as nats.js and
 * Emmett name them. A kind says what went wrong in terms any caller understands; only the
 * HTTP edge (`src/http`) turns a kind into a status code and a problem type.
 */
export const ErrorKind = {
  /** The thing asked for does not exist (or is not visible to the caller). */
  NotFound: 'not-found',
  /** The request contradicts existing state: it already exists, or it was decided otherwise. */
  Conflict: 'conflict',
  /** The input is malformed or breaks a rule of its own shape. */
  Validation: 'validation',
  /** The command is well-formed but not allowed in the aggregate's current state. */
  IllegalState: 'illegal-state',
  /** Too many writers raced for the same aggregate; retrying soon will likely succeed. */
  Contention: 'contention',
  /** A backing service (event log, database, ads platform) cannot be reached now. */
  Unavailable: 'unavailable',
  /** The caller is not who it claims, or did not say who it is. */
  Unauthenticated: 'unauthenticated',
  /** The caller is known but may not do this. */
  Forbidden: 'forbidden',
  /** The caller used up a limit; the error says when to come back. */
  LimitExceeded: 'limit-exceeded',
} as const;

export type ErrorKind = (typeof ErrorKind)[keyof typeof ErrorKind];

export interface AppErrorOptions {
  /** Facts a client can act on (ids, limits, the active run); become problem extension members. */
  readonly details?: Readonly<Record<string, unknown>>;
  /** When a retry makes sense, after how many seconds. */
  readonly retryAfterSeconds?: number;
  readonly cause?: unknown;
}

/**
 * Base of every error a caller may see. `code` is a stable kebab-case identifier (the
 * problem type's slug at the HTTP edge); `kind` decides the status there. Nothing here
 * knows about HTTP.
 *
 * @example
 * ```ts
 * export class RunNotFoundError extends AppError {
 *   readonly kind = ErrorKind.NotFound;
 *   constructor(runId: string) {
 *     super('run-not-found', `No run ${runId}.`, { details: { run_id: runId } });
 *   }
 * }
 * ```
 */
export abstract class AppError extends Error {
  abstract readonly kind: ErrorKind;
  readonly code: string;
  readonly details: Readonly<Record<string, unknown>>;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: string, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.details = options.details ?? {};
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

export function isAppError(error: unknown): error is AppError {
  return error instanceof AppError;
}
