import { expect } from 'chai';
import { actionDecider } from '../../commands/action/action-decider.ts';
import { DistinctApproverRequiredError } from '../../commands/action/action-lifecycle.ts';
import { approveAction } from '../../commands/action/approve-action.ts';
import { Commands } from '../../commands/command-bus.ts';
import { loadAction } from '../../commands/queries.ts';
import { Aggregates } from '../../commands/shared/aggregates.ts';
import { workspaceDecider } from '../../commands/workspace/workspace-decider.ts';
import { actionProposal } from '../support/action-fixtures.ts';
import { InMemoryEventStore } from '../../src/event-store/in-memory-event-store.ts';
import { Subjects } from '../../src/event-store/subjects.ts';

/** Approving reads the workspace's distinct-approver rule first, then decides on the action (in-memory store). */
const operator = { actor: { kind: 'operator' as const, id: 'op' }, correlationId: 'c' };
const byKey = (id: string) => ({ actor: { kind: 'api_key' as const, id }, correlationId: 'c' });
const proposal = actionProposal();

describe('approving an action under the workspace’s rule (process specs)', () => {
  let commands: Commands;
  const target = (keyId: string) => ({ workspaceId: 'ws', accountId: 'acc', actionId: 'a1', note: '', meta: byKey(keyId) });

  beforeEach(async () => {
    commands = new Commands(new Aggregates(new InMemoryEventStore(), new Subjects('spec'), null));
    await commands.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta: operator });
    await commands.handle(actionDecider, { type: 'ProposeAction', workspaceId: 'ws', accountId: 'acc', proposal, meta: byKey('k1') });
  });

  it('given the rule off, the proposing key approves', async () => {
    const approved = await approveAction(commands, target('k1'));
    expect(approved.state.status).to.equal('approved');
  });

  it('given the rule on, the proposing key is refused and another key approves', async () => {
    await commands.handle(workspaceDecider, { type: 'SetDistinctApprover', workspaceId: 'ws', required: true, meta: operator });
    let thrown: unknown;
    await approveAction(commands, target('k1')).catch((error: unknown) => (thrown = error));
    expect(thrown).to.be.instanceOf(DistinctApproverRequiredError);
    expect((await loadAction(commands.aggregates, 'ws', 'acc', 'a1')).state.status).to.equal('queued');
    expect((await approveAction(commands, target('k2'))).state.status).to.equal('approved');
  });
});
