import { expect } from 'chai';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { v7 as uuidv7 } from 'uuid';
import { accountDecider } from '../../commands/account/account-decider.ts';
import { lastSeqOf } from '../../commands/shared/handle.ts';
import { ApprovalsAppliedChangeLookup } from '../../projections/approvals/applied-change-lookup.ts';
import { identityProjection } from '../../projections/identity/identity-projection.ts';
import { waitForProjection } from '../../projections/runtime/projector.ts';
import { last30Days } from '../../src/agent/tools/date-range.ts';
import { issueKey, revokeKey, setDistinctApprover } from '../../src/operator/operator-commands.ts';
import type { Campaign, MatchType, PlatformAccountRef, PlatformChange } from '../../src/platform/ads-platform.ts';
import { SandboxPlatform } from '../../src/platform/sandbox/sandbox-platform.ts';
import { classifyAction } from '../../src/policy/classify-action.ts';
import { negativeKeywordBasis } from '../../src/policy/negative-keyword-basis.ts';
import { ProposalService } from '../../src/policy/proposal-service.ts';
import { listCampaigns, platformAccount, problemShape, type CampaignView } from '../safe-apply/helpers.ts';
import { seededRandom } from '../support/seeded-random.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * Seeded adversarial fuzz of the decision endpoints (approve, approve with `edit`, reject) with
 * hostile edit payloads, preconditions, headers, keys and paths, against the real service with
 * its apply worker on the sandbox platform (docs/api.md "Approvals", "Edit, then approve";
 * docs/policy.md "Edited before approval").
 *
 * For every request, what a user can observe:
 * - the answer is a 2xx, or an RFC 9457 problem+json whose status and type are the ones the
 *   docs give for that situation (never a 5xx, never a hang);
 * - a refused request appends nothing to any account's history, leaves the action as it was
 *   (same `version`) and sends nothing to the platform;
 * - an accepted decision appends exactly its decision events (ActionApproved, or ActionRejected;
 *   ActionEdited first for an edit) on that action and nothing else besides the apply worker's;
 *   the action then shows exactly what was sent (kept to cents / tenths of a percent, keywords
 *   trimmed and lower-cased), its account and campaign unchanged, and the policy's new verdict:
 *   an edit beyond the safe band is `review`, never `safe` and never auto-applied;
 * - the platform receives exactly the approved version of an accepted action, and nothing else.
 *
 * Besides the fuzz, one directed case runs on every seed: an auto-applied budget change the apply
 * worker returned to the queue, edited by a person to +50 % and approved: it is classified `review`
 * and applied, its `status` says so, and its `disposition` stays what happened when it was proposed
 * (`auto_applied`), as the OpenAPI document describes that field.
 *
 * HOSTILE_EDIT_FUZZ_SEED=<n> replays another seed; HOSTILE_EDIT_FUZZ_CASES=<n> changes the number of cases;
 * HOSTILE_EDIT_FUZZ_VERBOSE=1 prints every case.
 */
const SEED = Number(process.env.HOSTILE_EDIT_FUZZ_SEED ?? 20261127);
const CASES = Number(process.env.HOSTILE_EDIT_FUZZ_CASES ?? 160);
const VERBOSE = process.env.HOSTILE_EDIT_FUZZ_VERBOSE !== undefined;
const REQUEST_TIMEOUT_MS = 6000;
const BASE = 'http://api.test/problems/';

/** Every problem type docs/api.md lists that a decision request can answer. */
const DECISION_PROBLEMS = new Set([
  'validation-error', 'malformed-json', 'payload-too-large', 'unsupported-media-type', 'unauthorized', 'insufficient-scope',
  'rate-limited', 'service-unavailable', 'not-found', 'method-not-allowed', 'headers-too-large', 'uri-too-long', 'malformed-request',
  'account-not-found', 'action-not-found', 'action-not-in-queue', 'action-changed', 'distinct-approver-required', 'campaign-not-found',
  'account-not-connected', 'invalid-idempotency-key',
]);

type Kind = 'set_target_cpa' | 'set_target_roas' | 'set_campaign_budget' | 'add_negative_keywords' | 'pause_keywords';
type Field = 'target_cpa' | 'target_roas_pct' | 'daily_budget' | 'keywords';
const FIELD_OF: Record<Exclude<Kind, 'pause_keywords'>, Field> = {
  set_target_cpa: 'target_cpa',
  set_target_roas: 'target_roas_pct',
  set_campaign_budget: 'daily_budget',
  add_negative_keywords: 'keywords',
};
const PRECISION: Record<Exclude<Field, 'keywords'>, number> = { target_cpa: 100, target_roas_pct: 10, daily_budget: 100 };
const BANDS = { set_campaign_budget: { safe: 0.2, max: 1.0 }, set_target_cpa: { safe: 0.1, max: 0.5 }, set_target_roas: { safe: 0.1, max: 0.5 } } as const;
const APPLY_EVENTS = new Set(['ActionApplyStarted', 'ActionApplyHeartbeat', 'ActionApplied', 'ActionApplyFailed', 'ActionReturnedToQueue']);
const MATCH: readonly MatchType[] = ['exact', 'phrase', 'broad'];
type Keyword = { text: string; match_type: MatchType };
const asCampaign = (c: CampaignView) => ({ id: c.id, status: c.status as Campaign['status'] });

interface Act {
  readonly id: string;
  readonly accountId: string;
  readonly tenant: 'A' | 'B';
  readonly kind: Kind;
  readonly campaignId: string | null;
  /** On a portfolio strategy: never safe. */
  readonly portfolio: boolean;
  params: Record<string, any>;
  status: string;
  version: string;
  edited: unknown;
  /** What happened when it was proposed, as first read (null until then): no decision may change it. */
  disposition: string | null;
  /** The live value the action is based on (proposal, or its last accepted edit). */
  basis: number | null;
  readonly oldVersions: string[];
}

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly text: string;
  readonly body: any;
}

/** What the approver sent when the request should be taken: the params the action must then show. */
interface Decision {
  readonly op: 'approve' | 'reject';
  /** The edit as sent (parsed), when there is one. */
  readonly edit?: Record<string, unknown>;
  readonly expectedParams: Record<string, any>;
  /** The policy's verdict on the edited version, when the test can tell it. */
  readonly tier?: 'safe' | 'review';
  /** The edit's change measured from the live value (budgets and targets). */
  readonly change?: number;
  /** Why the test expects that tier. */
  readonly why?: string;
  readonly keyId: string;
  /** The note (approve) or reason (reject) the decision event must carry. */
  readonly note?: string;
}

interface Case {
  readonly label: string;
  readonly act: Act;
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string | string[]>;
  readonly body?: string;
  /** Allowed answers, `status` or `status slug`. */
  readonly allowed: readonly string[];
  /** Set when a 200 is allowed: what must then hold. */
  readonly decision?: Decision;
  /** Accounts whose history must be unchanged when refused (and hold nothing else when accepted). */
  readonly accounts: readonly string[];
  /** For a tenancy case: a request that names an id that does not exist, whose problem must look the same. */
  readonly twin?: { path: string; ids: string[] };
  readonly sentRequestId?: string;
}

