import type { Kysely } from 'kysely';
import { withSessionLock } from '../../src/db/session-lock.ts';

/**
 * Runs `work` while this process alone uses the shadow schema `shadow` (a rebuild's
 * `<schema>_rebuild`, an audit's `<schema>_verify`): a Postgres session-level advisory lock
 * keyed by its name (src/db/session-lock.ts). Two rebuilds, or two audits, at once would
 * otherwise drop and fill one schema under each other: a rebuild could swap in tables holding
 * another fold's rows under its own checkpoint. The second one waits, and `onWait` says so
 * first. `held()` tells whether the lock is still held (its session may have ended).
 *
 * @example
 * await withShadowSchema(db, `${schema}_rebuild`, (held) => rebuildInto(`${schema}_rebuild`, held), {
 *   onWait: () => console.error('another rebuild is running; waiting for it'),
 * });
 */
export function withShadowSchema<T>(
  db: Kysely<any>,
  shadow: string,
  work: (held: () => Promise<boolean>) => Promise<T>,
  options: { readonly onWait?: () => void } = {},
): Promise<T> {
  return withSessionLock(db, `shadow-schema:${shadow}`, work, options);
}
