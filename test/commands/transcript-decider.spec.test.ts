import { expect } from 'chai';
import { transcriptDecider, type RecordToolCall } from '../../commands/run/transcript.ts';
import type { ToolCalledData } from '../../src/events/catalogue/index.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

const meta = { actor: { kind: 'worker' as const, id: 'w1' }, correlationId: 'r1' };
const call = (index: number): ToolCalledData => ({ run_id: 'r1', index, name: 'get_search_terms', input: {}, ok: true, output: {}, duration_ms: 3 });
const record = (index: number): RecordToolCall => ({ type: 'RecordToolCall', workspaceId: 'ws', accountId: 'acc', call: call(index), meta });

describe('run transcript decider (specs)', () => {
  const spec = deciderSpec(transcriptDecider);
  it('records the first tool call', () => spec.given([]).when(record(1)).then([{ type: 'ToolCalled', data: { index: 1 } }]));
  it('records the next one', () => spec.given([recorded('ToolCalled', call(1))]).when(record(2)).then([{ type: 'ToolCalled', data: { index: 2 } }]));
  it('a retried call (index already recorded) appends nothing', () => spec.given([recorded('ToolCalled', call(1)), recorded('ToolCalled', call(2))]).when(record(1)).thenNothing());
  it('decides on the run’s own subject', () => {
    expect(transcriptDecider.streamOf(record(1))).to.deep.equal({ workspaceId: 'ws', accountId: 'acc', aggregate: { type: 'run', id: 'r1' } });
  });
});
