import { v7 as uuidv7 } from 'uuid';
import { identityProjection } from '../../projections/identity/identity-projection.ts';
import { waitForProjection } from '../../projections/runtime/projector.ts';
import { KeyNotFoundError, WorkspaceNotFoundError } from '../../commands/errors.ts';
import { lastSeqOf } from '../../commands/shared/handle.ts';
import { generateApiKey } from '../auth/api-key.ts';
import type { KeyScope, PlatformKind } from '../events/catalogue/index.ts';
import type { Actor } from '../events/envelope.ts';
import { operatorActor } from './operator-actor.ts';
import type { Infrastructure } from '../runtime/infrastructure.ts';
import { workspaceDecider } from '../../commands/workspace/workspace-decider.ts';
import { keyDecider } from '../../commands/key/key-decider.ts';
import { accountDecider } from '../../commands/account/account-decider.ts';
import { loadWorkspace } from '../../commands/queries.ts';

/**
 * Operator actions (the `adsagent` CLI, the demo, tests). Each appends through the write
 * model and then waits until the identity read model shows it, so a key printed by the
 * CLI works on its next request. `visible` is false when no projector caught up in time
 * (the service is not running): the change is recorded and shows once projectors run.
 */
export interface OperatorResult<T> {
  readonly value: T;
  readonly visible: boolean;
}

const OPERATOR: Actor = operatorActor();
const VISIBILITY_TIMEOUT_MS = 5000;

/**
 * Whether the identity read model shows the aggregate as the command left it. A command that
 * appended nothing (a retry of a revocation that was stored) waits for the aggregate's newest
 * event all the same: the earlier attempt's event may not be projected yet.
 */
async function visible(infra: Infrastructure, result: { appended: readonly { seq: number }[]; position: { lastSequence: number } }): Promise<boolean> {
  const seq = lastSeqOf(result) ?? result.position.lastSequence;
  return seq === 0 || waitForProjection(infra.database.db, identityProjection.name, seq, VISIBILITY_TIMEOUT_MS);
}

/** Accounts and keys belong to a workspace that must exist (read from its aggregate, not a read model). */
async function requireWorkspace(infra: Infrastructure, workspaceId: string): Promise<void> {
  const workspace = await loadWorkspace(infra.aggregates, workspaceId);
  if (!workspace.state.exists) throw new WorkspaceNotFoundError(workspaceId);
}

export async function createWorkspace(infra: Infrastructure, name: string): Promise<OperatorResult<{ id: string }>> {
  const workspaceId = uuidv7();
  const result = await infra.commands.handle(workspaceDecider, { type: 'CreateWorkspace', workspaceId, name, meta: { actor: OPERATOR, correlationId: workspaceId } });
  return { value: { id: workspaceId }, visible: await visible(infra, result) };
}

/** Sandbox accounts get a seed derived from their id, so their generated data is reproducible. */
export function sandboxSeedFor(accountId: string): number {
  let hash = 2166136261;
  for (const char of accountId) hash = Math.imul(hash ^ char.charCodeAt(0), 16777619) >>> 0;
  return hash % 2_147_483_647;
}

export async function createAccount(
  infra: Infrastructure,
  workspaceId: string,
  name: string,
  platform: PlatformKind,
): Promise<OperatorResult<{ id: string }>> {
  await requireWorkspace(infra, workspaceId);
  const accountId = uuidv7();
  const result = await infra.commands.handle(accountDecider, {
    type: 'CreateAccount',
    workspaceId,
    accountId,
    name,
    platform,
    sandboxSeed: platform === 'sandbox' ? sandboxSeedFor(accountId) : null,
    meta: { actor: OPERATOR, correlationId: accountId },
  });
  return { value: { id: accountId }, visible: await visible(infra, result) };
}

export async function issueKey(
  infra: Infrastructure,
  workspaceId: string,
  scope: KeyScope,
  name = '',
): Promise<OperatorResult<{ id: string; key: string; scope: KeyScope }>> {
  await requireWorkspace(infra, workspaceId);
  const generated = generateApiKey();
  const result = await infra.commands.handle(keyDecider, {
    type: 'IssueKey',
    workspaceId,
    keyId: generated.keyId,
    name,
    scope,
    secretHash: generated.secretHash,
    meta: { actor: OPERATOR, correlationId: generated.keyId },
  });
  return { value: { id: generated.keyId, key: generated.key, scope }, visible: await visible(infra, result) };
}

/** Revokes a key; its workspace is looked up in the identity read model to address the key's subject. */
export async function revokeKey(infra: Infrastructure, keyId: string): Promise<OperatorResult<{ id: string }>> {
  const row = await infra.database.db.selectFrom('api_keys').select(['workspace_id']).where('id', '=', keyId).executeTakeFirst();
  if (!row) throw new KeyNotFoundError(keyId);
  const result = await infra.commands.handle(keyDecider, {
    type: 'RevokeKey',
    workspaceId: row.workspace_id,
    keyId,
    meta: { actor: OPERATOR, correlationId: keyId },
  });
  return { value: { id: keyId }, visible: await visible(infra, result) };
}

/** Engages or releases a workspace's kill switch; takes effect for the next decision at once. */
export async function setKillSwitch(
  infra: Infrastructure,
  workspaceId: string,
  engaged: boolean,
  reason: string,
): Promise<OperatorResult<{ workspace_id: string; engaged: boolean }>> {
  const result = await infra.commands.handle(workspaceDecider, { type: 'SetKillSwitch', workspaceId, engaged, reason, meta: { actor: OPERATOR, correlationId: workspaceId } });
  return { value: { workspace_id: workspaceId, engaged: result.state.killSwitch.engaged }, visible: true };
}

/** Turns the workspace's distinct-approver rule on or off; the next approval is decided under it. */
/**
 * Pauses the start of a workspace's queued runs for `seconds` (runs are still accepted and can
 * be canceled; running ones go on), or resumes them when `seconds` is null.
 */
export async function pauseRunStarts(
  infra: Infrastructure,
  workspaceId: string,
  seconds: number | null,
  reason: string,
): Promise<OperatorResult<{ workspace_id: string; run_starts_paused_until: string | null }>> {
  const meta = { actor: OPERATOR, correlationId: workspaceId };
  const now = new Date();
  const result =
    seconds === null
      ? await infra.commands.handle(workspaceDecider, { type: 'ResumeRunStarts', workspaceId, reason, meta })
      : await infra.commands.handle(workspaceDecider, {
          type: 'PauseRunStarts',
          workspaceId,
          until: new Date(now.getTime() + seconds * 1000).toISOString(),
          reason,
          now: now.toISOString(),
          meta,
        });
  return { value: { workspace_id: workspaceId, run_starts_paused_until: result.state.runStartsPausedUntil }, visible: true };
}

export async function setDistinctApprover(
  infra: Infrastructure,
  workspaceId: string,
  required: boolean,
): Promise<OperatorResult<{ workspace_id: string; require_distinct_approver: boolean }>> {
  const result = await infra.commands.handle(workspaceDecider, { type: 'SetDistinctApprover', workspaceId, required, meta: { actor: OPERATOR, correlationId: workspaceId } });
  return { value: { workspace_id: workspaceId, require_distinct_approver: result.state.requireDistinctApprover }, visible: true };
}
