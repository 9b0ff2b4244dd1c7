import { v4 as uuidv4 } from 'uuid';
import { newEvent, type CommandMeta, type EventAddress } from '../../commands/shared/new-event.ts';
import type { UnsealedEvent } from '../../src/events/envelope.ts';
import { EMPTY_POSITION } from '../../src/event-store/event-store.ts';
import type { Infrastructure } from '../../src/runtime/infrastructure.ts';
import { inPool } from './bench-service.ts';
import { streams } from '../../src/event-store/subjects.ts';

/**
 * Schema-valid events for benchmarks that need a large, realistic stream: accounts
 * created, runs queued then canceled (the real projections apply them).
 */
export const BENCH_WORKSPACE = 'ws-bench';
export const BENCH_KEY_ID = 'key-bench';
export const BENCH_META: CommandMeta = { actor: { kind: 'system', id: 'bench' }, correlationId: 'bench' };
export const BENCH_BRIEF =
  'Pause every campaign whose cost per conversion over the last 14 days is more than twice the account average, ' +
  'and move 10% of their budget to the three campaigns with the best return on ad spend.';

function accountAddress(accountId: string): EventAddress {
  return { workspaceId: BENCH_WORKSPACE, accountId, aggregate: { type: 'account', id: accountId } };
}

export function accountCreated(accountId: string): UnsealedEvent {
  return newEvent('AccountCreated', { name: `Account ${accountId}`, platform: 'sandbox', sandbox_seed: 42 }, accountAddress(accountId), BENCH_META);
}

export function runQueued(accountId: string, runId: string): UnsealedEvent {
  return newEvent(
    'RunQueued',
    { run_id: runId, brief: BENCH_BRIEF, auto_apply: false, key_id: BENCH_KEY_ID, scope: 'write' },
    accountAddress(accountId),
    { ...BENCH_META, correlationId: runId },
  );
}

export function runCanceled(accountId: string, runId: string): UnsealedEvent {
  return newEvent('RunCanceled', { run_id: runId }, accountAddress(accountId), { ...BENCH_META, correlationId: runId });
}

/** Created, `cycles` queued-then-canceled runs, optionally one run left queued. */
export function accountHistory(accountId: string, cycles: number, trailingQueued: boolean): UnsealedEvent[] {
  const events: UnsealedEvent[] = [accountCreated(accountId)];
  for (let i = 0; i < cycles; i++) {
    const runId = uuidv4();
    events.push(runQueued(accountId, runId), runCanceled(accountId, runId));
  }
  if (trailingQueued) events.push(runQueued(accountId, uuidv4()));
  return events;
}

/**
 * Fills a stream with `accounts` account histories of `eventsPerAccount` events each,
 * appended with `writers` in flight on distinct subjects. Returns the account ids.
 */
export async function appendAccountHistories(infra: Infrastructure, accounts: number, eventsPerAccount: number, writers: number): Promise<string[]> {
  const ids = Array.from({ length: accounts }, (_, i) => `acc-${String(i).padStart(4, '0')}`);
  await inPool(ids, writers, async (accountId) => {
    const history = accountHistory(accountId, (eventsPerAccount - 2) / 2, true);
    await infra.store.append(infra.subjects.forAggregate(streams.account(BENCH_WORKSPACE, accountId)), history, EMPTY_POSITION);
  });
  return ids;
}
