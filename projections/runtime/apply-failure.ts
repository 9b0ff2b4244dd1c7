/**
 * Whether a failed apply is the event's fault (a retry will fail the same way, so the
 * event is parked) or the environment's (connection lost, serialization failure, lock
 * timeout, a bug: retried in order, as before, until it works).
 */
export const ApplyFailureKind = { Deterministic: 'deterministic', Transient: 'transient' } as const;
export type ApplyFailureKind = (typeof ApplyFailureKind)[keyof typeof ApplyFailureKind];

/**
 * SQLSTATE classes that depend only on the data written: 22 data exception (22021 bad
 * byte sequence, 22P05 untranslatable character, 22P02 invalid text representation,
 * 22001 too long, 22003 out of range…) and 23 integrity constraint violation (an event
 * whose ids collide with rows of other events). Class 23 is only ever blamed on one event
 * after that event failed alone (see applyIsolating), never on a whole batch.
 */
const DETERMINISTIC_SQLSTATE_CLASSES = new Set(['22', '23']);

export function classifyApplyFailure(error: unknown): ApplyFailureKind {
  const code = sqlStateOf(error);
  return code !== null && DETERMINISTIC_SQLSTATE_CLASSES.has(code.slice(0, 2))
    ? ApplyFailureKind.Deterministic
    : ApplyFailureKind.Transient;
}

/** The SQLSTATE of a pg DatabaseError (kysely passes those through), or null. */
export function sqlStateOf(error: unknown): string | null {
  if (typeof error !== 'object' || error === null) return null;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
}
