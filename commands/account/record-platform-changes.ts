import type { PlatformChangeObservedData } from '../../src/events/catalogue/index.ts';
import { AccountNotFoundError } from '../errors.ts';
import { newEvent, type CommandMeta } from '../shared/new-event.ts';
import type { AccountState } from './account-state.ts';
import { streams } from '../../src/event-store/subjects.ts';

export interface RecordPlatformChanges {
  readonly type: 'RecordPlatformChanges';
  readonly workspaceId: string;
  readonly accountId: string;
  /** Oldest first, as the platform listed them. */
  readonly changes: readonly PlatformChangeObservedData[];
  readonly meta: CommandMeta;
}

/**
 * Records the platform's changes not recorded yet. Decided on the account's aggregate, so
 * two importers of the same account (two apply workers) record each change once: a change
 * older than the newest recorded, or recorded at that same time already, is skipped.
 */
export function decideRecordPlatformChanges(command: RecordPlatformChanges, state: AccountState) {
  if (!state.exists || state.workspaceId !== command.workspaceId) throw new AccountNotFoundError(command.accountId);
  let { lastTime, idsAtLastTime } = state.platformChanges;
  const seen = new Set(idsAtLastTime);
  const events = [];
  for (const change of [...command.changes].sort((a, b) => (a.change_date_time < b.change_date_time ? -1 : a.change_date_time > b.change_date_time ? 1 : 0))) {
    if (change.change_date_time < lastTime || (change.change_date_time === lastTime && seen.has(change.change_id))) continue;
    if (change.change_date_time > lastTime) {
      lastTime = change.change_date_time;
      seen.clear();
    }
    seen.add(change.change_id);
    idsAtLastTime = [...seen];
    events.push(newEvent('PlatformChangeObserved', change, streams.account(command.workspaceId, command.accountId), command.meta));
  }
  return events;
}
