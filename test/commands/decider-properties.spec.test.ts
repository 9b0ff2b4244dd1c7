import { isDeepStrictEqual } from 'node:util';
import { expect } from 'chai';
import { actionDecider, type ActionCommand } from '../../commands/action/action-decider.ts';
import {
  ActionChangedError,
  ActionNotFoundError,
  ActionNotInQueueError,
  ApplyClaimHeldError,
  ApplyClaimLostError,
  DistinctApproverRequiredError,
  NothingToApplyError,
  type ApplyResult,
} from '../../commands/action/action-lifecycle.ts';
import { EditBlockedByPolicyError, type ActionEdit } from '../../commands/action/action-edit.ts';
import type { ActionState } from '../../commands/action/action-state.ts';
import { actionVersion } from '../../commands/action/action-version.ts';
import { accountDecider, type AccountCommand } from '../../commands/account/account-decider.ts';
import { RunNotClaimableError, type RunOutcome } from '../../commands/account/run-lifecycle.ts';
import { AlreadyExistsError as AlreadyExists, AccountNotFoundError, RunInProgressError, RunNotCancelableError, WorkspaceNotFoundError } from '../../commands/errors.ts';
import {
  AUTO_APPLY_DAILY_CAP,
  AutoApplyCapReachedError,
  CampaignAlreadyChangedTodayError,
  CampaignChangedWithinADayError,
  DailySpendShareCapError,
  DayBandExceededError,
  quotaDecider,
  type AutoApplyTouch,
  type BandedField,
  type QuotaState,
  type ReserveAutoApplySlot,
} from '../../commands/quota/auto-apply-quota.ts';
import { workspaceDecider, type WorkspaceCommand } from '../../commands/workspace/workspace-decider.ts';
import type { Command, Decider } from '../../commands/shared/decider.ts';
import type { ActionKind, DomainEvent, RiskTier } from '../../src/events/catalogue/index.ts';
import type { Actor } from '../../src/events/envelope.ts';
import { ValidationError } from '../../src/errors/common-errors.ts';
import { actionProposal } from '../support/action-fixtures.ts';
import { seededRandom } from '../support/seeded-random.ts';

/**
 * Model-based properties of the deciders (pure: decide and evolve only). Each property drives
 * seeded-random command sequences (a controllable clock, repeated, out-of-order and stale
 * commands, lost acknowledgements and crashes between the events of one append) through a
 * decider and a small reference model of the documented rules (docs/policy.md, docs/api.md),
 * and after every step checks: the decider accepts exactly when the model allows the command
 * (with the same error class when it refuses), the events it emits evolve the state to the
 * model's state, a fold of the full event list from scratch equals the incremental state, no
 * terminal state is left, and caps stay within their limits.
 *
 * PROP_SEED=<n> replays a run; PROP_RUNS=<n> scales the number of sequences.
 */
const SEED = Number(process.env.PROP_SEED ?? Math.floor(Math.random() * 2 ** 31));
const RUNS = Number(process.env.PROP_RUNS ?? 1);
// eslint-disable-next-line no-console
console.log(`      decider properties: PROP_SEED=${SEED}`);

