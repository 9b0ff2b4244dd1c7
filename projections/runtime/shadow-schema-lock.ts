import { sql, type Kysely } from 'kysely';

/**
 * Runs `work` while this process alone uses the shadow schema `shadow` (a rebuild's
 * `<schema>_rebuild`, an audit's `<schema>_verify`): a Postgres session-level advisory lock
 * keyed by its name, held on a connection reserved for it. Two rebuilds, or two audits, at
 * once would otherwise drop and fill one schema under each other: a rebuild could swap in
 * tables holding another fold's rows under its own checkpoint. The second one waits, and
 * `onWait` says so first. The lock goes with the session, so a process that dies holding it
 * leaves nothing to clean up.
 *
 * @example
 * await withShadowSchema(db, `${schema}_rebuild`, () => rebuildInto(`${schema}_rebuild`), {
 *   onWait: () => console.error('another rebuild is running; waiting for it'),
 * });
 */
export async function withShadowSchema<T>(
  db: Kysely<any>,
  shadow: string,
  work: () => Promise<T>,
  options: { readonly onWait?: () => void } = {},
): Promise<T> {
  const key = `shadow-schema:${shadow}`;
  return db.connection().execute(async (session) => {
    const { rows } = await sql<{ taken: boolean }>`select pg_try_advisory_lock(hashtextextended(${key}, 0)) as taken`.execute(session);
    if (rows[0]?.taken !== true) {
      options.onWait?.();
      await sql`select pg_advisory_lock(hashtextextended(${key}, 0))`.execute(session);
    }
    try {
      return await work();
    } finally {
      await sql`select pg_advisory_unlock(hashtextextended(${key}, 0))`.execute(session);
    }
  });
}
