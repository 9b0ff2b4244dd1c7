import type { DomainEvent, ToolCalledData } from '../../src/events/catalogue/index.ts';
import { streams } from '../../src/event-store/subjects.ts';
import { unknownCommand, type Decider } from '../shared/decider.ts';
import { newEvent, type CommandMeta } from '../shared/new-event.ts';

/** A run's transcript aggregate (subject `...run.<runId>`): the tool calls, in order. */
export interface TranscriptState {
  readonly toolCalls: number;
}

const transcriptFold = {
  stateVersion: 1,
  initialState: (): TranscriptState => ({ toolCalls: 0 }),
  evolve(state: TranscriptState, event: DomainEvent): TranscriptState {
    return event.type === 'ToolCalled' ? { toolCalls: Math.max(state.toolCalls, event.data.index) } : state;
  },
};

export interface RecordToolCall {
  readonly type: 'RecordToolCall';
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
      streams.run(command.workspaceId, command.accountId, command.call.run_id),
      command.meta,
    ),
  ];
}

export type TranscriptCommand = RecordToolCall;

/** A run's transcript: its tool calls in order, each recorded once. */
export const transcriptDecider: Decider<TranscriptCommand, TranscriptState> = {
  name: 'transcript',
  ...transcriptFold,
  decide(command, state) {
    switch (command.type) {
      case 'RecordToolCall':
        return decideRecordToolCall(command, state);
      default:
        return unknownCommand(command.type);
    }
  },
  streamOf: (command) => streams.run(command.workspaceId, command.accountId, command.call.run_id),
};
