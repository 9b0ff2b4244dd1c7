import { setTimeout as sleep } from 'node:timers/promises';
import type { PlatformKind } from '../events/catalogue/index.ts';
import { createAccount, createWorkspace, issueKey, pauseRunStarts } from '../operator/operator-commands.ts';
import type { Infrastructure } from '../runtime/infrastructure.ts';
import { curlCommand, type HttpExample } from './curl-command.ts';
import { DemoApi } from './demo-api.ts';
import { CliError } from './output.ts';

/**
 * A brief the built-in rules agent answers with several proposals (one negative keyword
 * per wasteful search term of the sandbox data), so there is one action to approve and
 * another to reject.
 */
export const DEMO_BRIEF = 'Find wasted spend in search terms and propose negative keywords';

/** How long the demo waits for its run; the rules agent needs well under a second, Gemini longer. */
const RUN_WAIT_MS = 180_000;
/** Between two looks at the run. The demo polls faster than Retry-After because it is a demo. */
const POLL_INTERVAL_MS = 250;
/** A key issued by the CLI works once the service's projector has seen it, usually within milliseconds. */
const KEY_VISIBLE_WAIT_MS = 15_000;
/** How long the demo keeps its second run queued (so the cancel example can cancel it) unless told otherwise. */
export const DEFAULT_HOLD_SECONDS = 600;

export interface DemoWorkspace {
  readonly workspace_id: string;
  readonly accounts: { readonly id: string; readonly name: string; readonly platform: PlatformKind }[];
  readonly write_key: string;
  readonly read_key: string;
  readonly admin_key: string;
  /** The demo run, finished. */
  readonly run_id: string;
  readonly run_status: string;
  /**
   * A run kept queued for the cancel example, in a workspace of its own whose run starts are
   * paused (the demo workspace's runs start at once); null with --hold 0.
   */
  readonly held_run: { readonly id: string; readonly queued_until: string; readonly workspace_id: string; readonly write_key: string } | null;
  /** Every example, in the order to try them, with the status each answers. */
  readonly examples: { name: string; description: string; method: string; url: string; expect_status: number; curl: string }[];
  /** Each example's curl by name (the same commands as `examples`). */
  readonly curl: Record<string, string>;
}

/**
 * `adsagent demo`: a workspace with two sandbox accounts and one not connected, a key of
 * each scope, and a real run on the first sandbox that the demo waits for; then a curl
 * for every endpoint with the real ids of that run, its actions and a campaign.
 *
 * @example
 * const demo = await createDemo(infra, 'http://localhost:8080');
 * console.log(describeDemo(demo));
 */
export async function createDemo(infra: Infrastructure, baseUrl: string, options: { readonly holdSeconds?: number } = {}): Promise<DemoWorkspace> {
  const holdSeconds = options.holdSeconds ?? DEFAULT_HOLD_SECONDS;
  const api = new DemoApi(baseUrl);
  // Reach the service before recording anything, so a stopped service leaves no half demo behind.
  await api.call('GET', '/healthz', null);
  const workspaceId = (await createWorkspace(infra, 'Demo workspace')).value.id;
  const specs = [
    { name: 'Acme Outdoor (sandbox)', platform: 'sandbox' },
    { name: 'Bloom Florists (sandbox)', platform: 'sandbox' },
    { name: 'Not connected yet', platform: 'none' },
    { name: 'Cedar Bakery (sandbox)', platform: 'sandbox' },
  ] as const;
  const accounts = [];
  for (const spec of specs) {
    accounts.push({ id: (await createAccount(infra, workspaceId, spec.name, spec.platform)).value.id, ...spec });
  }
  const write = (await issueKey(infra, workspaceId, 'write', 'demo write')).value.key;
  const read = (await issueKey(infra, workspaceId, 'read', 'demo read')).value.key;
  const admin = (await issueKey(infra, workspaceId, 'admin', 'demo admin')).value.key;
  await untilKeyWorks(api, write);
  await untilKeyWorks(api, admin);

  const account = accounts[0]!.id;
  const created = await api.expect(202, 'POST', '/api/v1/runs', write, { brief: DEMO_BRIEF, project_id: account }, { 'idempotency-key': `demo-${workspaceId}` });
  const run = await untilFinished(api, created.id as string, write);
  const proposed = (run.result?.actions ?? []) as { id: string; disposition: string }[];
  const actions = proposed.filter((a) => a.disposition === 'queued');
  if (actions.length < 2) {
    throw new CliError(
      `the demo run ${run.id} ended ${run.status} with ${actions.length} queued action(s) of ${proposed.length} ` +
        `(${JSON.stringify(run.result ?? run.error ?? null).slice(0, 400)}), 2 are needed to show approve and reject: ` +
        `look at it with \`curl -s -H "Authorization: Bearer ${write}" ${api.baseUrl}/api/v1/runs/${run.id}\``,
    );
  }
  const campaigns = (await api.expect(200, 'GET', `/api/v1/accounts/${account}/campaigns`, read)).data as Campaign[];
  const target = targetChange(campaigns);

  // A run that stays queued long enough to cancel: in a workspace of its own whose run starts
  // are paused (an operator command, `adsagent workspace pause-runs`), so that runs a reader
  // starts in the demo workspace with its keys (README, "Calling the API") start at once.
  let heldRun: DemoWorkspace['held_run'] = null;
  if (holdSeconds > 0) {
    const heldWorkspace = (await createWorkspace(infra, 'Demo workspace (a run held for cancel)')).value.id;
    const heldAccount = (await createAccount(infra, heldWorkspace, 'Held run account (sandbox)', 'sandbox')).value.id;
    const heldKey = (await issueKey(infra, heldWorkspace, 'write', 'demo held run')).value.key;
    await untilKeyWorks(api, heldKey);
    const paused = await pauseRunStarts(infra, heldWorkspace, holdSeconds, 'demo: keeps a run queued for the cancel example');
    const held = await api.expect(202, 'POST', '/api/v1/runs', heldKey, { brief: 'Which campaigns spent the most last week?', project_id: heldAccount });
    heldRun = { id: held.id as string, queued_until: paused.value.run_starts_paused_until ?? '', workspace_id: heldWorkspace, write_key: heldKey };
  }

  const examples = buildExamples({ base: api.baseUrl, account, otherAccount: accounts[1]!.id, runId: run.id, held: heldRun, actions, target, keys: { read, write, admin } });
  return {
    workspace_id: workspaceId,
    accounts,
    write_key: write,
    read_key: read,
    admin_key: admin,
    run_id: run.id,
    run_status: run.status,
    held_run: heldRun,
    examples: examples.map((e) => ({ name: e.name, description: e.description, method: e.method, url: e.url, expect_status: e.expectStatus, curl: curlCommand(e) })),
    curl: Object.fromEntries(examples.map((e) => [e.name, curlCommand(e)])),
  };
}

