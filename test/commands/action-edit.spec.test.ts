import { expect } from 'chai';
import { actionDecider, type ActionCommand } from '../../commands/action/action-decider.ts';
import { EditBlockedByPolicyError, editedParams, type ReviewedEdit } from '../../commands/action/action-edit.ts';
import { ActionChangedError, ActionNotInQueueError } from '../../commands/action/action-lifecycle.ts';
import { actionVersion } from '../../commands/action/action-version.ts';
import { approveAction } from '../../commands/action/approve-action.ts';
import { Commands } from '../../commands/command-bus.ts';
import { loadAction } from '../../commands/queries.ts';
import { Aggregates } from '../../commands/shared/aggregates.ts';
import { workspaceDecider } from '../../commands/workspace/workspace-decider.ts';
import { ValidationError } from '../../src/errors/common-errors.ts';
import type { ActionProposedData, EditableVersion } from '../../src/events/catalogue/index.ts';
import { InMemoryEventStore } from '../../src/event-store/in-memory-event-store.ts';
import { Subjects } from '../../src/event-store/subjects.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

/** Edit, then approve: what an approver may change, and what the action records (specs on the decider and the in-memory store). */
const meta = { actor: { kind: 'api_key' as const, id: 'k2' }, correlationId: 'c' };
const negatives: ActionProposedData = {
  action_id: 'a1',
  run_id: null,
  kind: 'add_negative_keywords',
  summary: 'Add 3 negative keyword(s) to "Brand": free, cheap, jobs',
  reason: 'waste',
  params: {
    campaign_id: 'c1',
    keywords: [
      { text: 'free', match_type: 'phrase' },
      { text: 'cheap', match_type: 'phrase' },
      { text: 'jobs', match_type: 'phrase' },
    ],
  },
  based_on: { campaign_status: 'enabled', matched_cost_30d: 30, matched_conversions_30d: 0, account_cost_30d: 1000, blocked_keywords: [] },
  risk_tier: 'safe',
  disposition: 'queued',
  policy_reasons: ['3 negative keyword(s) on search terms without conversions, 3.0% of spend; reversible'],
  auto_apply_requested: false,
  proposer_key_id: 'k1',
};
const budget: ActionProposedData = {
  ...negatives,
  kind: 'set_campaign_budget',
  summary: 'Change the daily budget of "Brand" from 100 to 110',
  params: { campaign_id: 'c1', daily_budget: 110 },
  based_on: { campaign_status: 'enabled', daily_budget: 100 },
  policy_reasons: ['budget change of 10.0% is within the safe ±20.0%'],
};
const onAction = { workspaceId: 'ws', accountId: 'acc', actionId: 'a1', meta };
const keptKeywords = [
  { text: 'free', match_type: 'exact' as const },
  { text: 'jobs', match_type: 'phrase' as const },
];
const afterNegatives: EditableVersion = {
  summary: 'Add 2 negative keyword(s) to "Brand": free (exact), jobs (phrase)',
  params: { campaign_id: 'c1', keywords: keptKeywords },
  based_on: { campaign_status: 'enabled', matched_cost_30d: 12, matched_conversions_30d: 0, account_cost_30d: 1000, blocked_keywords: [] },
  risk_tier: 'safe',
  policy_reasons: ['2 negative keyword(s) on search terms without conversions, 1.2% of spend; reversible'],
};
const approveEdited = (edit: ReviewedEdit): ActionCommand => ({ type: 'ApproveAction', ...onAction, note: '', requireDistinctApprover: false, edit });

