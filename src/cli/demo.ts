import type { Config } from '../config/config.ts';
import type { PlatformKind } from '../events/catalogue/index.ts';
import { createAccount, createWorkspace, issueKey } from '../operator/operator-commands.ts';
import type { Infrastructure } from '../runtime/infrastructure.ts';

export interface DemoWorkspace {
  readonly workspace_id: string;
  readonly accounts: { readonly id: string; readonly name: string; readonly platform: PlatformKind }[];
  readonly write_key: string;
  readonly read_key: string;
  readonly admin_key: string;
  readonly curl: Record<string, string>;
}

/** A demo workspace: two sandbox accounts, one not connected, and keys of each scope. */
export async function createDemo(infra: Infrastructure, config: Config): Promise<DemoWorkspace> {
  const workspaceId = (await createWorkspace(infra, 'Demo workspace')).value.id;
  const specs = [
    { name: 'Acme Outdoor (sandbox)', platform: 'sandbox' },
    { name: 'Bloom Florists (sandbox)', platform: 'sandbox' },
    { name: 'Not connected yet', platform: 'none' },
  ] as const;
  const accounts = [];
  for (const spec of specs) {
    accounts.push({ id: (await createAccount(infra, workspaceId, spec.name, spec.platform)).value.id, ...spec });
  }
  const write = (await issueKey(infra, workspaceId, 'write', 'demo write')).value.key;
  const read = (await issueKey(infra, workspaceId, 'read', 'demo read')).value.key;
  const admin = (await issueKey(infra, workspaceId, 'admin', 'demo admin')).value.key;
  const base = config.publicBaseUrl;
  const account = accounts[0]!.id;
  const auth = (key: string) => `-H "Authorization: Bearer ${key}"`;
  const json = `-H "Content-Type: application/json"`;
  const curl: Record<string, string> = {
    list_accounts: `curl -s ${auth(read)} ${base}/api/v1/accounts`,
    create_run: `curl -s -X POST ${auth(write)} ${json} -H "Idempotency-Key: demo-1" -d '{"brief":"Find wasted spend in search terms and propose negative keywords","project_id":"${account}"}' ${base}/api/v1/runs`,
    create_read_run: `curl -s -X POST ${auth(read)} ${json} -d '{"brief":"How did my campaigns do in the last 30 days?","project_id":"${accounts[1]!.id}"}' ${base}/api/v1/runs`,
    poll_run: `curl -si ${auth(write)} ${base}/api/v1/runs/RUN_ID`,
    cancel_run: `curl -s -X DELETE ${auth(write)} ${base}/api/v1/runs/RUN_ID`,
    list_campaigns: `curl -s ${auth(read)} ${base}/api/v1/accounts/${account}/campaigns`,
    openapi: `curl -s ${base}/api/v1/openapi.json`,
  };
  return { workspace_id: workspaceId, accounts, write_key: write, read_key: read, admin_key: admin, curl };
}

export function describeDemo(demo: DemoWorkspace): string {
  const lines = [
    `workspace   ${demo.workspace_id}`,
    ...demo.accounts.map((a) => `account     ${a.id}  ${a.name}`),
    `write key   ${demo.write_key}`,
    `read key    ${demo.read_key}`,
    `admin key   ${demo.admin_key}`,
    '',
    'Try it (keys are shown once; keep them):',
    ...Object.entries(demo.curl).map(([name, command]) => `\n# ${name.replaceAll('_', ' ')}\n${command}`),
  ];
  return lines.join('\n');
}