interface Campaign {
  readonly id: string;
  readonly name: string;
  readonly bidding_strategy: { readonly type: string; readonly target_cpa: number | null; readonly target_roas_pct: number | null };
}

/** A campaign with a target and the body that proposes a 10 % change of it, in the field its strategy uses. */
function targetChange(campaigns: readonly Campaign[]): { campaign: Campaign; body: Record<string, unknown> } {
  for (const campaign of campaigns) {
    const { target_cpa: cpa, target_roas_pct: roas } = campaign.bidding_strategy;
    if (cpa !== null) return { campaign, body: { target_cpa: Math.round(cpa * 110) / 100, reason: 'Demo: room to bid a little higher' } };
    if (roas !== null) return { campaign, body: { target_roas_pct: Math.round(roas * 1.1), reason: 'Demo: ask a little more return' } };
  }
  throw new CliError('no campaign of the demo account has a Target CPA or Target ROAS; the sandbox data should always have one, please report this');
}

async function untilKeyWorks(api: DemoApi, key: string): Promise<void> {
  const deadline = Date.now() + KEY_VISIBLE_WAIT_MS;
  for (;;) {
    const response = await api.call('GET', '/api/v1/workspace/kill-switch', key);
    if (response.status === 200) return;
    if (Date.now() > deadline) {
      throw new CliError(
        `a key the demo issued still answers ${response.status} after ${KEY_VISIBLE_WAIT_MS / 1000} s: is the service at ${api.baseUrl} ` +
          'running its projectors (ROLES includes projectors) on the same EVENT_STREAM and DATABASE_SCHEMA as this CLI?',
      );
    }
    await sleep(POLL_INTERVAL_MS);
  }
}

async function untilFinished(api: DemoApi, runId: string, key: string): Promise<any> {
  const deadline = Date.now() + RUN_WAIT_MS;
  for (;;) {
    const run = await api.expect(200, 'GET', `/api/v1/runs/${runId}`, key);
    if (run.status !== 'queued' && run.status !== 'running') return run;
    if (Date.now() > deadline) {
      throw new CliError(
        `the demo run ${runId} is still ${run.status} after ${RUN_WAIT_MS / 1000} s: is an agent worker running ` +
          '(ROLES includes agent-worker)? Follow it with `adsagent events tail --follow`',
      );
    }
    await sleep(POLL_INTERVAL_MS);
  }
}

interface ExampleIds {
  readonly base: string;
  readonly account: string;
  readonly otherAccount: string;
  readonly runId: string;
  /** The run kept queued for the cancel example, with its workspace's write key; null: cancel is shown on the finished demo run. */
  readonly held: { readonly id: string; readonly write_key: string } | null;
  readonly actions: readonly { id: string }[];
  readonly target: { campaign: Campaign; body: Record<string, unknown> };
  readonly keys: { readonly read: string; readonly write: string; readonly admin: string };
}

