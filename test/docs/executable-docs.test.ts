import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEMO_BRIEF } from '../../src/cli/demo.ts';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';
import { parseCurl, sendCurl } from './curl-request.ts';

/**
 * Docs that cannot drift (issue #15): every HTTP example in README.md and docs/api.md that
 * is marked runnable is run against a live service, and must answer the status it claims.
 *
 * The convention, in the Markdown source:
 *
 *     <!-- runnable: expect 202 -->
 *     ```sh
 *     curl -s -X POST -H "Authorization: Bearer $API_KEY" ... http://localhost:8080/api/v1/runs
 *     ```
 *
 * One curl per block; `$NAME` variables are the ones listed in VARIABLES below (README.md,
 * "Calling the API", tells readers how to set them) and `http://localhost:8080` is replaced by
 * the test service's address. A curl block that cannot be run says why, with
 * `<!-- not runnable: REASON -->`; an unmarked curl block fails this test, so a new example
 * cannot slip in unchecked.
 */
const DOCUMENTS = ['README.md', 'docs/api.md'] as const;
const DOCUMENTED_BASE_URL = 'http://localhost:8080';

interface Example {
  readonly document: string;
  readonly line: number;
  readonly command: string;
  readonly expectStatus: number;
}

const MARKER = /<!--\s*(runnable:\s*expect\s+(\d{3})|not runnable:[^>]*?)\s*-->\s*$/;

/** The fenced shell blocks of a Markdown document that hold a curl, with the marker just above each. */
function curlBlocks(document: string): { line: number; command: string; marker: RegExpMatchArray | null }[] {
  const lines = readFileSync(document, 'utf8').split('\n');
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l));
    if (end < 0) break;
    const body = lines.slice(i + 1, end).join('\n');
    if (['sh', 'bash', 'shell', ''].includes(open[1]!) && /^\s*curl\s/m.test(body)) {
      let above = i - 1;
      while (above >= 0 && lines[above]!.trim() === '') above--;
      blocks.push({ line: i + 1, command: body, marker: above >= 0 ? MARKER.exec(lines[above]!) : null });
    }
    i = end;
  }
  return blocks;
}

function examplesOf(document: string): Example[] {
  return curlBlocks(document).flatMap(({ line, command, marker }) => {
    if (!marker) throw new Error(`${document}:${line}: a curl example without <!-- runnable: expect NNN --> or <!-- not runnable: REASON -->`);
    if (!marker[2]) return [];
    const commands = command.replace(/\\\r?\n/g, ' ').split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#'));
    if (commands.length !== 1) throw new Error(`${document}:${line}: a runnable block holds exactly one curl, this one has ${commands.length} lines`);
    return [{ document, line, command: commands[0]!.replace(DOCUMENTED_BASE_URL, '$__BASE_URL'), expectStatus: Number(marker[2]) }];
  });
}

describe('executable docs: the marked HTTP examples of README.md and docs/api.md answer what they claim', function () {
  this.timeout(120_000);
  let svc: TestService;
  let tenant: TestTenant;
  let runId: string;
  const actionIds: string[] = [];
  const campaigns: Record<'cpa' | 'roas', string> = { cpa: '', roas: '' };

  before(async () => {
    svc = await startTestService('execdocs');
    tenant = await svc.tenant('docs');
    const created = await svc.request('POST', '/api/v1/runs', { key: tenant.keys.write, body: { brief: DEMO_BRIEF, project_id: tenant.accounts.sandbox } });
    expect(created.status).to.equal(202);
    runId = ((await created.json()) as { id: string }).id;
    let run: any;
    await eventually(async () => {
      run = await (await svc.request('GET', `/api/v1/runs/${runId}`, { key: tenant.keys.write })).json();
      expect(run.status).to.equal('succeeded');
    }, 20_000);
    for (const action of run.result.actions as { id: string; disposition: string }[]) if (action.disposition === 'queued') actionIds.push(action.id);
    const listed = (await (await svc.request('GET', `/api/v1/accounts/${tenant.accounts.sandbox}/campaigns`, { key: tenant.keys.read })).json()) as {
      data: { id: string; bidding_strategy: { target_cpa: number | null; target_roas_pct: number | null } }[];
    };
    campaigns.cpa = listed.data.find((c) => c.bidding_strategy.target_cpa !== null)!.id;
    campaigns.roas = listed.data.find((c) => c.bidding_strategy.target_roas_pct !== null)!.id;
  });
  after(async () => svc?.stop());

  /**
   * The variables an example may use. `$ACTION_ID` is a different queued action of `$RUN_ID`
   * for each example, so an approve example and a reject example do not meet the same action.
   */
  const variablesFor = (command: string): Record<string, string> => {
    const actionId = command.includes('$ACTION_ID') ? actionIds.shift() : '';
    if (actionId === undefined) throw new Error('the docs use $ACTION_ID more often than the run proposed actions');
    return {
      __BASE_URL: svc.baseUrl,
      API_KEY: tenant.keys.write,
      READ_KEY: tenant.keys.read,
      ADMIN_KEY: tenant.keys.admin,
      PROJECT_ID: tenant.accounts.sandbox,
      RUN_ID: runId,
      ACTION_ID: actionId,
      CPA_CAMPAIGN_ID: campaigns.cpa,
      ROAS_CAMPAIGN_ID: campaigns.roas,
    };
  };

  /** A run an example started is left to finish, so the next example finds the account free (one run per account). */
  const untilNoRunInProgress = async (body: string | null) => {
    const id = body ? (JSON.parse(body) as { id?: string }).id : undefined;
    if (!id) return;
    for (;;) {
      const run = (await (await svc.request('GET', `/api/v1/runs/${id}`, { key: tenant.keys.write })).json()) as { status: string };
      if (run.status !== 'queued' && run.status !== 'running') return;
      await sleep(100);
    }
  };

  it('README.md has runnable examples for every endpoint a client uses', () => {
    const paths = examplesOf('README.md').map((e) => e.command);
    for (const path of ['/api/v1/runs ', '/api/v1/runs/$RUN_ID ', '/events', '/approvals', '/approve', '/reject', '/target', '/history', '/kill-switch', '/kill-switch/engage']) {
      expect(paths.some((command) => `${command} `.includes(path)), `no runnable example with ${path.trim()}`).to.equal(true);
    }
  });

  for (const document of DOCUMENTS) {
    it(`every curl example in ${document} is marked, and every runnable one answers its status`, async () => {
      const examples = examplesOf(document);
      const answered = [];
      for (const example of examples) {
        const response = await sendCurl(parseCurl(example.command, variablesFor(example.command)));
        answered.push({ at: `${example.document}:${example.line}`, status: response.status, body: response.body?.slice(0, 300) });
        if (response.status === 202) await untilNoRunInProgress(response.body);
      }
      expect(answered.map(({ at, status }) => ({ at, status }))).to.deep.equal(
        examples.map((e) => ({ at: `${e.document}:${e.line}`, status: e.expectStatus })),
        JSON.stringify(answered, null, 1),
      );
    });
  }
});
