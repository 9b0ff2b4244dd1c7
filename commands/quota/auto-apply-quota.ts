import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import { newEvent, type CommandMeta } from '../shared/new-event.ts';

/** Auto-applied actions per account per UTC day. */
export const AUTO_APPLY_DAILY_CAP = 20;

/**
 * One quota aggregate per account and UTC day (subject `...quota.<accountId>_<yyyymmdd>`),
 * so its state is at most 20 entries and a new day starts from zero. Reserving a slot
 * appends with the subject's expected sequence: under any concurrency at most 20 succeed.
 */
export interface QuotaState {
  readonly actionIds: readonly string[];
}

export const quotaFolder = {
  stateVersion: 1,
  initialState: (): QuotaState => ({ actionIds: [] }),
  evolve(state: QuotaState, event: DomainEvent): QuotaState {
    return event.type === 'AutoApplySlotReserved' ? { actionIds: [...state.actionIds, event.data.action_id] } : state;
  },
};

export class AutoApplyCapReachedError extends Error {
  constructor(readonly day: string, readonly cap: number) {
    super(`the account's ${cap} auto-apply slots of ${day} (UTC) are used`);
    this.name = 'AutoApplyCapReachedError';
  }
}

export interface ReserveAutoApplySlot {
  readonly workspaceId: string;
  readonly accountId: string;
  readonly day: string;
  readonly actionId: string;
  readonly cap: number;
  readonly meta: CommandMeta;
}

export function quotaAggregateId(accountId: string, day: string): string {
  return `${accountId}_${day.replaceAll('-', '')}`;
}

export function decideReserveAutoApplySlot(command: ReserveAutoApplySlot, state: QuotaState) {
  if (state.actionIds.includes(command.actionId)) return [];
  if (state.actionIds.length >= command.cap) throw new AutoApplyCapReachedError(command.day, command.cap);
  return [
    newEvent(
      'AutoApplySlotReserved',
      { action_id: command.actionId, day: command.day, slot: state.actionIds.length + 1 },
      {
        workspaceId: command.workspaceId,
        accountId: command.accountId,
        aggregate: { type: 'quota', id: quotaAggregateId(command.accountId, command.day) },
      },
      command.meta,
    ),
  ];
}