/** Every endpoint, in an order that works when pasted top to bottom right after the demo. */
function buildExamples(ids: ExampleIds): HttpExample[] {
  const { base, account, runId, keys } = ids;
  const auth = (key: string) => ({ Authorization: `Bearer ${key}` });
  const approvals = `${base}/api/v1/accounts/${account}/approvals`;
  return [
    { name: 'list_accounts', description: 'the accounts this key sees; project_id in the API is one of these ids', method: 'GET', url: `${base}/api/v1/accounts`, headers: auth(keys.read), expectStatus: 200 },
    { name: 'list_campaigns', description: 'the campaigns of the demo account, each with its bidding strategy', method: 'GET', url: `${base}/api/v1/accounts/${account}/campaigns`, headers: auth(keys.read), expectStatus: 200 },
    { name: 'poll_run', description: 'the demo run, finished: status, duration_ms, result.actions (no Retry-After once terminal)', method: 'GET', url: `${base}/api/v1/runs/${runId}`, headers: auth(keys.write), expectStatus: 200 },
    { name: 'run_events', description: "the run's live events as Server-Sent Events; a client that wants to know at once listens here instead of polling", method: 'GET', url: `${base}/api/v1/runs/${runId}/events`, headers: auth(keys.write), expectStatus: 200, stream: true },
    { name: 'list_approvals', description: 'the queued actions of the account, the demo run\'s among them', method: 'GET', url: `${approvals}?status=queued`, headers: auth(keys.read), expectStatus: 200 },
    { name: 'approve_action', description: 'approve one action of the demo run; the apply worker then applies it to the sandbox', method: 'POST', url: `${approvals}/${ids.actions[0]!.id}/approve`, headers: auth(keys.write), body: { note: 'Looks right' }, expectStatus: 200 },
    { name: 'reject_action', description: 'reject another action of the demo run, with the reason', method: 'POST', url: `${approvals}/${ids.actions[1]!.id}/reject`, headers: auth(keys.write), body: { reason: 'We still sell this' }, expectStatus: 200 },
    { name: 'propose_target', description: `propose a new target for "${ids.target.campaign.name}" in the field its strategy uses (it queues for approval)`, method: 'POST', url: `${base}/api/v1/accounts/${account}/campaigns/${ids.target.campaign.id}/target`, headers: auth(keys.write), body: ids.target.body, expectStatus: 200 },
    { name: 'history', description: "the account's history read from the event log, oldest first (stream order)", method: 'GET', url: `${base}/api/v1/accounts/${account}/history?limit=20`, headers: auth(keys.read), expectStatus: 200 },
    { name: 'kill_switch', description: "the workspace's kill switch", method: 'GET', url: `${base}/api/v1/workspace/kill-switch`, headers: auth(keys.read), expectStatus: 200 },
    { name: 'kill_switch_engage', description: 'stop every apply in the workspace at once (admin key)', method: 'POST', url: `${base}/api/v1/workspace/kill-switch/engage`, headers: auth(keys.admin), body: { reason: 'Demo: trying the kill switch' }, expectStatus: 200 },
    { name: 'kill_switch_release', description: 'release it again (admin key)', method: 'POST', url: `${base}/api/v1/workspace/kill-switch/release`, headers: auth(keys.admin), expectStatus: 200 },
    ids.held
      ? {
          name: 'cancel_run',
          description: 'cancel the queued run the demo keeps waiting (in a workspace of its own whose run starts are paused, with its key): 200, status canceled',
          method: 'DELETE',
          url: `${base}/api/v1/runs/${ids.held.id}`,
          headers: auth(ids.held.write_key),
          expectStatus: 200,
        }
      : {
          name: 'cancel_run',
          description: 'cancel a run: only a queued run can be canceled; the demo run has finished, so this answers 409 run-already-finished (run the demo without --hold 0 for a queued one)',
          method: 'DELETE',
          url: `${base}/api/v1/runs/${runId}`,
          headers: auth(keys.write),
          expectStatus: 409,
        },
    {
      name: 'start_read_run',
      description: 'a read key may start a run too: it answers questions and proposes nothing',
      method: 'POST', url: `${base}/api/v1/runs`, headers: auth(keys.read), body: { brief: 'How did my campaigns do in the last 30 days?', project_id: ids.otherAccount }, expectStatus: 202 },
    { name: 'openapi', description: 'the OpenAPI 3.1 document (no key needed)', method: 'GET', url: `${base}/api/v1/openapi.json`, headers: {}, expectStatus: 200 },
  ];
}

export function describeDemo(demo: DemoWorkspace): string {
  const lines = [
    `workspace   ${demo.workspace_id}`,
    ...demo.accounts.map((a) => `account     ${a.id}  ${a.name}`),
    `write key   ${demo.write_key}`,
    `read key    ${demo.read_key}`,
    `admin key   ${demo.admin_key}`,
    `demo run    ${demo.run_id}  ${demo.run_status}`,
    ...(demo.held_run
      ? [`held run    ${demo.held_run.id}  queued until ${demo.held_run.queued_until} (in workspace ${demo.held_run.workspace_id}, whose run starts are paused; \`adsagent workspace resume-runs ${demo.held_run.workspace_id}\` ends it)`]
      : []),
    '',
    'Try every endpoint (keys are shown once; keep them). Each curl answers the status in brackets:',
    ...demo.examples.map((e) => `\n# ${e.name.replaceAll('_', ' ')} [${e.expect_status}]: ${e.description}\n${e.curl}`),
  ];
  return lines.join('\n');
}