type Rng = () => number;
const pick = <T>(random: Rng, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const chance = (random: Rng, p: number) => random() < p;

type ErrorClass = new (...args: any[]) => Error;
/** What the model says of a command: the events' effect (a next model state), a no-op, or one of the allowed refusals. */
type Verdict<M> = { kind: 'accept'; next: M } | { kind: 'noop' } | { kind: 'refuse'; errors: readonly ErrorClass[] };

/** The decider's answer: its events, or what it threw. */
function decideOf<C extends Command, S>(decider: Decider<C, S>, command: C, state: S): { events: DomainEvent[] } | { error: unknown } {
  try {
    return { events: decider.decide(command, state) as unknown as DomainEvent[] };
  } catch (error) {
    return { error };
  }
}

/** The exact class: a subclass (EditBlockedByPolicyError of ValidationError) is not its parent's answer. */
const isExactly = (error: unknown, cls: ErrorClass) => error instanceof cls && Object.getPrototypeOf(error) === cls.prototype;

class PropertyFailure extends Error {}

/** How often each verdict was reached (PROP_STATS=1 prints it): a property that never meets a rule tests nothing. */
const coverage = new Map<string, number>();

/** Runs one step through the decider and checks it against the model's verdict; returns the events to store. */
function checkStep<C extends Command, S, M>(
  ctx: { seed: number; trace: string[] },
  decider: Decider<C, S>,
  command: C,
  state: S,
  verdict: Verdict<M>,
  describe: string,
): DomainEvent[] {
  ctx.trace.push(describe);
  const answer = decideOf(decider, command, state);
  const key = `${decider.name} ${command.type} ${verdict.kind === 'refuse' ? verdict.errors.map((e) => e.name).join('|') : verdict.kind}`;
  coverage.set(key, (coverage.get(key) ?? 0) + 1);
  const fail = (why: string) => {
    throw new PropertyFailure(`${why}\n  seed ${ctx.seed} (PROP_SEED=${SEED}), steps:\n    ${ctx.trace.slice(-25).join('\n    ')}`);
  };
  if ('error' in answer) {
    const error = answer.error as Error;
    if (verdict.kind !== 'refuse') fail(`decider refused with ${error?.constructor?.name}: ${error?.message}; the model ${verdict.kind === 'noop' ? 'expects nothing to be appended' : 'accepts'}`);
    if (verdict.kind === 'refuse' && !verdict.errors.some((cls) => isExactly(error, cls))) {
      fail(`decider refused with ${error?.constructor?.name} (${error?.message}); the model refuses with ${verdict.errors.map((c) => c.name).join(' or ')}`);
    }
    return [];
  }
  const types = answer.events.map((e) => e.type).join(', ') || '(nothing)';
  if (verdict.kind === 'refuse') fail(`decider appended ${types}; the model refuses with ${verdict.errors.map((c) => c.name).join(' or ')}`);
  if (verdict.kind === 'noop' && answer.events.length > 0) fail(`decider appended ${types}; the model expects nothing (a retry or an idempotent command)`);
  if (verdict.kind === 'accept' && answer.events.length === 0) fail('decider appended nothing; the model accepts the command');
  return answer.events;
}

function foldAll<S>(decider: Decider<Command, S>, events: readonly DomainEvent[]): S {
  return events.reduce((s, e) => decider.evolve(s, e), decider.initialState());
}

// ---------------------------------------------------------------------------------------------
// Action lifecycle
// ---------------------------------------------------------------------------------------------

type Status = ActionState['status'];
const AWAITING: readonly Status[] = ['queued', 'returned'];
const READY: readonly Status[] = ['approved', 'auto_applied', 'applying'];
const TERMINAL: readonly Status[] = ['applied', 'rejected', 'blocked'];

interface ActionModel {
  readonly exists: boolean;
  readonly kind: ActionKind;
  readonly status: Status;
  readonly params: Record<string, unknown>;
  readonly riskTier: RiskTier | null;
  readonly autoApplied: boolean;
  readonly proposerKey: string | null;
  readonly attempts: number;
  readonly claim: { readonly id: string; readonly leaseUntil: number | null } | null;
  /** Bumped by every event a person sees (all but heartbeats): what `expected_version` names. */
  readonly versionNo: number;
  /** The last attempt that ended, how, and the version right after: a finish decided again after a lost ack is a no-op exactly then. */
  readonly lastEnd: { readonly claimId: string; readonly result: string; readonly versionNo: number; readonly missingReturn: boolean } | null;
  /** A final failure (will_retry false) was recorded: no new attempt may start before a person decides again. */
  readonly finalFailure: boolean;
  /** Only the ActionEdited of an edit-and-approve was stored (a crash mid-append). */
  readonly editedNotApproved: boolean;
  /** Who made that edit, and the version number before it: that approver's request, sent again, completes the approval. */
  readonly editedBy: string | null;
  readonly versionNoBeforeEdit: number | null;
  /**
   * The last approval or rejection: who, and the version numbers before it and before the edit
   * it was made with. The same decision by the same actor sent again (its acknowledgement lost),
   * naming one of those or none, records nothing (docs/api.md, "Sending a decision again").
   */
  readonly lastDecision: {
    readonly decision: 'approved' | 'rejected';
    readonly actor: string;
    readonly text: string;
    readonly edit: unknown;
    readonly versionNo: number;
    readonly versionNoBeforeEdit: number | null;
  } | null;
  /** The edit of that stored ActionEdited, as its request sent it. */
  readonly editedEdit: unknown;
}

const resultKey = (r: ApplyResult) => (r.kind === 'failed' ? `failed:${r.willRetry}` : r.kind);
const KEYWORDS = [
  { text: 'free', match_type: 'exact' },
  { text: 'cheap', match_type: 'phrase' },
];
const PARAMS: Record<string, Record<string, unknown>> = {
  set_target_cpa: { campaign_id: 'c1', target_cpa: 21 },
  set_campaign_budget: { campaign_id: 'c1', daily_budget: 100 },
  add_negative_keywords: { campaign_id: 'c1', keywords: KEYWORDS },
  pause_keywords: { campaign_id: 'c1', keyword_ids: ['1-2'] },
};

/** docs/api.md "Edit, then approve": the params an edit leads to, or null when the edit is refused (422). */
function modelEdit(kind: ActionKind, params: Record<string, unknown>, edit: ActionEdit): Record<string, unknown> | null {
  const field = ({ set_target_cpa: 'target_cpa', set_campaign_budget: 'daily_budget', set_target_roas: 'target_roas_pct', add_negative_keywords: 'keywords' } as Record<string, string>)[kind];
  if (!field) return null; // pause_keywords cannot be edited
  const sent = Object.keys(edit).filter((k) => (edit as Record<string, unknown>)[k] !== undefined);
  if (sent.length !== 1 || sent[0] !== field) return null;
  if (field === 'keywords') {
    const proposed = new Set(((params.keywords ?? []) as { text: string }[]).map((k) => k.text.trim().toLowerCase()));
    const kept = edit.keywords!.map((k) => ({ text: k.text.trim().toLowerCase(), match_type: k.match_type }));
    if (kept.length === 0 || kept.some((k) => !proposed.has(k.text)) || new Set(kept.map((k) => k.text)).size !== kept.length) return null;
    return { ...params, keywords: kept };
  }
  const value = (edit as Record<string, number>)[field]!;
  const scale = field === 'target_roas_pct' ? 10 : 100;
  if (!Number.isFinite(value) || Math.round(value * scale) <= 0) return null;
  return { ...params, [field]: Math.round(value * scale) / scale };
}

function randomEdit(random: Rng, kind: ActionKind): ActionEdit {
  const r = random();
  if (kind === 'add_negative_keywords' || r < 0.1) {
    const keep = KEYWORDS.filter(() => chance(random, 0.6)).map((k) => ({ text: chance(random, 0.3) ? ` ${k.text.toUpperCase()} ` : k.text, match_type: pick(random, ['exact', 'phrase', 'broad'] as const) }));
    if (chance(random, 0.15)) keep.push({ text: 'added', match_type: 'exact' });
    return { keywords: keep };
  }
  const value = pick(random, [0, 0.001, 90, 101.256, 20.5, -3, 130]);
  if (r < 0.2) return { target_roas_pct: value };
  return kind === 'set_campaign_budget' || (r < 0.3 && kind !== 'set_target_cpa') ? { daily_budget: value } : { target_cpa: value };
}

function actionModelOf(state: ActionState): Pick<ActionModel, 'status' | 'params' | 'autoApplied' | 'attempts' | 'claim' | 'riskTier'> {
  return {
    status: state.status,
    params: state.params,
    autoApplied: state.autoApplied,
    attempts: state.attempts,
    riskTier: state.riskTier,
    claim: state.claim ? { id: state.claim.id, leaseUntil: state.claim.leaseUntil === null ? null : Date.parse(state.claim.leaseUntil) } : null,
  };
}

const T0 = Date.parse('2026-11-21T10:00:00.000Z');
const LEASE = 30_000;

type CrashOn = 'none' | 'ActionEdited' | 'ActionApplyFailed';
function runActionSequence(seed: number, steps: number, options: { crashOn: CrashOn; sameMsSteps: boolean }) {
  const random = seededRandom(seed);
  const ctx = { seed, trace: [] as string[] };
  let now = T0;
  const kind = pick(random, ['set_target_cpa', 'set_campaign_budget', 'add_negative_keywords', 'pause_keywords'] as const);
  const proposerActor: Actor = chance(random, 0.7) ? { kind: 'api_key', id: 'k1' } : { kind: 'worker', id: 'agent-1' };
  const proposerKeyId = proposerActor.kind === 'api_key' ? 'k1' : chance(random, 0.5) ? 'k3' : null;
  const disposition = pick(random, ['queued', 'queued', 'auto_applied', 'auto_applied', 'blocked'] as const);
  let requireDistinct = chance(random, 0.5);
  const ids = { workspaceId: 'ws', accountId: 'acc', actionId: 'a1' };
  let model: ActionModel = {
    exists: false, kind, status: 'none', params: {}, riskTier: null, autoApplied: false, proposerKey: null, attempts: 0, claim: null, versionNo: 0, lastEnd: null, finalFailure: false, editedNotApproved: false, editedBy: null, versionNoBeforeEdit: null, lastDecision: null, editedEdit: null,
  };
  let state = actionDecider.initialState();
  const events: DomainEvent[] = [];
  const versionsSeen: { no: number; version: string }[] = [];
  const claimsSeen: string[] = [];
  let claimCounter = 0;
  // A worker ends its attempt one way; a finish of the same claim sent again (lost ack, redelivery) says the same.
  const outcomeOfClaim = new Map<string, ApplyResult>();
  type Sent = { command: ActionCommand; label: string; expectedNo: number | undefined };
  let lastAccepted: Sent | null = null;
  let pendingRetry: Sent | null = null;

  for (let step = 0; step < steps; step++) {
    now += options.sameMsSteps && chance(random, 0.7) ? 0 : 1 + Math.floor(random() * (chance(random, 0.2) ? 40_000 : 3_000));
    if (chance(random, 0.05)) requireDistinct = !requireDistinct;
    const meta = (actor: Actor) => ({ actor, correlationId: 'c', now: new Date(now) });
    const currentVersion = actionVersion({ status: state.status, params: state.params, changedAt: state.changedAt });
    if (state.exists) versionsSeen.push({ no: model.versionNo, version: currentVersion });

    let command: ActionCommand;
    let label: string;
    let expectedNo: number | undefined;
    if (pendingRetry) {
      // The previous decision's acknowledgement was lost (or it crashed mid-append): the same command is decided again.
      ({ command, label, expectedNo } = pendingRetry);
      command = { ...command, meta: { ...command.meta, now: new Date(now) } } as ActionCommand;
      label = `retry after lost ack: ${label}`;
      pendingRetry = null;
    } else if (!model.exists || chance(random, 0.03)) {
      const tier: RiskTier = disposition === 'blocked' ? 'blocked' : disposition === 'auto_applied' ? 'safe' : pick(random, ['safe', 'review'] as const);
      const proposal = actionProposal({ kind, params: PARAMS[kind]!, risk_tier: tier, disposition, auto_apply_requested: disposition === 'auto_applied', proposer_key_id: proposerKeyId });
      command = { type: 'ProposeAction', workspaceId: 'ws', accountId: 'acc', proposal, meta: meta(proposerActor) };
      label = `ProposeAction(${kind}, ${disposition}, proposer ${proposerKeyId})`;
    } else {
      const r = random();
      const staleClaim = () => (claimsSeen.length > 0 && chance(random, 0.5) ? pick(random, claimsSeen) : model.claim?.id ?? `c${claimCounter + 1}`);
      const expected = () => {
        const x = random();
        const seen = x < 0.35 ? undefined : x < 0.75 ? { no: model.versionNo, version: currentVersion } : pick(random, versionsSeen);
        expectedNo = seen?.no;
        return seen?.version;
      };
      if (r < 0.25) {
        const actor: Actor = pick(random, [{ kind: 'api_key', id: 'k1' }, { kind: 'api_key', id: 'k2' }, { kind: 'api_key', id: 'k3' }, { kind: 'operator', id: 'op' }] as Actor[]);
        const edit = chance(random, 0.4) ? randomEdit(random, kind) : undefined;
        const editedTo = edit ? modelEdit(kind, model.params, edit) : null;
        const tier = pick(random, ['safe', 'review', 'review', 'blocked'] as const);
        const reviewed = edit
          ? { edit, after: { summary: 'edited', params: editedTo ?? model.params, based_on: {}, risk_tier: tier, policy_reasons: tier === 'blocked' ? ['too far'] : [] } }
          : undefined;
        const expectedVersion = expected();
        command = { type: 'ApproveAction', ...ids, note: 'ok', requireDistinctApprover: requireDistinct, ...(expectedVersion ? { expectedVersion } : {}), ...(reviewed ? { edit: reviewed } : {}), meta: meta(actor) };
        label = `ApproveAction(by ${actor.kind}:${actor.id}, distinct ${requireDistinct}, expected ${expectedVersion === undefined ? '-' : expectedVersion === currentVersion ? 'current' : 'stale'}${edit ? `, edit ${JSON.stringify(edit)} -> ${tier}` : ''})`;
      } else if (r < 0.33) {
        const expectedVersion = expected();
        command = { type: 'RejectAction', ...ids, reason: 'no', ...(expectedVersion ? { expectedVersion } : {}), meta: meta({ kind: 'api_key', id: pick(random, ['k1', 'k2']) }) };
        label = `RejectAction(expected ${expectedVersion === undefined ? '-' : expectedVersion === currentVersion ? 'current' : 'stale'})`;
      } else if (r < 0.55) {
        const claimId = chance(random, 0.85) ? `c${++claimCounter}` : staleClaim();
        command = { type: 'StartApply', ...ids, workerId: pick(random, ['w1', 'w2']), claimId, leaseMs: LEASE, meta: meta({ kind: 'worker', id: 'w' }) };
        label = `StartApply(${claimId}) at +${(now - T0) / 1000}s`;
      } else if (r < 0.65) {
        const claimId = staleClaim();
        command = { type: 'HeartbeatApply', ...ids, workerId: 'w1', claimId, leaseMs: LEASE, meta: meta({ kind: 'worker', id: 'w' }) };
        label = `HeartbeatApply(${claimId}) at +${(now - T0) / 1000}s`;
      } else {
        const claimId = chance(random, 0.3) ? null : staleClaim();
        const decided = claimId === null ? undefined : outcomeOfClaim.get(claimId);
        const result: ApplyResult = decided ?? (claimId === null && chance(random, 0.8)
          ? { kind: 'returned', reason: 'kill switch' }
          : pick(random, [
              { kind: 'applied' },
              { kind: 'returned', reason: 're-check' },
              { kind: 'failed', error: '503', willRetry: true },
              { kind: 'failed', error: 'refused', willRetry: false, refused: true },
            ] as ApplyResult[]));
        if (claimId !== null) outcomeOfClaim.set(claimId, result);
        command = { type: 'FinishApply', ...ids, workerId: 'w1', claimId, result, meta: meta({ kind: 'worker', id: 'w' }) };
        label = `FinishApply(${claimId ?? 'no claim'}, ${resultKey(result)}) at +${(now - T0) / 1000}s`;
      }
    }

    const verdict = actionVerdict(model, command, now, expectedNo);
    const before = state.status;
    const emitted = checkStep(ctx, actionDecider, command, state, verdict, label);
    // A crash between the events of one append leaves a prefix (NATS 2.9 has no atomic batch: jetstream-event-store.ts).
    const crashed = emitted.length > 1 && emitted[0]!.type === options.crashOn && chance(random, 0.3);
    const stored = crashed ? emitted.slice(0, 1) : emitted;
    if (crashed) ctx.trace.push(`  (crash: only ${stored[0]!.type} of ${emitted.map((e) => e.type).join(' + ')} stored)`);
    for (const event of stored) {
      events.push(event);
      state = actionDecider.evolve(state, event);
    }
    if (verdict.kind === 'accept') {
      model = crashed ? modelAfterPrefix(model, command, stored[0]!, now) : verdict.next;
      if (command.type === 'StartApply') claimsSeen.push(command.claimId);
      lastAccepted = { command, label, expectedNo };
      // After a crash the process that decided is gone: its retry may come (an approver's client), or not (a worker's redelivered message goes to another worker).
      if (crashed ? chance(random, 0.5) : chance(random, 0.15)) pendingRetry = lastAccepted;
    } else if (chance(random, 0.05) && lastAccepted) {
      pendingRetry = lastAccepted; // a late duplicate of an older command
    }

    // The decider's state is the model's state; a fold from scratch is the incremental state.
    const seen = actionModelOf(state);
    const expectedState = { status: model.status, params: model.params, autoApplied: model.autoApplied, attempts: model.attempts, riskTier: model.riskTier, claim: model.claim };
    if (JSON.stringify(seen) !== JSON.stringify(expectedState)) {
      throw new PropertyFailure(`state differs from the model after "${label}":\n  decider ${JSON.stringify(seen)}\n  model   ${JSON.stringify(expectedState)}\n  seed ${seed} (PROP_SEED=${SEED}), steps:\n    ${ctx.trace.slice(-25).join('\n    ')}`);
    }
    if (TERMINAL.includes(before) && state.status !== before) throw new PropertyFailure(`left terminal status ${before} for ${state.status} after ${label} (seed ${seed})`);
    expect(foldAll(actionDecider as Decider<Command, ActionState>, events)).to.deep.equal(state);
  }
}

/** docs/policy.md and docs/api.md, as a model of one action. */
function actionVerdict(m: ActionModel, command: ActionCommand, now: number, expectedNo: number | undefined): Verdict<ActionModel> {
  const bump = (next: Partial<ActionModel>): ActionModel => ({ ...m, ...next, versionNo: m.versionNo + 1 });
  const liveClaim = m.status === 'applying' && m.claim !== null && m.claim.leaseUntil !== null && m.claim.leaseUntil > now;
  switch (command.type) {
    case 'ProposeAction': {
      if (m.exists) return { kind: 'noop' }; // a retried append
      const p = command.proposal;
      return { kind: 'accept', next: bump({ exists: true, status: p.disposition, params: p.params, riskTier: p.risk_tier, autoApplied: p.disposition === 'auto_applied', proposerKey: p.proposer_key_id ?? (command.meta.actor.kind === 'api_key' ? command.meta.actor.id : null) }) };
    }
    case 'ApproveAction':
    case 'RejectAction': {
      if (!m.exists) return { kind: 'refuse', errors: [ActionNotFoundError] };
      const actor = `${command.meta.actor.kind}:${command.meta.actor.id}`;
      const decision = command.type === 'ApproveAction' ? 'approved' : 'rejected';
      const text = command.type === 'ApproveAction' ? command.note : command.reason;
      if (!AWAITING.includes(m.status)) {
        const last = m.lastDecision;
        if (last && last.decision === decision && last.actor === actor && last.text === text) {
          const edit = command.type === 'ApproveAction' ? command.edit?.edit : undefined;
          const sameRequest =
            edit !== undefined
              ? last.edit !== null && isDeepStrictEqual(last.edit, edit) && (command.expectedVersion === undefined || expectedNo === last.versionNoBeforeEdit)
              : last.edit === null && (command.expectedVersion === undefined || expectedNo === last.versionNo);
          if (sameRequest) return { kind: 'noop' };
        }
        return { kind: 'refuse', errors: [ActionNotInQueueError] };
      }
      const decided = (versionNo: number, versionNoBeforeEdit: number | null, edit: unknown) => ({ lastDecision: { decision, actor, text, edit, versionNo, versionNoBeforeEdit } as const });
      // A crash between ActionEdited and ActionApproved: the same approver's edit-and-approve again (the
      // version it saw before its edit, or none; the same edited params) completes the approval.
      const completesCrashedApproval =
        command.type === 'ApproveAction' &&
        m.editedNotApproved &&
        command.edit !== undefined &&
        m.editedBy === `${command.meta.actor.kind}:${command.meta.actor.id}` &&
        (command.expectedVersion === undefined || expectedNo === m.versionNoBeforeEdit) &&
        isDeepStrictEqual(command.edit.after.params, m.params);
      if (completesCrashedApproval && !(command.requireDistinctApprover && command.meta.actor.kind === 'api_key' && m.proposerKey === command.meta.actor.id)) {
        return { kind: 'accept', next: bump({ status: 'approved', autoApplied: false, finalFailure: false, editedNotApproved: false, ...decided(m.versionNo, m.versionNoBeforeEdit, m.editedEdit) }) };
      }
      if (command.expectedVersion !== undefined && expectedNo !== m.versionNo && !completesCrashedApproval) return { kind: 'refuse', errors: [ActionChangedError] };
      if (command.type === 'RejectAction') return { kind: 'accept', next: bump({ status: 'rejected', editedNotApproved: false, ...decided(m.versionNo, null, null) }) };
      // The distinct-approver rule and the edit's review are independent refusals: either may be answered first.
      const errors: ErrorClass[] = [];
      if (command.requireDistinctApprover && command.meta.actor.kind === 'api_key' && command.meta.actor.id === m.proposerKey) errors.push(DistinctApproverRequiredError);
      let params = m.params;
      let riskTier = m.riskTier;
      if (command.edit) {
        const edited = modelEdit(m.kind, m.params, command.edit.edit);
        if (edited === null) errors.push(ValidationError);
        else if (command.edit.after.risk_tier === 'blocked') errors.push(EditBlockedByPolicyError);
        else {
          params = edited;
          riskTier = command.edit.after.risk_tier;
        }
      }
      if (errors.length > 0) return { kind: 'refuse', errors };
      // The approval's "version before" is the edited one when it came with an edit; an approval right after this approver's own stored edit remembers the version before that edit.
      const ownEdit = m.editedNotApproved && m.editedBy === actor;
      const lastDecision = command.edit
        ? decided(m.versionNo + 1, m.versionNo, command.edit.edit)
        : decided(m.versionNo, ownEdit ? m.versionNoBeforeEdit : null, ownEdit ? m.editedEdit : null);
      return { kind: 'accept', next: { ...bump({ status: 'approved', autoApplied: false, params, riskTier, finalFailure: false, editedNotApproved: false, ...lastDecision }), versionNo: m.versionNo + (command.edit ? 2 : 1) } };
    }
    case 'StartApply': {
      // The claim the action holds, decided again (its append's acknowledgement was lost): nothing to append.
      if (m.exists && m.status === 'applying' && m.claim?.id === command.claimId) return { kind: 'noop' };
      if (!m.exists || !READY.includes(m.status)) return { kind: 'refuse', errors: [NothingToApplyError] };
      // After a final failure (will_retry false: "Google's final word", or the 5th attempt) nothing is retried before a person approves again.
      if (m.finalFailure) return { kind: 'refuse', errors: [NothingToApplyError] };
      if (liveClaim) return { kind: 'refuse', errors: [ApplyClaimHeldError] };
      return { kind: 'accept', next: bump({ status: 'applying', attempts: m.attempts + 1, claim: { id: command.claimId, leaseUntil: now + command.leaseMs } }) };
    }
    case 'HeartbeatApply': {
      if (m.status !== 'applying' || m.claim?.id !== command.claimId) return { kind: 'refuse', errors: [ApplyClaimLostError] };
      return { kind: 'accept', next: { ...m, claim: { id: command.claimId, leaseUntil: now + command.leaseMs } } };
    }
    case 'FinishApply': {
      const { result } = command;
      const ended = (status: Status | null, claimId: string, extra: Partial<ActionModel> = {}): ActionModel => {
        const next = bump({ ...(status ? { status } : {}), ...(status === 'returned' ? { autoApplied: false } : {}), claim: null, ...extra });
        return { ...next, lastEnd: { claimId, result: resultKey(result), versionNo: next.versionNo, missingReturn: false } };
      };
      if (command.claimId === null) {
        if (!READY.includes(m.status)) return { kind: 'noop' }; // a stale redelivery
        if (result.kind !== 'returned') return { kind: 'refuse', errors: [ApplyClaimLostError] };
        if (liveClaim) return { kind: 'refuse', errors: [ApplyClaimHeldError] };
        const next = bump({ status: 'returned', autoApplied: false, claim: null, finalFailure: false });
        return { kind: 'accept', next: { ...next, lastEnd: m.claim ? { claimId: m.claim.id, result: 'returned-without-claim', versionNo: next.versionNo, missingReturn: false } : m.lastEnd } };
      }
      if (m.status === 'applying' && m.claim?.id === command.claimId) {
        if (result.kind === 'returned') return { kind: 'accept', next: ended('returned', command.claimId) };
        if (result.kind === 'applied') return { kind: 'accept', next: ended('applied', command.claimId) };
        if (result.willRetry) return { kind: 'accept', next: ended(null, command.claimId) };
        return { kind: 'accept', next: { ...ended('returned', command.claimId), versionNo: m.versionNo + 2, lastEnd: { claimId: command.claimId, result: resultKey(result), versionNo: m.versionNo + 2, missingReturn: false } } };
      }
      // Not the current claim: only the same finish decided again after its acknowledgement was
      // lost, with nothing changed since, records nothing (or the part a crash did not store).
      const end = m.lastEnd;
      // Lenient where nothing is lost: the claim's attempt ended, the action is back in the queue, and
      // this finish would have put it there too (returned, or a final failure): nothing more to record.
      if (end && end.claimId === command.claimId && m.status === 'returned' && (result.kind === 'returned' || (result.kind === 'failed' && !result.willRetry))) return { kind: 'noop' };
      if (end && end.claimId === command.claimId && end.result === resultKey(result) && end.versionNo === m.versionNo) {
        if (end.missingReturn) {
          const next = bump({ status: 'returned', autoApplied: false, finalFailure: false });
          return { kind: 'accept', next: { ...next, lastEnd: { ...end, versionNo: next.versionNo, missingReturn: false } } };
        }
        return { kind: 'noop' };
      }
      return { kind: 'refuse', errors: [ApplyClaimLostError] };
    }
  }
}

/** The model's state when only the first of a decision's events was stored. */
function modelAfterPrefix(m: ActionModel, command: ActionCommand, first: DomainEvent, now: number): ActionModel {
  void now;
  if (first.type === 'ActionApplyFailed' && command.type === 'FinishApply') {
    return { ...m, claim: null, versionNo: m.versionNo + 1, finalFailure: true, lastEnd: { claimId: command.claimId!, result: resultKey(command.result), versionNo: m.versionNo + 1, missingReturn: true } };
  }
  if (first.type === 'ActionEdited' && command.type === 'ApproveAction') {
    // Edited, not approved: the state docs/api.md says must never exist (an edited but unapproved action).
    return {
      ...m,
      params: (first.data as { after: { params: Record<string, unknown> } }).after.params,
      riskTier: (first.data as { after: { risk_tier: RiskTier } }).after.risk_tier,
      versionNo: m.versionNo + 1,
      editedNotApproved: true,
      editedBy: `${command.meta.actor.kind}:${command.meta.actor.id}`,
      versionNoBeforeEdit: m.versionNo,
      editedEdit: command.edit?.edit ?? null,
    };
  }
  throw new Error(`no prefix model for ${first.type}`);
}


// ---------------------------------------------------------------------------------------------
// Run lifecycle (account aggregate)
// ---------------------------------------------------------------------------------------------

type RunStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled';
interface RunModel {
  readonly active: { readonly runId: string; readonly status: 'queued' | 'running'; readonly worker: string | null } | null;
  readonly runs: Readonly<Record<string, RunStatus>>;
  readonly queuedOrder: readonly string[];
}

function runVerdict(m: RunModel, command: AccountCommand): Verdict<RunModel> {
  switch (command.type) {
    case 'StartRun': {
      if (command.workspaceId !== 'ws') return { kind: 'refuse', errors: [AccountNotFoundError] };
      // A retry of the request that queued the run (Idempotency-Key takeover): never a second run. The decider remembers the last 16.
      if (m.active?.runId === command.runId || m.queuedOrder.slice(-16).includes(command.runId)) return { kind: 'noop' };
      if (m.active) return { kind: 'refuse', errors: [RunInProgressError] };
      return {
        kind: 'accept',
        next: { active: { runId: command.runId, status: 'queued', worker: null }, runs: { ...m.runs, [command.runId]: 'queued' }, queuedOrder: [...m.queuedOrder, command.runId] },
      };
    }
    case 'CancelRun': {
      if (m.active?.runId !== command.runId || m.active.status === 'running') return { kind: 'refuse', errors: [RunNotCancelableError] };
      return { kind: 'accept', next: { ...m, active: null, runs: { ...m.runs, [command.runId]: 'canceled' } } };
    }
    case 'ClaimRun': {
      const a = m.active;
      if (a?.runId === command.runId && a.status === 'running' && a.worker === command.workerId) return { kind: 'noop' };
      if (a?.runId !== command.runId || a.status !== 'queued') return { kind: 'refuse', errors: [RunNotClaimableError] };
      return { kind: 'accept', next: { ...m, active: { ...a, status: 'running', worker: command.workerId }, runs: { ...m.runs, [command.runId]: 'running' } } };
    }
    case 'FinishRun': {
      const a = m.active;
      if (a?.runId !== command.runId) return { kind: 'noop' }; // a redelivered finish
      if (command.workerId !== null && a.worker !== command.workerId) return { kind: 'noop' };
      return { kind: 'accept', next: { ...m, active: null, runs: { ...m.runs, [command.runId]: command.outcome.kind } } };
    }
    default:
      throw new Error(`no model for ${command.type}`);
  }
}

function runRunSequence(seed: number, steps: number) {
  const random = seededRandom(seed);
  const ctx = { seed, trace: [] as string[] };
  let now = T0;
  const meta = () => ({ actor: { kind: 'api_key' as const, id: 'k1' }, correlationId: 'c', now: new Date(now) });
  const created = { id: 'e0', type: 'AccountCreated', version: 1, time: new Date(T0).toISOString(), workspace_id: 'ws', account_id: 'acc', aggregate: { type: 'account', id: 'acc' }, actor: { kind: 'operator', id: 'op' }, correlation_id: 'c', data: { name: 'Acme', platform: 'sandbox', sandbox_seed: 1 } } as unknown as DomainEvent;
  const events: DomainEvent[] = [created];
  let state = accountDecider.evolve(accountDecider.initialState(), created);
  let model: RunModel = { active: null, runs: {}, queuedOrder: [] };
  let fresh = 0;
  let pendingRetry: AccountCommand | null = null;
  const ids = { workspaceId: 'ws', accountId: 'acc' };
  const outcome = (random: Rng): RunOutcome =>
    chance(random, 0.5)
      ? { kind: 'succeeded', text: 't', truncated: false, usage: { input_tokens: 1, output_tokens: 1, steps: 1 }, durationMs: 5 }
      : { kind: 'failed', code: 'internal', message: 'm', text: '', truncated: false, usage: { input_tokens: 0, output_tokens: 0, steps: 0 }, durationMs: null };
  for (let step = 0; step < steps; step++) {
    now += 1 + Math.floor(random() * 5_000);
    const known = Object.keys(model.runs);
    const someRun = () => (known.length > 0 && chance(random, 0.8) ? (chance(random, 0.6) && model.active ? model.active.runId : pick(random, known.slice(-20))) : `r${fresh + 1}`);
    let command: AccountCommand;
    const retry = pendingRetry as AccountCommand | null;
    if (retry) {
      command = { ...retry, meta: meta() } as AccountCommand;
      pendingRetry = null;
    } else {
      const r = random();
      if (r < 0.35) {
        const runId = chance(random, 0.6) ? `r${++fresh}` : someRun();
        command = { type: 'StartRun', ...ids, workspaceId: chance(random, 0.03) ? 'other' : 'ws', runId, brief: 'b', autoApply: false, keyId: 'k1', scope: 'write', meta: meta() };
      } else if (r < 0.5) {
        const runId = someRun();
        command = { type: 'CancelRun', ...ids, runId, knownStatus: model.runs[runId] ?? 'queued', meta: meta() };
      } else if (r < 0.75) {
        command = { type: 'ClaimRun', ...ids, runId: someRun(), workerId: pick(random, ['w1', 'w2']), agent: { kind: 'rules', model: 'r' }, meta: meta() };
      } else {
        command = { type: 'FinishRun', ...ids, runId: someRun(), workerId: pick(random, ['w1', 'w2', null]), outcome: outcome(random), meta: meta() };
      }
    }
    const label = `${command.type}(${JSON.stringify({ ...command, meta: undefined, type: undefined, workspaceId: command.workspaceId === 'ws' ? undefined : command.workspaceId, accountId: undefined, agent: undefined, brief: undefined, outcome: (command as { outcome?: RunOutcome }).outcome?.kind })})`;
    const verdict = runVerdict(model, command);
    const emitted = checkStep(ctx, accountDecider, command, state, verdict, label);
    for (const event of emitted) {
      events.push(event);
      state = accountDecider.evolve(state, event);
    }
    if (verdict.kind === 'accept') {
      // No terminal state is ever left.
      for (const [runId, status] of Object.entries(model.runs)) {
        if (['succeeded', 'failed', 'canceled'].includes(status)) expect(verdict.next.runs[runId], `run ${runId} left ${status}`).to.equal(status);
      }
      model = verdict.next;
      if (chance(random, 0.15)) pendingRetry = command;
    }
    const seen = state.activeRun ? { runId: state.activeRun.runId, status: state.activeRun.status, worker: state.activeRun.workerId } : null;
    if (JSON.stringify(seen) !== JSON.stringify(model.active)) {
      throw new PropertyFailure(`active run differs after ${label}: decider ${JSON.stringify(seen)}, model ${JSON.stringify(model.active)} (seed ${seed}, PROP_SEED=${SEED})\n    ${ctx.trace.slice(-20).join('\n    ')}`);
    }
    expect(foldAll(accountDecider as Decider<Command, typeof state>, events)).to.deep.equal(state);
  }
}

// ---------------------------------------------------------------------------------------------
// Auto-apply slots (quota aggregate of an account's UTC day)
// ---------------------------------------------------------------------------------------------

const DAY_MS = 86_400_000;
const SPEND_CAP = 0.1;
interface Reservation {
  readonly actionId: string;
  readonly at: number;
  readonly touch: AutoApplyTouch;
  readonly baseline?: number;
}

const utcDay = (t: number) => new Date(t).toISOString().slice(0, 10).replaceAll('-', '');

/** docs/policy.md "Bands that hold for a day", "one setting per campaign within 24 hours", the daily cap of 20 and the spend-share cap. */
function quotaVerdict(today: readonly Reservation[], previousDay: readonly Reservation[], actionId: string, touch: AutoApplyTouch, now: number): Verdict<Reservation> {
  if (today.some((r) => r.actionId === actionId)) return { kind: 'noop' }; // a retried reservation
  const errors: ErrorClass[] = [];
  if (today.length >= AUTO_APPLY_DAILY_CAP) errors.push(AutoApplyCapReachedError);
  let baseline: number | undefined;
  if (touch.kind === 'band') {
    const sameCampaign = (r: Reservation) => r.touch.kind === 'band' && r.touch.campaignId === touch.campaignId;
    const otherField = (r: Reservation) => sameCampaign(r) && (r.touch as { field: BandedField }).field !== touch.field;
    if (today.some(otherField)) errors.push(CampaignAlreadyChangedTodayError);
    else if (previousDay.some((r) => otherField(r) && now - r.at < DAY_MS)) errors.push(CampaignChangedWithinADayError);
    const first = today.find((r) => sameCampaign(r) && (r.touch as { field: BandedField }).field === touch.field);
    baseline = first ? first.baseline! : touch.current;
    if (!(baseline > 0) || Math.abs((touch.next - baseline) / baseline) > touch.safeMax + 1e-9) errors.push(DayBandExceededError);
  } else if (touch.kind === 'spend') {
    const used = today.reduce((s, r) => s + (r.touch.kind === 'spend' ? r.touch.share : 0), 0);
    if (used + touch.share > touch.dailyCap + 1e-9) errors.push(DailySpendShareCapError);
  }
  if (errors.length > 0) return { kind: 'refuse', errors };
  return { kind: 'accept', next: { actionId, at: now, touch, ...(baseline !== undefined ? { baseline } : {}) } };
}

function runQuotaSequence(seed: number, steps: number) {
  const random = seededRandom(seed);
  const ctx = { seed, trace: [] as string[] };
  // Start a few hours before a UTC midnight so sequences cross days.
  let now = Date.parse('2026-11-21T00:00:00.000Z') - Math.floor(random() * 6 * 3_600_000);
  const days = new Map<string, { reservations: Reservation[]; events: DomainEvent[]; state: QuotaState }>();
  const dayOf = (day: string) => {
    let d = days.get(day);
    if (!d) days.set(day, (d = { reservations: [], events: [], state: quotaDecider.initialState() }));
    return d;
  };
  const values = new Map<string, number>(); // the live value of each campaign field
  let actionCounter = 0;
  let pendingRetry: ReserveAutoApplySlot | null = null;
  for (let step = 0; step < steps; step++) {
    now += Math.floor(random() * (chance(random, 0.1) ? 8 * 3_600_000 : 600_000));
    const day = utcDay(now);
    const previous = utcDay(now - DAY_MS);
    let command: ReserveAutoApplySlot;
    if (pendingRetry && pendingRetry.day === day) {
      command = { ...pendingRetry, previousDayChangedAt: dayOf(previous).state.changedAt, meta: { ...pendingRetry.meta, now: new Date(now) } };
    } else {
      const r = random();
      let touch: AutoApplyTouch;
      if (r < 0.6) {
        const campaignId = pick(random, ['c1', 'c2']);
        const field = pick(random, ['daily_budget', 'target_cpa', 'target_roas_pct'] as const);
        const key = `${campaignId}/${field}`;
        const current = values.get(key) ?? 100;
        const step = pick(random, [-0.12, -0.05, 0.05, 0.08, 0.1, 0.2, 0.25]);
        touch = { kind: 'band', campaignId, field, current, next: Math.round(current * (1 + step) * 100) / 100, safeMax: field === 'daily_budget' ? 0.2 : 0.1 };
      } else if (r < 0.9) {
        touch = { kind: 'spend', share: pick(random, [0.01, 0.03, 0.04, 0.05]), dailyCap: SPEND_CAP };
      } else touch = { kind: 'none' };
      const actionId = chance(random, 0.1) && dayOf(day).reservations.length > 0 ? pick(random, dayOf(day).reservations).actionId : `a${++actionCounter}`;
      command = { type: 'ReserveAutoApplySlot', workspaceId: 'ws', accountId: 'acc', day, actionId, cap: AUTO_APPLY_DAILY_CAP, touch, previousDayChangedAt: dayOf(previous).state.changedAt, meta: { actor: { kind: 'api_key', id: 'k1' }, correlationId: 'c', now: new Date(now) } };
    }
    pendingRetry = null;
    const d = dayOf(day);
    const verdict = quotaVerdict(d.reservations, dayOf(previous).reservations, command.actionId, command.touch, now);
    const emitted = checkStep(ctx, quotaDecider, command, d.state, verdict, `Reserve(${day}, ${command.actionId}, ${JSON.stringify(command.touch)}) at ${new Date(now).toISOString()}`);
    for (const event of emitted) {
      d.events.push(event);
      d.state = quotaDecider.evolve(d.state, event);
    }
    if (verdict.kind === 'accept') {
      d.reservations.push(verdict.next);
      if (command.touch.kind === 'band') values.set(`${command.touch.campaignId}/${command.touch.field}`, command.touch.next);
      if (chance(random, 0.15)) pendingRetry = command;
    }
    // Caps never exceed their limits; every value of a day's field stays in the band around its baseline.
    expect(d.state.actionIds.length).to.be.at.most(AUTO_APPLY_DAILY_CAP);
    expect(d.state.actionIds).to.deep.equal(d.reservations.map((r) => r.actionId));
    expect(d.state.spendShare).to.be.at.most(SPEND_CAP + 1e-9);
    for (const [key, band] of Object.entries(d.state.bands)) {
      const safeMax = key.endsWith('daily_budget') ? 0.2 : 0.1;
      expect(Math.abs(band.value - band.baseline) / band.baseline, `band ${key}`).to.be.at.most(safeMax + 1e-9);
      const campaign = key.split('/')[0]!;
      expect(Object.keys(d.state.bands).filter((k) => k.startsWith(`${campaign}/`)), `one setting per campaign per day (${campaign})`).to.have.length(1);
    }
    expect(foldAll(quotaDecider as Decider<Command, QuotaState>, d.events)).to.deep.equal(d.state);
  }
}

// ---------------------------------------------------------------------------------------------
// Kill switch (workspace aggregate)
// ---------------------------------------------------------------------------------------------

function runKillSwitchSequence(seed: number, steps: number) {
  const random = seededRandom(seed);
  const ctx = { seed, trace: [] as string[] };
  let state = workspaceDecider.initialState();
  const events: DomainEvent[] = [];
  let model = { exists: false, engaged: false };
  for (let step = 0; step < steps; step++) {
    const meta = { actor: { kind: 'api_key' as const, id: 'admin' }, correlationId: 'c', now: new Date(T0 + step * 1000) };
    const command: WorkspaceCommand = !model.exists && chance(random, 0.5)
      ? { type: 'CreateWorkspace', workspaceId: 'ws', name: 'W', meta }
      : { type: 'SetKillSwitch', workspaceId: 'ws', engaged: chance(random, 0.5), reason: 'r', meta };
    let verdict: Verdict<typeof model>;
    if (command.type === 'CreateWorkspace') verdict = model.exists ? { kind: 'refuse', errors: [AlreadyExists] } : { kind: 'accept', next: { exists: true, engaged: false } };
    else if (command.type !== 'SetKillSwitch') throw new Error('unreachable');
    else if (!model.exists) verdict = { kind: 'refuse', errors: [WorkspaceNotFoundError] };
    else verdict = model.engaged === command.engaged ? { kind: 'noop' } : { kind: 'accept', next: { exists: true, engaged: command.engaged } };
    const emitted = checkStep(ctx, workspaceDecider, command, state, verdict, `${command.type}(${'engaged' in command ? command.engaged : ''})`);
    for (const event of emitted) {
      events.push(event);
      state = workspaceDecider.evolve(state, event);
    }
    if (verdict.kind === 'accept') model = verdict.next;
    expect(state.killSwitch.engaged).to.equal(model.engaged);
    expect(foldAll(workspaceDecider as Decider<Command, typeof state>, events)).to.deep.equal(state);
  }
}

// ---------------------------------------------------------------------------------------------

function many(label: string, sequences: number, run: (seed: number) => void) {
  const random = seededRandom(SEED ^ [...label].reduce((h, c) => (h * 31 + c.charCodeAt(0)) | 0, 7));
  for (let i = 0; i < sequences * RUNS; i++) run(Math.floor(random() * 2 ** 31));
}

describe('decider properties (seeded, model-based)', function () {
  this.timeout(60_000);
  after(() => {
    // eslint-disable-next-line no-console
    if (process.env.PROP_STATS) console.log([...coverage].sort().map(([k, n]) => `      ${k}: ${n}`).join('\n'));
  });

  it('action lifecycle: accepts exactly what the documented rules allow, evolves to the model state, never leaves a terminal status', () => {
    many('action', 1000, (seed) => runActionSequence(seed, 40, { crashOn: 'none', sameMsSteps: false }));
  });

  it('action lifecycle, crash between ActionEdited and ActionApproved (no atomic batch): the approver\'s retry completes the approval', () => {
    many('action-crash-edit', 1000, (seed) => runActionSequence(seed, 40, { crashOn: 'ActionEdited', sameMsSteps: false }));
  });

  it('action lifecycle, crash between a final ActionApplyFailed and its return: no new attempt starts', () => {
    many('action-crash-final', 1000, (seed) => runActionSequence(seed, 40, { crashOn: 'ActionApplyFailed', sameMsSteps: false }));
  });

  it('action versions: an expected_version read before a change is refused even when the clock did not move', () => {
    many('action-same-ms', 1000, (seed) => runActionSequence(seed, 40, { crashOn: 'none', sameMsSteps: true }));
  });

  it('run lifecycle: one active run, queued -> running -> finished or queued -> canceled, retries append nothing', () => {
    many('run', 1000, (seed) => runRunSequence(seed, 60));
  });

  it('auto-apply slots: daily cap, day bands, spend share and one setting per campaign within 24 hours', () => {
    many('quota', 400, (seed) => runQuotaSequence(seed, 80));
  });

  it('kill switch: engaging an engaged switch (or releasing a released one) appends nothing', () => {
    many('kill', 300, (seed) => runKillSwitchSequence(seed, 20));
  });
});

/** The counterexamples the properties found, shrunk by hand: each fails while its defect is there. */
describe('decider properties: shrunk counterexamples', () => {
  const at = (ms: number) => ({ actor: { kind: 'api_key' as const, id: 'k2' }, correlationId: 'c', now: new Date(T0 + ms) });
  const worker = (ms: number) => ({ actor: { kind: 'worker' as const, id: 'w' }, correlationId: 'c', now: new Date(T0 + ms) });
  const ids = { workspaceId: 'ws', accountId: 'acc', actionId: 'a1' };
  const fold = (events: readonly DomainEvent[]) => foldAll(actionDecider as Decider<Command, ActionState>, events);
  const decide = (command: ActionCommand, events: readonly DomainEvent[]) => actionDecider.decide(command, fold(events)) as unknown as DomainEvent[];
  const versionOf = (state: ActionState) => actionVersion({ status: state.status, params: state.params, changedAt: state.changedAt });
  const propose = (disposition: 'queued' | 'auto_applied', ms = 0) =>
    decide({ type: 'ProposeAction', workspaceId: 'ws', accountId: 'acc', proposal: actionProposal({ kind: 'set_campaign_budget', params: { campaign_id: 'c1', daily_budget: 100 }, risk_tier: 'safe', disposition }), meta: at(ms) }, []);

  it('edit-and-approve whose ActionApproved was not stored (crash or outage between the two publishes): the retry with the same expected_version completes it', () => {
    const events = propose('queued');
    const approve: ActionCommand = {
      type: 'ApproveAction', ...ids, note: '', requireDistinctApprover: false, expectedVersion: versionOf(fold(events)), meta: at(1000),
      edit: { edit: { daily_budget: 110 }, after: { summary: 'to 110', params: { campaign_id: 'c1', daily_budget: 110 }, based_on: {}, risk_tier: 'safe', policy_reasons: [] } },
    };
    const [edited] = decide(approve, events); // [ActionEdited, ActionApproved]; only the first is stored
    const after = [...events, edited!];
    expect(fold(after)).to.include({ status: 'queued' }); // edited, not approved: what docs/api.md says must never exist
    expect(() => decide({ ...approve, meta: at(1001) }, after), 'the approver\'s retry').not.to.throw();
  });

  it('a final ActionApplyFailed (will_retry false) whose ActionReturnedToQueue was not stored: no new attempt may claim the action', () => {
    let events = [...propose('auto_applied')];
    events = [...events, ...decide({ type: 'StartApply', ...ids, workerId: 'w1', claimId: 'k1', leaseMs: LEASE, meta: worker(1000) }, events)];
    const [failed] = decide({ type: 'FinishApply', ...ids, workerId: 'w1', claimId: 'k1', result: { kind: 'failed', error: 'Google Ads: refused', willRetry: false, refused: true }, meta: worker(2000) }, events);
    events = [...events, failed!];
    expect(() => decide({ type: 'StartApply', ...ids, workerId: 'w2', claimId: 'k2', leaseMs: LEASE, meta: worker(70_000) }, events), 'a takeover after the final failure').to.throw(NothingToApplyError);
  });

  it('the version changes when the action does, also within one millisecond: a version read before an approval and a return is refused', () => {
    let events = [...propose('auto_applied')];
    events = [...events, ...decide({ type: 'FinishApply', ...ids, workerId: 'w1', claimId: null, result: { kind: 'returned', reason: 'kill switch' }, meta: worker(5) }, events)];
    const seen = versionOf(fold(events)); // returned, read by a client at +5 ms
    events = [...events, ...decide({ type: 'ApproveAction', ...ids, note: '', requireDistinctApprover: false, expectedVersion: seen, meta: at(5) }, events)];
    events = [...events, ...decide({ type: 'FinishApply', ...ids, workerId: 'w1', claimId: null, result: { kind: 'returned', reason: 're-check' }, meta: worker(5) }, events)];
    expect(() => decide({ type: 'RejectAction', ...ids, reason: 'stale', expectedVersion: seen, meta: at(6) }, events)).to.throw(ActionChangedError);
  });
});