describe(`hostile edit fuzz of the decision endpoints (seed ${SEED})`, function () {
  this.timeout(60_000);
  let svc: TestService;
  let A: TestTenant;
  let B: TestTenant;
  let revokedKey: string;
  let port: number;
  let platform: SandboxPlatform;
  let proposals: ProposalService;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const rand = seededRandom(SEED);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const chance = (p: number) => rand() < p;
  const between = (lo: number, hi: number) => lo + rand() * (hi - lo);

  /** Every change the sandbox platform received. */
  const platformCalls: { accountId: string; change: PlatformChange }[] = [];
  let originalApplyChange: SandboxPlatform['applyChange'];
  const violations: string[] = [];
  const violate = (message: string) => violations.push(message);
  const acts: Act[] = [];
  const cursors = new Map<string, number>();
  const campaigns = new Map<string, Map<string, CampaignView>>();
  /** `${account}/${campaign}` whose budget or target this service changed (learning period). */
  const learning = new Map<string, string>();
  const usedTerms = new Map<string, Set<string>>();
  /** `${account}/${campaign}/${field}`: the day's baseline an auto-applied change recorded (docs/policy.md "Bands that hold for a day"). */
  const baselines = new Map<string, number>();
  const tally = new Map<string, number>();

  // ---------------------------------------------------------------------------------------------
  // HTTP, byte for byte what the case says (repeated headers stay repeated).

  function send(method: string, path: string, headers: Record<string, string | string[]>, body?: string): Promise<Answer | 'timeout'> {
    return new Promise((resolve) => {
      const payload = body === undefined ? undefined : Buffer.from(body, 'utf8');
      const all: Record<string, string | string[]> = { ...headers };
      if (payload) all['content-length'] = String(payload.length);
      let settled = false;
      const done = (value: Answer | 'timeout') => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(value);
      };
      const req = http.request({ host: '127.0.0.1', port, method, path, headers: all, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: any = text;
          if (/[/+]json\b/.test(String(res.headers['content-type'] ?? '')) && text !== '') {
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = text;
            }
          }
          done({ status: res.statusCode ?? 0, headers: res.headers, text, body: parsed });
        });
        res.on('error', () => done('timeout'));
      });
      const timer = setTimeout(() => {
        req.destroy();
        done('timeout');
      }, REQUEST_TIMEOUT_MS);
      req.on('error', (error) => {
        if (!settled) violate(`${method} ${path}: connection error ${error.message}`);
        done('timeout');
      });
      if (payload) req.write(payload);
      req.end();
    });
  }

  async function call(method: string, path: string, key: string, body?: unknown): Promise<Answer> {
    const headers: Record<string, string> = { authorization: `Bearer ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const answer = await send(method, path, headers, body === undefined ? undefined : JSON.stringify(body));
    if (answer === 'timeout') throw new Error(`${method} ${path} timed out`);
    return answer;
  }

  const approvals = (accountId: string) => `/api/v1/accounts/${accountId}/approvals`;
  const keysOf = (t: 'A' | 'B') => (t === 'A' ? A : B);

  /** The events of the account since the last look, moving the cursor on. */
  async function newEvents(accountId: string, key: string): Promise<any[]> {
    const out: any[] = [];
    for (;;) {
      const cursor = cursors.get(accountId);
      const qs = new URLSearchParams({ limit: '500' });
      if (cursor !== undefined) qs.set('cursor', String(cursor));
      const page = await call('GET', `/api/v1/accounts/${accountId}/history?${qs}`, key);
      expect(page.status, page.text).to.equal(200);
      out.push(...page.body.data);
      const next = page.body.next_cursor === null ? null : Number(page.body.next_cursor);
      for (const e of page.body.data) if (typeof e.seq === 'number') cursors.set(accountId, Math.max(cursors.get(accountId) ?? 0, e.seq));
      if (next === null || page.body.data.length === 0) return out;
      cursors.set(accountId, Math.max(cursors.get(accountId) ?? 0, next));
    }
  }

  const readKeyOfAccount = (accountId: string) => ([B.accounts.sandbox, B.accounts.sandbox2].includes(accountId) ? B.keys.read : A.keys.read);

  async function rowOf(act: Act): Promise<any> {
    let cursor: string | null = null;
    do {
      const qs = new URLSearchParams({ limit: '200' });
      if (cursor !== null) qs.set('cursor', cursor);
      const page = await call('GET', `${approvals(act.accountId)}?${qs}`, keysOf(act.tenant).keys.read);
      expect(page.status, page.text).to.equal(200);
      const found = page.body.data.find((r: any) => r.id === act.id);
      if (found) return found;
      cursor = page.body.next_cursor;
    } while (cursor !== null);
    throw new Error(`action ${act.id} is not in the approvals list`);
  }

  function remember(act: Act, row: any): void {
    if (row.version !== act.version) act.oldVersions.push(act.version);
    act.params = row.params;
    act.status = row.status;
    act.version = row.version;
    act.edited = row.edited;
    act.disposition ??= row.disposition;
  }

  async function refreshCampaigns(accountId: string, key: string): Promise<void> {
    campaigns.set(accountId, new Map((await listCampaigns(svc, key, accountId)).map((c) => [c.id, c])));
  }

  const liveValue = (act: Act): number => {
    const c = campaigns.get(act.accountId)!.get(act.campaignId!)!;
    if (act.kind === 'set_campaign_budget') return c.daily_budget;
    return act.kind === 'set_target_cpa' ? c.bidding_strategy.target_cpa! : c.bidding_strategy.target_roas_pct!;
  };

  // ---------------------------------------------------------------------------------------------
  // Proposals: the target endpoint, and the service's own proposal path for the other kinds.

  const meta = (keyId: string) => ({ actor: { kind: 'api_key' as const, id: keyId }, correlationId: 'hostile-edit-fuzz' });

  async function propose(kind: Kind | 'portfolio', tenant: 'A' | 'B', accountId: string, autoApply = false): Promise<Act | null> {
    const t = keysOf(tenant);
    const camps = [...campaigns.get(accountId)!.values()].filter((c) => c.status === 'enabled');
    const s = (c: CampaignView) => c.bidding_strategy;
    let id: string;
    let campaign: CampaignView | undefined;
    let basis: number | null = null;
    if (kind === 'set_target_cpa' || kind === 'set_target_roas' || kind === 'portfolio') {
      campaign =
        kind === 'set_target_cpa' ? camps.find((c) => s(c).type === 'maximize_conversions' && s(c).target_cpa !== null && s(c).portfolio === null)
        : kind === 'set_target_roas' ? camps.find((c) => s(c).type === 'maximize_conversion_value' && s(c).target_roas_pct !== null && s(c).portfolio === null)
        : camps.find((c) => s(c).type === 'maximize_conversions' && s(c).target_cpa !== null && s(c).portfolio !== null);
      if (!campaign) return null;
      const roas = kind === 'set_target_roas';
      basis = roas ? s(campaign).target_roas_pct! : s(campaign).target_cpa!;
      const value = roas ? Math.round(basis * 1.04 * 10) / 10 : Math.round(basis * 1.04 * 100) / 100;
      const answer = await call('POST', `/api/v1/accounts/${accountId}/campaigns/${campaign.id}/target`, t.keys.write, {
        reason: 'hostile edit fuzz', [roas ? 'target_roas_pct' : 'target_cpa']: value, ...(autoApply ? { auto_apply: true } : {}),
      });
      expect(answer.status, answer.text).to.equal(200);
      id = answer.body.id;
    } else {
      const ref: PlatformAccountRef = await platformAccount(svc, t.workspaceId, accountId);
      const range = last30Days(new Date());
      // Budgets: the first two enabled campaigns, so two actions often wait on one campaign (the second then goes stale).
      campaign = kind === 'set_campaign_budget' ? pick(camps.slice(0, 2)) : pick(camps);
      let draft: any;
      let summary: string;
      if (kind === 'set_campaign_budget') {
        basis = campaign.daily_budget;
        const next = Math.round(campaign.daily_budget * 1.05 * 100) / 100;
        draft = { kind, params: { campaign_id: campaign.id, daily_budget: next }, based_on: { campaign_status: campaign.status, daily_budget: campaign.daily_budget } };
        summary = `Change the daily budget of "${campaign.name}" from ${campaign.daily_budget} to ${next}`;
      } else if (kind === 'add_negative_keywords') {
        const used = usedTerms.get(accountId) ?? new Set<string>();
        usedTerms.set(accountId, used);
        const terms = (await platform.searchTermTotals(ref, range, campaign.id))
          .map((term) => term.search_term.trim().toLowerCase())
          .filter((text, i, all) => text.length > 0 && text.length <= 80 && all.indexOf(text) === i && !used.has(text));
        const n = Math.min(terms.length, pick([3, 6, 12]));
        if (n < 2) return null;
        const keywords: Keyword[] = terms.slice(0, n).map((text) => ({ text, match_type: pick(MATCH) }));
        for (const k of keywords) used.add(k.text);
        draft = { kind, params: { campaign_id: campaign.id, keywords }, based_on: await negativeKeywordBasis(platform, ref, asCampaign(campaign), keywords, range) };
        summary = `Add ${keywords.length} negative keyword(s) to "${campaign.name}"`;
      } else {
        const used = usedTerms.get(`${accountId}/kw`) ?? new Set<string>();
        usedTerms.set(`${accountId}/kw`, used);
        const own = (await platform.listKeywords(ref, range, campaign.id)).filter((k) => k.status === 'enabled' && !used.has(k.id)).slice(0, 2);
        if (own.length === 0) return null;
        for (const k of own) used.add(k.id);
        const summaryData = await platform.accountSummary(ref);
        draft = {
          kind,
          params: { keyword_ids: own.map((k) => k.id) },
          based_on: { keywords: own.map((k) => ({ id: k.id, text: k.text, status: k.status, cost_30d: k.cost, conversions_30d: k.conversions })), account_cost_30d: summaryData.last_30_days.cost },
        };
        summary = `Pause ${own.length} keyword(s)`;
      }
      const proposed = await proposals.propose({
        workspaceId: t.workspaceId, accountId, runId: null, draft, summary, reason: 'hostile edit fuzz', autoApply, meta: meta(t.keyIds.write),
      });
      id = proposed.id;
    }
    const act: Act = {
      id, accountId, tenant, kind: kind === 'portfolio' ? 'set_target_cpa' : kind, campaignId: kind === 'pause_keywords' ? null : campaign.id,
      portfolio: kind === 'portfolio', params: {}, status: '', version: '', edited: null, disposition: null, basis, oldVersions: [],
    };
    remember(act, await rowOf(act));
    act.oldVersions.length = 0;
    acts.push(act);
    return act;
  }

  // ---------------------------------------------------------------------------------------------
  // Hostile material.

  interface BodyVariant {
    readonly label: string;
    /** The JSON text sent. */
    readonly text: string | undefined;
    /** What the body stage answers (`ok` when it is well-formed and passes the schema). */
    readonly body: 'ok' | string[];
    /** When `body` is ok: what the edit stage answers (`ok` to take it). */
    readonly semantic?: 'ok' | string[];
    readonly decision?: Omit<Decision, 'keyId'>;
    /** Answers allowed besides the one computed (a refusal the docs would also allow). */
    readonly alsoAllowed?: string[];
  }

  const V422 = ['422 validation-error'];
  const NOT_JSON = ['400 malformed-json'];
  const roundTo = (field: Exclude<Field, 'keywords'>, value: number) => Math.round(value * PRECISION[field]) / PRECISION[field];
  const withRaw = (template: Record<string, unknown>, raw: string) => JSON.stringify(template).replace('"@RAW@"', raw);
  const normal = (k: Keyword) => ({ text: k.text.trim().toLowerCase(), match_type: k.match_type });

  /** What the policy says of an edited budget or target (docs/policy.md "Risk tiers", "Learning period"). */
  function numericVerdict(act: Act, value: number): { blocked: boolean; tier: 'safe' | 'review'; change: number; why: string } {
    const band = BANDS[act.kind as keyof typeof BANDS];
    const live = liveValue(act);
    const change = (value - live) / live;
    const within = (limit: number) => Math.abs(change) <= limit + 1e-9;
    const baseline = baselines.get(`${act.accountId}/${act.campaignId}/${FIELD_OF[act.kind as keyof typeof FIELD_OF]}`);
    const fromBaseline = baseline !== undefined && baseline > 0 && baseline !== live ? (value - baseline) / baseline : 0;
    const inDayBand = Math.abs(fromBaseline) <= band.safe + 1e-9;
    const learnt = learning.get(`${act.accountId}/${act.campaignId}`);
    const tier = within(band.safe) && inDayBand && !act.portfolio && learnt === undefined ? 'safe' : 'review';
    const why = [!within(band.safe) ? 'beyond the safe band' : '', !inDayBand ? `day baseline ${baseline}` : '', act.portfolio ? 'portfolio' : '', learnt ? `learning: ${learnt}` : ''].filter(Boolean).join('; ');
    return { blocked: !(value > 0) || !within(band.max), tier, change, why };
  }

  /** An edit the docs say is taken (or refused by the policy when beyond the band), for the act's own field. */
  async function validEdit(act: Act): Promise<BodyVariant> {
    const extras: Record<string, unknown> = {};
    if (chance(0.3)) extras.note = pick(['ok', 'edited: kept to the safe band', '\u202eevil', 'x'.repeat(2000)]);
    const note = (extras.note as string | undefined) ?? '';
    if (chance(0.3)) extras.expected_version = act.version;
    if (act.kind === 'add_negative_keywords') {
      const proposed = act.params.keywords as Keyword[];
      const kept = proposed.filter(() => chance(0.6));
      if (kept.length === 0) kept.push(pick(proposed));
      const sent = kept
        .sort(() => rand() - 0.5)
        .map((k) => ({ text: chance(0.2) ? `  ${k.text.toUpperCase()}\t` : k.text, match_type: chance(0.4) ? pick(MATCH) : k.match_type }));
      const expectedKeywords = sent.map(normal);
      const ref = await platformAccount(svc, keysOf(act.tenant).workspaceId, act.accountId);
      const campaign = campaigns.get(act.accountId)!.get(act.campaignId!)!;
      const based_on = await negativeKeywordBasis(platform, ref, asCampaign(campaign), expectedKeywords, last30Days(new Date()));
      const verdict = classifyAction({ kind: 'add_negative_keywords', params: { campaign_id: act.campaignId!, keywords: expectedKeywords }, based_on });
      if (expectedKeywords.length > 10 && verdict.risk_tier === 'safe') violate(`oracle: ${expectedKeywords.length} keywords classified safe`);
      const edit = { keywords: sent };
      return {
        label: `edit keywords ×${sent.length}`,
        text: JSON.stringify({ ...extras, edit }),
        body: 'ok',
        semantic: verdict.risk_tier === 'blocked' ? V422 : 'ok',
        decision: { op: 'approve', edit, note, expectedParams: { ...act.params, keywords: expectedKeywords }, tier: verdict.risk_tier === 'blocked' ? undefined : verdict.risk_tier },
      };
    }
    const field = FIELD_OF[act.kind as keyof typeof FIELD_OF] as Exclude<Field, 'keywords'>;
    const band = BANDS[act.kind as keyof typeof BANDS];
    const live = liveValue(act);
    const which = pick(['safe', 'safe', 'review', 'review', 'blocked', 'cents']);
    const sign = chance(0.5) ? 1 : -1;
    let factor =
      which === 'safe' ? 1 + sign * between(0.005, band.safe - 0.02)
      : which === 'review' ? 1 + sign * between(band.safe + 0.02, band.max - 0.05)
      : which === 'blocked' ? (sign > 0 ? 1 + between(band.max + 0.05, 4) : 1 - between(band.max + 0.05, 0.99))
      : 1 + between(0.005, band.safe - 0.02);
    if (which === 'blocked' && act.kind === 'set_campaign_budget' && sign < 0) factor = 1 + between(band.max + 0.05, 4);
    let sentValue = live * factor;
    if (which === 'cents') sentValue = Math.floor(sentValue * 100) / 100 + 0.0049; // sub-cent digits: kept to the precision
    const value = roundTo(field, sentValue);
    const verdict = numericVerdict(act, value);
    const edit = { [field]: sentValue };
    // A duplicate member before the real one (RFC 8259 §4: names SHOULD be unique): taken as JSON.parse does (the last), or refused.
    const duplicate = chance(0.1);
    const text = JSON.stringify({ ...extras, edit });
    return {
      label: `edit ${field} ${which} ×${factor.toFixed(3)}${duplicate ? ' after a duplicate "edit" member' : ''}`,
      text: duplicate ? `{"edit":{"${field}":${roundTo(field, live * 1.01)}},${text.slice(1)}` : text,
      ...(duplicate ? { alsoAllowed: ['400 malformed-json', '422 validation-error'] } : {}),
      body: 'ok',
      semantic: verdict.blocked ? V422 : 'ok',
      decision: { op: 'approve', edit, note, expectedParams: { ...act.params, [field]: value }, tier: verdict.tier, change: verdict.change, why: verdict.why },
    };
  }

  function plainApprove(act: Act): BodyVariant {
    const v = pick([undefined, '{}', JSON.stringify({ note: 'looks right' }), JSON.stringify({ expected_version: act.version }), ' \r\n ']);
    const note = v !== undefined && v.includes('looks right') ? 'looks right' : '';
    return { label: `plain approve ${v === undefined ? '(no body)' : v.slice(0, 40)}`, text: v, body: 'ok', semantic: 'ok', decision: { op: 'approve', note, expectedParams: act.params } };
  }

  function validReject(act: Act): BodyVariant {
    const body: Record<string, unknown> = { reason: pick(['not now', 'too risky', 'ＦＵＬＬ width and \u202e bidi', 'r'.repeat(2000)]) };
    if (chance(0.4)) body.expected_version = act.version;
    return { label: 'reject', text: JSON.stringify(body), body: 'ok', semantic: 'ok', decision: { op: 'reject', note: body.reason as string, expectedParams: act.params } };
  }

  function otherCampaignOf(act: Act): string {
    const mine = [...campaigns.get(act.accountId)!.keys()].filter((id) => id !== act.campaignId);
    const theirs = [...(campaigns.get(B.accounts.sandbox)?.keys() ?? [])];
    return pick([...mine, ...theirs, '1', '../14133780631', `${act.campaignId}0`]);
  }

  /** Hostile approve bodies: each is refused, at the body stage or the edit stage. */
  function hostileApprove(act: Act): BodyVariant {
    const own: Field = act.kind === 'pause_keywords' ? 'target_cpa' : FIELD_OF[act.kind as keyof typeof FIELD_OF];
    const numeric = own !== 'keywords';
    const editable = act.kind !== 'pause_keywords';
    // The edit stage of a schema-valid edit of a non-editable or wrong field: 422.
    const ownValue: unknown = numeric ? roundTo(own, 50) : (act.params.keywords as Keyword[] | undefined)?.slice(0, 1) ?? [{ text: 'free', match_type: 'exact' }];
    const otherFields = (['target_cpa', 'target_roas_pct', 'daily_budget', 'keywords'] as Field[]).filter((f) => f !== own || !editable);
    const otherField = pick(otherFields);
    const otherValue = otherField === 'keywords' ? [{ text: 'free', match_type: 'exact' }] : 42;
    const proposedKw = (act.params.keywords as Keyword[] | undefined) ?? [{ text: 'free', match_type: 'exact' as MatchType }];
    const kw0 = proposedKw[0]!;
    const variants: (() => BodyVariant)[] = [
      // Numbers that are not a positive amount, or not a number at all.
      ...['-1', '0', '-0', '-0.0', '-1e-320', '[130]', '"130"', '"1e2"', '"NaN"', '"Infinity"', 'null', 'true', '{}', '[]', '{"value":130}', '{"$gt":0}', `${'['.repeat(40)}1${']'.repeat(40)}`].map(
        (raw) => () => ({ label: `edit ${own}=${raw.slice(0, 20)}`, text: withRaw({ edit: { [numeric ? own : 'daily_budget']: '@RAW@' } }, raw), body: V422 }),
      ),
      // Numbers the schema takes that the edit cannot: not finite, rounding to 0, or far beyond the band.
      ...['1e400', '-1e400'].map((raw) => () => ({ label: `edit ${own}=${raw}`, text: withRaw({ edit: { [numeric ? own : 'daily_budget']: '@RAW@' } }, raw), body: V422 as string[] | 'ok', semantic: V422 })),
      ...(numeric && editable
        ? ['1e308', '1.7976931348623157e308', '9007199254740993', '1e-9', '0.000001', '4e-3', '5e-324'].map((raw) => () => ({
            label: `edit ${own}=${raw}`, text: withRaw({ edit: { [own]: '@RAW@' } }, raw), body: 'ok' as const, semantic: V422,
          }))
        : []),
      // The target of the change: never editable.
      () => ({ label: 'edit campaign_id', text: JSON.stringify({ edit: { campaign_id: otherCampaignOf(act) } }), body: V422 }),
      () => ({ label: 'edit value + campaign_id', text: JSON.stringify({ edit: { [own]: ownValue, campaign_id: otherCampaignOf(act) } }), body: V422 }),
      () => ({ label: 'top-level campaign_id', text: JSON.stringify({ edit: { [own]: ownValue }, campaign_id: otherCampaignOf(act) }), body: V422 }),
      () => ({ label: 'top-level project_id', text: JSON.stringify({ edit: { [own]: ownValue }, project_id: pick([A.accounts.sandbox2, B.accounts.sandbox]) }), body: V422 }),
      () => ({ label: 'top-level params', text: JSON.stringify({ params: { campaign_id: otherCampaignOf(act), [own]: ownValue } }), body: V422 }),
      () => ({ label: 'edit params', text: JSON.stringify({ edit: { params: { campaign_id: otherCampaignOf(act) } } }), body: V422 }),
      () => ({ label: 'edit kind', text: JSON.stringify({ edit: { kind: 'set_campaign_budget', daily_budget: 1 } }), body: V422 }),
      () => ({ label: 'edit unknown field', text: JSON.stringify({ edit: { [own]: ownValue, extra: 1 } }), body: V422 }),
      () => ({ label: 'edit __proto__', text: `{"edit":{"__proto__":{"${own}":1},"${own}":${JSON.stringify(ownValue)}}}`, body: V422 }),
      () => ({ label: 'edit constructor', text: JSON.stringify({ edit: { constructor: { prototype: { x: 1 } } } }), body: V422 }),
      () => ({ label: 'edit two fields', text: JSON.stringify({ edit: { [own]: ownValue, [otherField]: otherValue } }), body: V422 }),
      () => ({ label: 'edit {}', text: JSON.stringify({ edit: {} }), body: V422 }),
      ...['null', '[]', '"x"', '1', 'true', `[{"${own}":1}]`].map((raw) => () => ({ label: `edit=${raw}`, text: withRaw({ edit: '@RAW@' }, raw), body: V422 })),
      // A field of another kind (or any edit of a pause): refused by the edit stage.
      () => ({ label: `edit other kind's ${otherField}`, text: JSON.stringify({ edit: { [otherField]: otherValue } }), body: 'ok', semantic: V422 }),
      // Keyword lists.
      () => ({ label: 'keywords []', text: JSON.stringify({ edit: { keywords: [] } }), body: V422 }),
      () => ({ label: 'keywords duplicated', text: JSON.stringify({ edit: { keywords: [kw0, kw0] } }), body: 'ok', semantic: V422 }),
      () => ({ label: 'keywords duplicated by case', text: JSON.stringify({ edit: { keywords: [kw0, { text: ` ${kw0.text.toUpperCase()} `, match_type: 'exact' }] } }), body: 'ok', semantic: V422 }),
      () => ({ label: 'keywords ×10000', text: JSON.stringify({ edit: { keywords: Array.from({ length: 10_000 }, () => kw0) } }), body: ['413 payload-too-large'] }),
      () => ({ label: 'keywords ×51', text: JSON.stringify({ edit: { keywords: Array.from({ length: 51 }, (_, i) => ({ text: `k${i}`, match_type: 'exact' })) } }), body: V422 }),
      () => ({ label: 'keyword with NUL', text: JSON.stringify({ edit: { keywords: [{ text: `${kw0.text}\u0000`, match_type: kw0.match_type }] } }), body: V422 }),
      () => ({ label: 'keyword with lone surrogate', text: JSON.stringify({ edit: { keywords: [{ text: `${kw0.text}\ud800`, match_type: kw0.match_type }] } }), body: V422 }),
      () => ({ label: 'keyword with ESC', text: JSON.stringify({ edit: { keywords: [{ text: `\u001b[31m${kw0.text}`, match_type: kw0.match_type }] } }), body: V422 }),
      () => ({ label: 'keyword key with NUL', text: JSON.stringify({ edit: { keywords: [{ ...kw0, 'te\u0000xt': 'x' }] } }), body: V422 }),
      () => ({ label: 'keyword not proposed', text: JSON.stringify({ edit: { keywords: [kw0, { text: 'injected term', match_type: 'broad' }] } }), body: 'ok', semantic: V422 }),
      () => ({ label: 'keyword full-width variant', text: JSON.stringify({ edit: { keywords: [{ text: 'ｆｒｅｅ ｓｔｕｆｆ', match_type: 'exact' }] } }), body: 'ok', semantic: V422 }),
      () => ({ label: 'keyword whitespace only', text: JSON.stringify({ edit: { keywords: [{ text: ' \t ', match_type: 'exact' }] } }), body: 'ok', semantic: V422 }),
      () => ({ label: 'keyword 81 chars', text: JSON.stringify({ edit: { keywords: [{ text: 'a'.repeat(81), match_type: 'exact' }] } }), body: V422 }),
      ...['"EXACT"', '"regex"', 'null', '1', '["exact"]'].map((raw) => () => ({ label: `match_type ${raw}`, text: withRaw({ edit: { keywords: [{ text: kw0.text, match_type: '@RAW@' }] } }, raw), body: V422 })),
      () => ({ label: 'keyword without match_type', text: JSON.stringify({ edit: { keywords: [{ text: kw0.text }] } }), body: V422 }),
      () => ({ label: 'keyword with campaign_id', text: JSON.stringify({ edit: { keywords: [{ ...kw0, campaign_id: otherCampaignOf(act) }] } }), body: V422 }),
      () => ({ label: 'keyword as string', text: JSON.stringify({ edit: { keywords: [kw0.text] } }), body: V422 }),
      () => ({ label: 'keyword text number', text: JSON.stringify({ edit: { keywords: [{ text: 7, match_type: 'exact' }] } }), body: V422 }),
      () => ({ label: 'keywords as object', text: JSON.stringify({ edit: { keywords: { 0: kw0 } } }), body: V422 }),
      // expected_version malformed.
      ...['""', `"${'v'.repeat(101)}"`, '123', 'null', '["v1-x"]', '"v1-\\u0000"', '"v1-\\ud800"', '{}'].map((raw) => () => ({
        label: `expected_version ${raw.slice(0, 20)}`, text: withRaw({ expected_version: '@RAW@' }, raw), body: V422,
      })),
      // note malformed.
      ...['"\\u0000"', '"\\udfff"', `"${'n'.repeat(2001)}"`, '7', 'null', '["n"]'].map((raw) => () => ({ label: `note ${raw.slice(0, 12)}`, text: withRaw({ note: '@RAW@' }, raw), body: V422 })),
      // Whole bodies that are JSON of the wrong type, or not JSON.
      ...['[]', '[{}]', '"approve"', 'null', '1', 'true'].map((raw) => () => ({ label: `body ${raw}`, text: raw, body: [...V422, ...NOT_JSON] })),
      ...['{"edit":', '{"edit":{"target_cpa":1,}}', "{'edit':1}", '{} {}', 'NaN'].map((raw) => () => ({ label: `body ${raw}`, text: raw, body: NOT_JSON })),
      () => ({ label: 'body nested 5000', text: `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`, body: [...V422, ...NOT_JSON] }),
      () => ({ label: 'unknown top-level field', text: JSON.stringify({ approve: true, auto_apply: true }), body: V422 }),
      () => ({ label: 'reject field on approve', text: JSON.stringify({ reason: 'x' }), body: V422 }),
    ];
    return pick(variants)();
  }

  function hostileReject(act: Act): BodyVariant {
    const variants: BodyVariant[] = [
      { label: 'reject no body', text: undefined, body: V422 },
      { label: 'reject {}', text: '{}', body: V422 },
      ...['""', '"   \\t\\n"', '"\\u0000"', '"a\\ud800"', `"${'r'.repeat(2001)}"`, '7', 'null', '["r"]', '{"r":1}'].map((raw) => ({
        label: `reject reason ${raw.slice(0, 14)}`, text: withRaw({ reason: '@RAW@' }, raw), body: V422,
      })),
      { label: 'reject with edit', text: JSON.stringify({ reason: 'r', edit: { target_cpa: 1 } }), body: V422 },
      { label: 'reject with campaign_id', text: JSON.stringify({ reason: 'r', campaign_id: otherCampaignOf(act) }), body: V422 },
      { label: 'reject expected_version ""', text: JSON.stringify({ reason: 'r', expected_version: '' }), body: V422 },
      { label: 'reject body []', text: '[]', body: [...V422, ...NOT_JSON] },
    ];
    return pick(variants);
  }

  // ---------------------------------------------------------------------------------------------
  // A case: a body, a precondition, headers, a key and a path, and what the docs allow.

  async function buildCase(i: number): Promise<Case> {
    const awaiting = acts.filter((a) => a.status === 'queued' || a.status === 'returned');
    const decided = acts.filter((a) => !['queued', 'returned', 'approved', 'applying', 'auto_applied'].includes(a.status));
    const act = decided.length > 0 && chance(0.08) ? pick(decided) : pick(awaiting);
    const t = keysOf(act.tenant);
    const other = keysOf(act.tenant === 'A' ? 'B' : 'A');
    const isAwaiting = act.status === 'queued' || act.status === 'returned';

    // The body, and whether it is a decision the docs say is taken.
    const r = rand();
    const op: 'approve' | 'reject' = r < 0.12 ? 'reject' : 'approve';
    let variant: BodyVariant;
    if (op === 'reject') variant = chance(0.35) ? validReject(act) : hostileReject(act);
    else if (r < 0.3 && act.kind !== 'pause_keywords') variant = await validEdit(act);
    else if (r < 0.34) variant = plainApprove(act);
    else variant = hostileApprove(act);

    // Precondition: a stale version refuses whatever a well-formed body says (the version is checked before the edit).
    let stale = false;
    let text = variant.text;
    if (variant.body === 'ok' && chance(0.15) && text !== undefined && text.trim().startsWith('{')) {
      const others = acts.filter((a) => a !== act);
      const staleVersion = pick([...act.oldVersions, ...others.slice(0, 3).map((a) => a.version), `v1-${'A'.repeat(22)}`]);
      const parsed = JSON.parse(text.trim() === '' ? '{}' : text);
      parsed.expected_version = staleVersion;
      text = JSON.stringify(parsed);
      stale = true;
    }

    // Headers.
    const headers: Record<string, string | string[]> = {};
    let auth: 'write' | 'admin' | 'read' | 'other' | 'revoked' | 'none' | 'garbage' = 'write';
    const k = rand();
    if (k < 0.06) auth = 'read';
    else if (k < 0.12) auth = 'other';
    else if (k < 0.14) auth = 'revoked';
    else if (k < 0.16) auth = 'none';
    else if (k < 0.18) auth = 'garbage';
    else if (k < 0.3) auth = 'admin';
    const keyId = auth === 'admin' ? t.keyIds.admin : t.keyIds.write;
    if (auth === 'write') headers.authorization = `Bearer ${t.keys.write}`;
    if (auth === 'admin') headers.authorization = `Bearer ${t.keys.admin}`;
    if (auth === 'read') headers.authorization = `Bearer ${t.keys.read}`;
    if (auth === 'other') headers.authorization = `Bearer ${pick([other.keys.write, other.keys.admin])}`;
    if (auth === 'revoked') headers.authorization = `Bearer ${revokedKey}`;
    if (auth === 'garbage') headers.authorization = pick([`Bearer ${t.keys.write}x`, `Basic ${Buffer.from('a:b').toString('base64')}`, 'Bearer', `Bearer ${t.keys.write.slice(0, 40)}`, `bearer  ${'z'.repeat(300)}`]);

    let contentType: string | null = 'application/json';
    let mediaRefused = false;
    const h = rand();
    if (h < 0.05) contentType = pick(['application/merge-patch+json', 'application/json; charset=utf-8', 'APPLICATION/JSON']);
    else if (h < 0.09) {
      contentType = pick(['text/plain', 'application/json; charset=utf-16', 'text/json', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']);
      mediaRefused = true;
    } else if (h < 0.1) {
      contentType = null;
      mediaRefused = true;
    }
    if (contentType !== null && (text !== undefined || chance(0.5))) headers['content-type'] = contentType;
    if (text === undefined || text.trim() === '') mediaRefused = false;
    let encodingRefused = false;
    if (chance(0.02) && text !== undefined && text.trim() !== '') {
      headers['content-encoding'] = pick(['gzip', 'br', 'deflate']);
      encodingRefused = true;
    }

    let hugeHeader = false;
    const p = rand();
    if (p < 0.25) {
      // If-Match and friends: not part of this API (expected_version is its precondition).
      const ifMatch = pick<string | string[]>([
        `"${act.oldVersions[0] ?? 'v1-stale'}"`, `"${act.version}"`, '*', 'W/"weak"', 'garbage without quotes', '"a", "b"', ['"x"', '"y"'], [`"${act.version}"`, '"stale"'], '\u00ff\u00fe',
      ]);
      headers['if-match'] = ifMatch;
      if (chance(0.3)) headers['if-unmodified-since'] = pick(['Thu, 01 Jan 1970 00:00:00 GMT', 'not a date']);
      if (chance(0.2)) headers['if-none-match'] = '*';
    } else if (p < 0.27) {
      headers['if-match'] = `"${'v'.repeat(20_000)}"`;
      hugeHeader = true;
    }
    if (chance(0.05)) headers['idempotency-key'] = pick([`dec-${i}`, `dec-${i % 3}`, 'x'.repeat(300), 'has space', '\u00e9t\u00e9']);
    let sentRequestId: string | undefined;
    if (chance(0.1)) {
      sentRequestId = pick(['ok-id.1', 'bad id with spaces', 'x'.repeat(200), '<script>', 'a,b']);
      headers['x-request-id'] = sentRequestId;
    }

    // Path.
    let accountInPath = act.accountId;
    let actionInPath = act.id;
    let method = 'POST';
    let pathKind: 'own' | 'sibling' | 'unknown-action' | 'bad-action' | 'unknown-account' | 'method' | 'cancel' = 'own';
    const q = rand();
    if (q < 0.03) {
      pathKind = 'sibling';
      accountInPath = act.tenant === 'A' ? (act.accountId === A.accounts.sandbox ? A.accounts.sandbox2 : A.accounts.sandbox) : B.accounts.sandbox2;
    } else if (q < 0.05) {
      pathKind = 'unknown-action';
      actionInPath = randomUUID();
    } else if (q < 0.06) {
      pathKind = 'bad-action';
      actionInPath = pick([act.id.toUpperCase(), `${act.id}%00`, `${act.id}x`, '..%2F..%2Fhistory', '%F0%9F%92%A3']);
    } else if (q < 0.07) {
      pathKind = 'unknown-account';
      accountInPath = randomUUID();
    } else if (q < 0.09) {
      pathKind = 'method';
      method = pick(['PUT', 'PATCH', 'GET', 'DELETE']);
    } else if (q < 0.1) {
      pathKind = 'cancel';
    }
    const cancelPath = pick([`${approvals(accountInPath)}/${actionInPath}`, `${approvals(accountInPath)}/${actionInPath}/cancel`, `${approvals(accountInPath)}/${actionInPath}/edit`]);
    if (pathKind === 'cancel') method = pick(['POST', 'DELETE', 'PATCH']);
    const path = pathKind === 'cancel' ? cancelPath : `${approvals(accountInPath)}/${actionInPath}/${op}`;

    // What the docs allow, in the order the service checks: headers, key, path, account, body, action, queue and version, the edit.
    let allowed: string[];
    let decision: Decision | undefined;
    if (hugeHeader) allowed = ['431 headers-too-large'];
    else if (pathKind === 'method') allowed = ['405 method-not-allowed'];
    // There is no cancel or separate edit endpoint for actions (docs/api.md: editing is part of the approval).
    else if (pathKind === 'cancel') allowed = ['404 not-found', '405 method-not-allowed'];
    else if (auth === 'none' || auth === 'revoked' || auth === 'garbage') allowed = ['401 unauthorized'];
    else if (auth === 'read') allowed = ['403 insufficient-scope'];
    else if (pathKind === 'bad-action') allowed = ['404 action-not-found', '404 not-found'];
    else if (auth === 'other' || pathKind === 'unknown-account') allowed = ['404 account-not-found'];
    // An optional body's media type is judged once its bytes are read: a body over the limit may answer 413 first.
    else if (mediaRefused || encodingRefused) allowed = ['415 unsupported-media-type', ...(variant.body !== 'ok' && variant.body.includes('413 payload-too-large') ? ['413 payload-too-large'] : [])];
    else if (variant.body !== 'ok') allowed = variant.body;
    else if (pathKind === 'sibling' || pathKind === 'unknown-action') allowed = ['404 action-not-found'];
    else if (!isAwaiting) allowed = ['409 action-not-in-queue'];
    else if (stale) allowed = ['409 action-changed'];
    else if (variant.semantic !== 'ok') allowed = variant.semantic ?? V422;
    else {
      allowed = ['200', ...(variant.alsoAllowed ?? [])];
      decision = { ...variant.decision!, keyId };
    }
    // Tenant B requires a distinct approver: its write key proposed every action of B (docs/api.md "Distinct approver").
    // The rule is checked where the decision is recorded: after the queue, the version and the edit's own shape, before the policy's verdict.
    if (act.tenant === 'B' && op === 'approve' && auth === 'write' && isAwaiting && !stale && (allowed[0] === '200' || (variant.body === 'ok' && variant.semantic !== 'ok'))) {
      allowed = allowed[0] === '200' ? ['403 distinct-approver-required', ...(variant.alsoAllowed ?? [])] : [...allowed, '403 distinct-approver-required'];
      decision = undefined;
    }
    // Idempotency-Key is not taken by the decision endpoints (docs/api.md names it for runs and the target endpoint only).
    if (headers['idempotency-key'] !== undefined && !/^[!-~]{1,255}$/.test(String(headers['idempotency-key']).trim())) allowed = [...allowed, '400 invalid-idempotency-key'];
    const accounts = [...new Set([act.accountId, ...(accountInPath !== act.accountId && acts.some((a) => a.accountId === accountInPath) ? [accountInPath] : [])])];
    const twin = auth === 'other' && allowed[0] === '404 account-not-found' ? { path: `${approvals(randomUUID())}/${actionInPath}/${op}`, ids: [accountInPath, actionInPath] } : undefined;
    const label = [
      `#${i} ${op} ${act.kind} (${act.status}) on ${act.campaignId ?? '-'}`,
      variant.label,
      stale ? 'stale expected_version' : '',
      auth !== 'write' ? `key=${auth}` : '',
      pathKind !== 'own' ? `path=${pathKind}${method !== 'POST' ? `:${method}` : ''}` : '',
      mediaRefused || encodingRefused ? `media=${headers['content-type'] ?? 'none'}/${headers['content-encoding'] ?? ''}` : '',
      headers['if-match'] !== undefined ? `if-match=${String(headers['if-match']).slice(0, 30)}` : '',
    ].filter(Boolean).join(' | ');
    return { label, act, method, path, headers, body: text, allowed, decision, accounts, twin, sentRequestId };
  }

  // ---------------------------------------------------------------------------------------------
  // Running a case and checking what can be observed.

  const slugOf = (a: Answer) => (typeof a.body === 'object' && a.body !== null && typeof a.body.type === 'string' ? a.body.type.replace(BASE, '') : '');
  const outcomeOf = (a: Answer) => (a.status >= 200 && a.status < 300 ? String(a.status) : `${a.status} ${slugOf(a)}`);

  async function settle(act: Act): Promise<any> {
    const deadline = Date.now() + 8000;
    for (;;) {
      const row = await rowOf(act);
      if (!['approved', 'applying', 'auto_applied'].includes(row.status)) return row;
      if (Date.now() > deadline) {
        violate(`${act.id}: still ${row.status} 8 s after its approval`);
        return row;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async function runCase(c: Case): Promise<void> {
    const { act } = c;
    const before = { params: structuredClone(act.params), status: act.status, version: act.version, edited: act.edited };
    const callsBefore = platformCalls.length;
    const answer = await send(c.method, c.path, c.headers, c.body);
    const where = `${c.label}\n        ${c.method} ${c.path} body=${(c.body ?? '(none)').slice(0, 300)}`;
    if (answer === 'timeout') {
      violate(`no answer within ${REQUEST_TIMEOUT_MS} ms: ${where}`);
      return;
    }
    const outcome = outcomeOf(answer);
    tally.set(outcome, (tally.get(outcome) ?? 0) + 1);
    if (VERBOSE) console.log(`      ${c.label} -> ${outcome}`);
    const said = `${where}\n        -> ${answer.status} ${answer.text.slice(0, 400)}`;

    // The answer itself.
    if (answer.status >= 500) violate(`5xx: ${said}`);
    if (answer.status >= 400) {
      if (!/^application\/problem\+json/.test(String(answer.headers['content-type'] ?? ''))) violate(`not problem+json: ${said}`);
      else {
        if (!DECISION_PROBLEMS.has(slugOf(answer))) violate(`undocumented problem type: ${said}`);
        if (answer.body.status !== answer.status) violate(`problem status differs from the HTTP status: ${said}`);
        if (answer.status === 422 && (!Array.isArray(answer.body.errors) || answer.body.errors.length === 0)) violate(`422 without errors[]: ${said}`);
      }
      if (answer.status === 401 && !String(answer.headers['www-authenticate'] ?? '').startsWith('Bearer')) violate(`401 without WWW-Authenticate: Bearer: ${said}`);
      if (answer.status === 405 && !answer.headers.allow) violate(`405 without Allow: ${said}`);
    }
    if (!c.allowed.includes(outcome)) violate(`answered ${outcome}, the docs say ${c.allowed.join(' or ')}: ${said}`);
    if (c.sentRequestId !== undefined && answer.status !== 431) {
      const echoed = answer.headers['x-request-id'];
      const safe = /^[A-Za-z0-9._-]{1,128}$/.test(c.sentRequestId);
      if (safe && echoed !== c.sentRequestId) violate(`a safe X-Request-Id was not echoed: ${said}`);
      if (!safe && echoed === c.sentRequestId) violate(`an unsafe X-Request-Id was echoed: ${said}`);
    }
    if (c.twin && outcome === '404 account-not-found') {
      const twin = await send(c.method, c.twin.path, c.headers, c.body);
      if (twin === 'timeout') violate(`twin of ${c.label} timed out`);
      else if (!isDeepStrictEqual(problemShape(twin.body, [...c.twin.ids, c.twin.path.split('/')[4]!]), problemShape(answer.body, c.twin.ids))) {
        violate(`another workspace's action does not look like one that does not exist: ${said}\n        twin: ${twin.text}`);
      }
    }

    const accepted = answer.status === 200;
    const row = accepted ? await settle(act) : await rowOf(act);
    const readKey = (accountId: string) => readKeyOfAccount(accountId);
    const logs = new Map<string, any[]>();
    for (const accountId of c.accounts) logs.set(accountId, await newEvents(accountId, readKey(accountId)));
    const calls = platformCalls.slice(callsBefore);

    if (!accepted || !c.decision) {
      // Refused: nothing appended anywhere, the action as it was, nothing sent to the platform.
      for (const [accountId, events] of logs) {
        if (events.length > 0) violate(`refused request appended ${events.length} event(s) to ${accountId} (${events.map((e) => e.type).join(', ')}): ${said}`);
      }
      if (row.version !== before.version || row.status !== before.status || !isDeepStrictEqual(row.params, before.params)) {
        violate(`refused request changed the action (${before.status} ${JSON.stringify(before.params)} -> ${row.status} ${JSON.stringify(row.params)}): ${said}`);
      }
      if (calls.length > 0) violate(`refused request sent ${JSON.stringify(calls)} to the platform: ${said}`);
      remember(act, row);
      return;
    }

    // Accepted: exactly the decision's events, the action as sent, the platform got exactly that.
    const d = c.decision;
    const body = answer.body;
    if (body.id !== act.id || body.project_id !== act.accountId) violate(`200 names another action or account: ${said}`);
    if (!isDeepStrictEqual(body.params, d.expectedParams)) violate(`200 shows params ${JSON.stringify(body.params)}, sent ${JSON.stringify(d.expectedParams)}: ${said}`);
    const events = logs.get(act.accountId) ?? [];
    const count = (type: string) => events.filter((e) => e.type === type).length;
    const foreign = events.filter((e) => e.aggregate?.id !== act.id);
    if (foreign.length > 0) violate(`accepted decision appended events of other aggregates (${foreign.map((e) => `${e.type}@${e.aggregate?.id}`).join(', ')}): ${said}`);
    const expectCount = (type: string, n: number) => {
      if (count(type) !== n) violate(`accepted ${d.op}${d.edit ? ' with edit' : ''}: ${count(type)} ${type} in the history, expected ${n} (${events.map((e) => e.type).join(', ')}): ${said}`);
    };
    expectCount('ActionApproved', d.op === 'approve' ? 1 : 0);
    expectCount('ActionRejected', d.op === 'reject' ? 1 : 0);
    expectCount('ActionEdited', d.edit ? 1 : 0);
    expectCount('ActionProposed', 0);
    const others = events.filter((e) => !['ActionApproved', 'ActionRejected', 'ActionEdited'].includes(e.type) && !APPLY_EVENTS.has(e.type));
    if (others.length > 0) violate(`accepted decision appended ${others.map((e) => e.type).join(', ')}: ${said}`);
    for (const [accountId, evs] of logs) if (accountId !== act.accountId && evs.length > 0) violate(`decision on ${act.accountId} appended to ${accountId}: ${said}`);
    const decided = events.find((e) => e.type === (d.op === 'approve' ? 'ActionApproved' : 'ActionRejected'));
    const recordedNote = d.op === 'approve' ? decided?.data.note : decided?.data.reason;
    if (decided && d.note !== undefined && recordedNote !== d.note) violate(`${decided.type} records ${JSON.stringify(String(recordedNote).slice(0, 60))}, sent ${JSON.stringify(d.note.slice(0, 60))}: ${said}`);
    if (decided && decided.actor?.id !== d.keyId) violate(`${decided.type} names actor ${JSON.stringify(decided.actor)}, the request's key is ${d.keyId}: ${said}`);
    if (d.edit) {
      const edited = events.find((e) => e.type === 'ActionEdited');
      const approvedAt = events.findIndex((e) => e.type === 'ActionApproved');
      if (edited) {
        if (events.indexOf(edited) > approvedAt) violate(`ActionEdited after ActionApproved: ${said}`);
        if (!isDeepStrictEqual(edited.data.after.params, d.expectedParams)) violate(`ActionEdited.after.params ${JSON.stringify(edited.data.after.params)} != ${JSON.stringify(d.expectedParams)}: ${said}`);
        if (!isDeepStrictEqual(edited.data.before.params, before.params)) violate(`ActionEdited.before.params ${JSON.stringify(edited.data.before.params)} != ${JSON.stringify(before.params)}: ${said}`);
        if (!isDeepStrictEqual(edited.data.edit, d.edit)) violate(`ActionEdited.edit ${JSON.stringify(edited.data.edit)} != sent ${JSON.stringify(d.edit)}: ${said}`);
      }
    }

    // The representation (GET) afterwards.
    if (!isDeepStrictEqual(row.params, d.expectedParams)) violate(`GET shows params ${JSON.stringify(row.params)}, sent ${JSON.stringify(d.expectedParams)}: ${said}`);
    if (row.project_id !== act.accountId) violate(`GET shows account ${row.project_id}: ${said}`);
    if (act.campaignId !== null && row.params.campaign_id !== act.campaignId) violate(`the decision moved the action to campaign ${row.params.campaign_id}: ${said}`);
    if (d.op === 'reject' && row.status !== 'rejected') violate(`rejected action shows ${row.status}: ${said}`);
    if (d.op === 'approve' && !['applied', 'returned'].includes(row.status)) violate(`approved action ended ${row.status} (${row.status_reason}): ${said}`);
    if (d.edit) {
      if (row.status !== 'applied') violate(`edited and approved action ended ${row.status} (${row.status_reason}), the docs say the worker applies the edited version: ${said}`);
      if (row.edited === null || row.edited.by?.id !== d.keyId) violate(`GET edited ${JSON.stringify(row.edited)} does not name the approver ${d.keyId}: ${said}`);
      else if (!isDeepStrictEqual(row.edited.original.params, act.edited === null ? before.params : (act.edited as any).original.params)) {
        violate(`GET edited.original.params ${JSON.stringify(row.edited.original.params)} is not the version as proposed: ${said}`);
      }
      // The OpenAPI document: `disposition` is what happened when the action was proposed; a decision moves `status`, never it.
      if (act.disposition !== null && row.disposition !== act.disposition) violate(`the decision changed disposition from ${act.disposition} to ${row.disposition}: ${said}`);
      if (!row.policy_reasons.join(' ').includes('edited by an approver')) violate(`edited action's policy_reasons do not say it was classified again: ${said}`);
      const field = FIELD_OF[act.kind as keyof typeof FIELD_OF];
      if (field !== 'keywords' && field !== undefined && !row.summary.includes(`to ${d.expectedParams[field]}`)) violate(`edited action's summary "${row.summary}" does not show the edited value ${d.expectedParams[field]}: ${said}`);
      if (d.tier !== undefined && row.risk_tier !== d.tier) violate(`edited action classified ${row.risk_tier}, the policy says ${d.tier} (change ${d.change === undefined ? '?' : (d.change * 100).toFixed(2)} %; expected because: ${d.why || 'within the band'}; service's reasons: ${row.policy_reasons.join(' / ')}): ${said}`);
      if (d.change !== undefined) {
        const band = BANDS[act.kind as keyof typeof BANDS];
        if (Math.abs(d.change) > band.safe + 1e-9 && row.risk_tier === 'safe') violate(`edit of ${(d.change * 100).toFixed(1)} % counted safe: ${said}`);
      }
    } else if (!isDeepStrictEqual(row.edited, before.edited)) violate(`a decision without an edit changed edited: ${said}`);

    // The platform: exactly the approved version, once, when applied; nothing otherwise.
    const wanted = { kind: act.kind, ...d.expectedParams };
    for (const call of calls) {
      if (call.accountId !== act.accountId || !isDeepStrictEqual(call.change, wanted)) violate(`platform got ${JSON.stringify(call)}, approved ${JSON.stringify(wanted)} on ${act.accountId}: ${said}`);
    }
    const expectedCalls = d.op === 'approve' && row.status === 'applied' ? 1 : 0;
    if (calls.length !== expectedCalls) violate(`${calls.length} platform change(s) for a decision that ended ${row.status}: ${said}`);
    if (d.op === 'approve' && !d.edit && row.status === 'returned' && act.basis !== null && act.campaignId !== null && Math.abs(liveValue(act) - act.basis) < 0.005) {
      violate(`plain approval returned although nothing changed since the proposal (${row.status_reason}): ${said}`);
    }

    remember(act, row);
    if (row.status === 'applied' && act.campaignId !== null && act.kind !== 'add_negative_keywords') {
      const campaign = campaigns.get(act.accountId)!.get(act.campaignId)!;
      const what = `${act.kind} of campaign ${act.campaignId} applied (action ${act.id}, case ${c.label.split(' ')[0]})`;
      // A target change of a portfolio strategy moves every campaign on it (docs/policy.md "Learning period").
      if (act.kind !== 'set_campaign_budget') for (const id of campaign.bidding_strategy.portfolio?.campaign_ids ?? []) learning.set(`${act.accountId}/${id}`, `${what}, through portfolio ${campaign.bidding_strategy.portfolio!.id}`);
      learning.set(`${act.accountId}/${act.campaignId}`, what);
    }
    if (row.status === 'applied' || d.edit) await refreshCampaigns(act.accountId, readKey(act.accountId));
    if (d.edit && act.kind !== 'add_negative_keywords') act.basis = liveValue(act);
  }

  // ---------------------------------------------------------------------------------------------

  before(async () => {
    console.log(`      hostile edit fuzz seed: ${SEED} (HOSTILE_EDIT_FUZZ_SEED=${SEED} to replay), ${CASES} cases`);
    originalApplyChange = SandboxPlatform.prototype.applyChange;
    SandboxPlatform.prototype.applyChange = async function (this: SandboxPlatform, account: PlatformAccountRef, change: PlatformChange) {
      platformCalls.push({ accountId: account.accountId, change: structuredClone(change) });
      return originalApplyChange.call(this, account, change);
    };
    svc = await startTestService('hostile-edit');
    port = Number(new URL(svc.baseUrl).port);
    const infra = svc.service.infrastructure;
    // Sandbox accounts whose generated campaigns, keywords and search terms follow from the seed, so a seed replays the same cases.
    const seededAccount = async (workspaceId: string, name: string, n: number) => {
      const accountId = uuidv7();
      const sandboxSeed = (Math.imul(SEED >>> 0, 2654435761) + n * 40503) >>> 1;
      const result = await infra.commands.handle(accountDecider, {
        type: 'CreateAccount', workspaceId, accountId, name, platform: 'sandbox', sandboxSeed, meta: { actor: { kind: 'operator', id: 'hostile-edit-fuzz' }, correlationId: accountId },
      } as never);
      await waitForProjection(infra.database.db, identityProjection.name, lastSeqOf(result as never)!, 5000);
      return accountId;
    };
    const withSeededAccounts = async (t: TestTenant, n: number): Promise<TestTenant> => {
      const [sandbox, sandbox2] = await Promise.all([seededAccount(t.workspaceId, `${t.workspaceId} fuzz 1`, n), seededAccount(t.workspaceId, `${t.workspaceId} fuzz 2`, n + 1)]);
      return { ...t, accounts: { ...t.accounts, sandbox, sandbox2 } };
    };
    const [a, b] = await Promise.all([svc.tenant('edit-a'), svc.tenant('edit-b')]);
    [A, B] = await Promise.all([withSeededAccounts(a, 1), withSeededAccounts(b, 3)]);
    await setDistinctApprover(infra, B.workspaceId, true);
    const revoked = (await issueKey(infra, A.workspaceId, 'write', 'revoked')).value;
    await revokeKey(infra, revoked.id);
    revokedKey = revoked.key;
    platform = new SandboxPlatform(infra.database.db);
    proposals = new ProposalService(infra.commands, new ApprovalsAppliedChangeLookup(infra.database.db), { platform });
    await Promise.all([
      refreshCampaigns(A.accounts.sandbox, A.keys.read),
      refreshCampaigns(A.accounts.sandbox2, A.keys.read),
      refreshCampaigns(B.accounts.sandbox, B.keys.read),
      refreshCampaigns(B.accounts.sandbox2, B.keys.read),
    ]);
  });

  after(async () => {
    if (originalApplyChange) SandboxPlatform.prototype.applyChange = originalApplyChange;
    agent.destroy();
    await svc?.stop();
  });

  it('every decision answers a documented status, refusals change nothing, accepted edits are exactly what was sent and re-classified', async () => {
    const started = Date.now();
    const pool: { kind: Kind | 'portfolio'; tenant: 'A' | 'B'; accountId: string }[] = [
      { kind: 'set_target_cpa', tenant: 'A', accountId: A.accounts.sandbox },
      // Two waiting on one campaign: once one is applied the other is based on a stale value (a plain approval is returned to the queue).
      { kind: 'set_target_cpa', tenant: 'A', accountId: A.accounts.sandbox },
      { kind: 'set_target_roas', tenant: 'A', accountId: A.accounts.sandbox },
      { kind: 'set_campaign_budget', tenant: 'A', accountId: A.accounts.sandbox },
      { kind: 'set_campaign_budget', tenant: 'A', accountId: A.accounts.sandbox },
      { kind: 'add_negative_keywords', tenant: 'A', accountId: A.accounts.sandbox },
      { kind: 'portfolio', tenant: 'A', accountId: A.accounts.sandbox2 },
      { kind: 'set_campaign_budget', tenant: 'A', accountId: A.accounts.sandbox2 },
      { kind: 'add_negative_keywords', tenant: 'A', accountId: A.accounts.sandbox2 },
      { kind: 'pause_keywords', tenant: 'A', accountId: A.accounts.sandbox2 },
      { kind: 'set_target_cpa', tenant: 'B', accountId: B.accounts.sandbox },
      { kind: 'add_negative_keywords', tenant: 'B', accountId: B.accounts.sandbox },
    ];
    // An auto-applied action (safe, auto_apply: true) is not waiting for a person: any decision on it is 409.
    const autoBasis = campaigns.get(B.accounts.sandbox2)!;
    const auto = await propose('set_target_cpa', 'B', B.accounts.sandbox2, true);
    if (auto) {
      expect(auto.status, `the auto-apply proposal: ${JSON.stringify(auto)}`).to.be.oneOf(['auto_applied', 'applying', 'applied']);
      baselines.set(`${auto.accountId}/${auto.campaignId}/target_cpa`, autoBasis.get(auto.campaignId!)!.bidding_strategy.target_cpa!);
      remember(auto, await settle(auto));
      if (auto.status === 'applied') learning.set(`${auto.accountId}/${auto.campaignId}`, `auto-applied ${auto.id}`);
      await refreshCampaigns(auto.accountId, B.keys.read);
    }
    // An auto-applied budget change the apply worker returns to the queue (it was based on a value the campaign no longer has):
    // a person may then edit and approve it. One joins the fuzz (tenant A); one gets a directed edit right away (tenant B).
    const autoReturned = async (tenant: 'A' | 'B', accountId: string, avoid: (string | null)[]): Promise<Act> => {
      const t = keysOf(tenant);
      const enabled = [...campaigns.get(accountId)!.values()].filter((c) => c.status === 'enabled' && !avoid.includes(c.id));
      const campaign = enabled[2] ?? enabled[enabled.length - 1]!;
      const basis = Math.round(campaign.daily_budget * 0.9 * 100) / 100;
      const next = Math.round(basis * 1.05 * 100) / 100;
      const proposed = await proposals.propose({
        workspaceId: t.workspaceId, accountId, runId: null, autoApply: true, reason: 'hostile edit fuzz: stale basis', meta: meta(t.keyIds.write),
        draft: { kind: 'set_campaign_budget', params: { campaign_id: campaign.id, daily_budget: next }, based_on: { campaign_status: campaign.status, daily_budget: basis } },
        summary: `Change the daily budget of "${campaign.name}" from ${basis} to ${next}`,
      });
      expect(proposed.disposition, JSON.stringify(proposed)).to.equal('auto_applied');
      baselines.set(`${accountId}/${campaign.id}/daily_budget`, basis);
      const act: Act = { id: proposed.id, accountId, tenant, kind: 'set_campaign_budget', campaignId: campaign.id, portfolio: false, params: {}, status: '', version: '', edited: null, disposition: null, basis, oldVersions: [] };
      remember(act, await settle(act));
      act.oldVersions.length = 0;
      expect(act.status, 'the stale auto-applied budget change is returned to the queue').to.equal('returned');
      acts.push(act);
      return act;
    };
    await autoReturned('A', A.accounts.sandbox2, []);
    const directed = await autoReturned('B', B.accounts.sandbox2, [auto?.campaignId ?? null]);
    await newEvents(B.accounts.sandbox2, B.keys.read);
    {
      // Directed: a person edits it to +50 % (outside the safe ±20 %, inside ±100 %) and approves it (B's admin key: not the proposer).
      const value = roundTo('daily_budget', liveValue(directed) * 1.5);
      const verdict = numericVerdict(directed, value);
      const edit = { daily_budget: value };
      await runCase({
        label: '#directed approve set_campaign_budget (returned auto-applied) | edit daily_budget +50 % | key=admin',
        act: directed,
        method: 'POST',
        path: `${approvals(directed.accountId)}/${directed.id}/approve`,
        headers: { authorization: `Bearer ${B.keys.admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({ edit }),
        allowed: ['200'],
        decision: { op: 'approve', edit, note: '', expectedParams: { ...directed.params, daily_budget: value }, tier: verdict.tier, change: verdict.change, why: verdict.why, keyId: B.keyIds.admin },
        accounts: [directed.accountId],
      });
    }
    for (const slot of pool) await propose(slot.kind, slot.tenant, slot.accountId);
    for (const accountId of [A.accounts.sandbox, A.accounts.sandbox2, B.accounts.sandbox, B.accounts.sandbox2]) await newEvents(accountId, readKeyOfAccount(accountId));

    for (let i = 0; i < CASES; i++) {
      // Keep one action of each slot waiting for a decision.
      const proposed: string[] = [];
      const sameSlot = (x: (typeof pool)[number], y: (typeof pool)[number]) => x.kind === y.kind && x.accountId === y.accountId;
      for (const [n, slot] of pool.entries()) {
        const kind = slot.kind === 'portfolio' ? 'set_target_cpa' : slot.kind;
        const nth = pool.slice(0, n).filter((other) => sameSlot(other, slot)).length;
        const waiting = acts.filter((a) => a.accountId === slot.accountId && a.kind === kind && a.portfolio === (slot.kind === 'portfolio') && ['queued', 'returned'].includes(a.status)).length;
        if (waiting <= nth && (await propose(slot.kind, slot.tenant, slot.accountId))) proposed.push(slot.accountId);
      }
      for (const accountId of new Set(proposed)) await newEvents(accountId, readKeyOfAccount(accountId));
      await runCase(await buildCase(i));
    }

    // The platform received only approved versions: every change it got is the params of an applied action.
    for (const call of platformCalls) {
      const match = acts.some((a) => a.accountId === call.accountId && a.status === 'applied' && isDeepStrictEqual(call.change, { kind: a.kind, ...a.params }));
      if (!match) violate(`the platform got a change no applied action holds: ${JSON.stringify(call)}`);
    }
    const applied = acts.filter((a) => a.status === 'applied').length;
    if (platformCalls.length !== applied) violate(`${platformCalls.length} platform changes for ${applied} applied actions`);

    const summary = [...tally.entries()].sort((a, b) => b[1] - a[1]).map(([o, n]) => `${o}×${n}`).join(', ');
    console.log(`      ${CASES} cases in ${Date.now() - started} ms over ${acts.length} actions: ${summary}`);
    if (violations.length > 0) console.log(`      VIOLATIONS (seed ${SEED}):\n        ${violations.join('\n        ')}`);
    expect(violations, `seed ${SEED}: ${violations.length} violation(s)`).to.deep.equal([]);
  });
});
