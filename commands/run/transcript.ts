import type { DomainEvent, ToolCalledData } from '../../src/events/catalogue/index.ts';
import { newEvent, type CommandMeta } from '../shared/new-event.ts';

/** A run's transcript aggregate (subject `...run.<runId>`): the tool calls, in order. */
export interface TranscriptState {
  readonly toolCalls: number;
}

export const transcriptFolder = {
  stateVersion: 1,
  initialState: (): TranscriptState => ({ toolCalls: 0 }),
  evolve(state: TranscriptState, event: DomainEvent): TranscriptState {
    return event.type === 'ToolCalled' ? { toolCalls: Math.max(state.toolCalls, event.data.index) } : state;
  },
};

export interface RecordToolCall {
  readonly workspaceId: string;
  readonly accountId: string;
  readonly call: ToolCalledData;
  readonly meta: CommandMeta;
}

/** A call whose index is already recorded is a retried append: nothing more is written. */
export function decideRecordToolCall(command: RecordToolCall, state: TranscriptState) {
  if (command.call.index <= state.toolCalls) return [];
  return [
    newEvent(
      'ToolCalled',
      command.call,
      { workspaceId: command.workspaceId, accountId: command.accountId, aggregate: { type: 'run', id: command.call.run_id } },
      command.meta,
    ),
  ];
}