describe('edit, then approve (specs)', () => {
  const spec = deciderSpec(actionDecider);
  const proposedNegatives = recorded('ActionProposed', negatives);
  const proposedBudget = recorded('ActionProposed', budget);

  it('given queued negatives, an edit that drops one and re-matches another records both versions, then the approval', () =>
    spec
      .given([proposedNegatives])
      .when(approveEdited({ edit: { keywords: keptKeywords }, after: afterNegatives }))
      .then([
        {
          type: 'ActionEdited',
          data: {
            before: { summary: negatives.summary, params: negatives.params, based_on: negatives.based_on, risk_tier: 'safe', policy_reasons: negatives.policy_reasons },
            after: afterNegatives,
            edit: { keywords: keptKeywords },
          },
        },
        { type: 'ActionApproved' },
      ]));

  it('the edited version is the action from then on: its params are what the apply worker applies', () => {
    const events = actionDecider.decide(approveEdited({ edit: { keywords: keptKeywords }, after: afterNegatives }), actionDecider.evolve(actionDecider.initialState(), proposedNegatives));
    const state = [proposedNegatives, ...events].reduce((s, e) => actionDecider.evolve(s, e as never), actionDecider.initialState());
    expect(state.status).to.equal('approved');
    expect(state.params).to.deep.equal({ campaign_id: 'c1', keywords: keptKeywords });
    expect(state.summary).to.equal(afterNegatives.summary);
  });

  it('refuses an edit that adds a keyword, saying what to send instead (422)', () => {
    const added = [...keptKeywords, { text: 'competitor', match_type: 'exact' as const }];
    spec
      .given([proposedNegatives])
      .when(approveEdited({ edit: { keywords: added }, after: { ...afterNegatives, params: { campaign_id: 'c1', keywords: added } } }))
      .thenThrows(ValidationError, 422);
    let thrown: ValidationError | undefined;
    try {
      editedParams('add_negative_keywords', negatives.params, { keywords: added });
    } catch (error) {
      thrown = error as ValidationError;
    }
    expect(thrown!.errors).to.have.length(1);
    expect(thrown!.errors[0]!.pointer).to.equal('/edit/keywords/2');
    expect(thrown!.errors[0]!.message).to.include('never add one').and.to.include('"free", "cheap", "jobs"');
  });

  describe('an edit stored without its approval (the append stopped after ActionEdited)', () => {
    const edited150: EditableVersion = { summary: budget.summary, based_on: budget.based_on, params: { campaign_id: 'c1', daily_budget: 150 }, risk_tier: 'review', policy_reasons: ['budget change of 50.0% exceeds the safe ±20.0%'] };
    const storedEdit = recorded(
      'ActionEdited',
      { before: { summary: budget.summary, params: budget.params, based_on: budget.based_on, risk_tier: 'safe', policy_reasons: budget.policy_reasons }, after: edited150, edit: { daily_budget: 150 } },
      { actor: meta.actor, time: '2026-11-21T10:00:01.000Z' },
    );
    // The version the approver saw: the action as proposed.
    const seen = actionVersion({ status: 'queued', params: budget.params, changedAt: '2026-11-21T10:00:00.000Z' });
    const again = (actor: { kind: 'api_key'; id: string }, expectedVersion: string | undefined): ActionCommand => ({
      type: 'ApproveAction', ...onAction, meta: { ...meta, actor }, note: '', requireDistinctApprover: false, edit: { edit: { daily_budget: 150 }, after: edited150 },
      ...(expectedVersion === undefined ? {} : { expectedVersion }),
    });

    it('given it, when the same approver sends the request again with the version it saw, then only the approval is recorded', () =>
      spec.given([proposedBudget, storedEdit]).when(again(meta.actor, seen)).then([{ type: 'ActionApproved' }]));

    it('given it, when the same approver sends it again without a version, then only the approval is recorded', () =>
      spec.given([proposedBudget, storedEdit]).when(again(meta.actor, undefined)).then([{ type: 'ActionApproved' }]));

    it('given it, when another approver sends the same request with that old version, then it is refused: the action changed (409)', () =>
      spec.given([proposedBudget, storedEdit]).when(again({ kind: 'api_key', id: 'k3' }, seen)).thenThrows(ActionChangedError, 409));
  });

  it('refuses to edit an approved action (409)', () =>
    spec
      .given([proposedNegatives, recorded('ActionApproved', { note: '' })])
      .when(approveEdited({ edit: { keywords: keptKeywords }, after: afterNegatives }))
      .thenThrows(ActionNotInQueueError, 409));

  it('records a riskier budget edit with its new tier and reasons (still approvable by a person)', () =>
    spec
      .given([proposedBudget])
      .when(
        approveEdited({
          edit: { daily_budget: 150 },
          after: { summary: budget.summary, based_on: budget.based_on, params: { campaign_id: 'c1', daily_budget: 150 }, risk_tier: 'review', policy_reasons: ['budget change of 50.0% exceeds the safe ±20.0%'] },
        }),
      )
      .then([{ type: 'ActionEdited', data: { after: { summary: budget.summary, params: { campaign_id: 'c1', daily_budget: 150 }, based_on: budget.based_on, risk_tier: 'review', policy_reasons: ['budget change of 50.0% exceeds the safe ±20.0%'] } } }, { type: 'ActionApproved' }]));

  it('refuses an edited version the policy blocks (422), recording nothing', () =>
    spec
      .given([proposedBudget])
      .when(approveEdited({ edit: { daily_budget: 500 }, after: { ...afterNegatives, params: { campaign_id: 'c1', daily_budget: 500 }, risk_tier: 'blocked', policy_reasons: ['changes the budget by 400.0% (maximum ±100.0%)'] } }))
      .thenThrows(EditBlockedByPolicyError, 422));

  it('refuses a field of another kind, and pause_keywords actions altogether', () => {
    expect(() => editedParams('set_campaign_budget', budget.params, { keywords: keptKeywords })).to.throw(ValidationError, 'changes daily_budget and nothing else');
    expect(() => editedParams('pause_keywords', { keyword_ids: ['k'] }, { daily_budget: 1 })).to.throw(ValidationError, 'cannot be edited');
  });

  it('refuses a keyword listed twice or no keyword at all, and keeps values to the platform’s precision', () => {
    expect(() => editedParams('add_negative_keywords', negatives.params, { keywords: [{ text: 'free', match_type: 'exact' }, { text: 'FREE ', match_type: 'phrase' }] })).to.throw(ValidationError);
    expect(() => editedParams('add_negative_keywords', negatives.params, { keywords: [] })).to.throw(ValidationError);
    expect(editedParams('set_campaign_budget', budget.params, { daily_budget: 123.456 })).to.deep.equal({ campaign_id: 'c1', daily_budget: 123.46 });
    expect(editedParams('set_target_roas', { campaign_id: 'c1', target_roas_pct: 400 }, { target_roas_pct: 412.34 })).to.deep.equal({ campaign_id: 'c1', target_roas_pct: 412.3 });
    expect(() => editedParams('set_target_cpa', { campaign_id: 'c1', target_cpa: 20 }, { target_cpa: 0.001 })).to.throw(ValidationError, 'positive');
  });
});

describe('edit, then approve through the approve process (in-memory store)', () => {
  it('appends ActionEdited and ActionApproved together, and the loaded action carries the edited params', async () => {
    const commands = new Commands(new Aggregates(new InMemoryEventStore(), new Subjects('spec'), null));
    const operator = { actor: { kind: 'operator' as const, id: 'op' }, correlationId: 'c' };
    await commands.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId: 'ws', name: 'w', meta: operator });
    await commands.handle(actionDecider, { type: 'ProposeAction', workspaceId: 'ws', accountId: 'acc', proposal: negatives, meta: { ...meta, actor: { kind: 'api_key', id: 'k1' } } });
    const result = await approveAction(commands, { ...onAction, note: 'kept two', edit: { edit: { keywords: keptKeywords }, after: afterNegatives } });
    expect(result.appended.map((e) => e.event.type)).to.deep.equal(['ActionEdited', 'ActionApproved']);
    const loaded = (await loadAction(commands.aggregates, 'ws', 'acc', 'a1')).state;
    expect(loaded.status).to.equal('approved');
    expect(loaded.params).to.deep.equal(afterNegatives.params);
    expect(loaded.basedOn).to.deep.equal(afterNegatives.based_on);
  });
});
