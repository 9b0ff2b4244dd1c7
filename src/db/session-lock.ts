import { sql, type Kysely } from 'kysely';

/**
 * Runs `work` while this process holds the Postgres session-level advisory lock named `key`,
 * on a pooled connection reserved for it: the other holders of the key wait (`onWait` says so
 * first). `held()` tells whether the lock is still this process's: a session that ended (a
 * network reset, an idle timeout, pg_terminate_backend) took the lock with it, and work that
 * must not overlap another holder checks it before its last step. Releasing never fails the
 * work: a lock whose session is gone is released already.
 *
 * Not behind a transaction-pooling PgBouncer: lock and unlock could land on different server
 * connections.
 *
 * @example
 * await withSessionLock(db, `shadow-schema:${shadow}`, async (held) => {
 *   await fold();
 *   if (!(await held())) throw new Error('lost the lock; nothing was swapped');
 *   await swap();
 * });
 */
export async function withSessionLock<T>(
  db: Kysely<any>,
  key: string,
  work: (held: () => Promise<boolean>) => Promise<T>,
  options: { readonly onWait?: () => void } = {},
): Promise<T> {
  return db.connection().execute(async (session) => {
    const { rows } = await sql<{ taken: boolean }>`select pg_try_advisory_lock(hashtextextended(${key}, 0)) as taken`.execute(session);
    if (rows[0]?.taken !== true) {
      options.onWait?.();
      await sql`select pg_advisory_lock(hashtextextended(${key}, 0))`.execute(session);
    }
    // A session-level lock lasts as long as its session (only its holder can unlock it): the
    // session still answering is the lock still held.
    const held = async () => {
      try {
        await sql`select 1`.execute(session);
        return true;
      } catch {
        return false;
      }
    };
    try {
      return await work(held);
    } finally {
      await sql`select pg_advisory_unlock(hashtextextended(${key}, 0))`.execute(session).catch(() => undefined);
    }
  });
}
