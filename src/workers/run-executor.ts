import type { Commands } from '../../commands/command-bus.ts';
import type { AccountState, ActiveRun } from '../../commands/account/account-state.ts';
import type { RunOutcome } from '../../commands/account/run-lifecycle.ts';
import { AgentCrashed, runAgent, type AgentStep, type AgentUsage } from '../agent/agent-loop.ts';
import type { ModelClient } from '../agent/model/model-port.ts';
import { ToolRegistry } from '../agent/tools/tool-registry.ts';
import type { RunErrorCode } from '../events/catalogue/index.ts';
import type { Actor } from '../events/envelope.ts';
import type { Logger } from '../log/logger.ts';
import type { AdsPlatform } from '../platform/ads-platform.ts';
import type { ProposalService } from '../policy/proposal-service.ts';
import { withPlatformDeadline } from '../platform/platform-deadline.ts';
import { transcriptDecider } from '../../commands/run/transcript.ts';
import { loadKey, loadAccount } from '../../commands/queries.ts';
import type { ChangeTracker } from '../event-store/subject-changes.ts';
import type { Aggregates } from '../../commands/shared/aggregates.ts';
import { streams } from '../event-store/subjects.ts';
import { behindLeader, MAX_STALE_RELOADS, STALE_RELOAD_DELAY_MS } from '../../commands/shared/handle.ts';
import type { KeyState } from '../../commands/key/key-decider.ts';
import { platformAccountOf } from '../../commands/account/platform-account.ts';

export interface RunExecutorDependencies {
  readonly commands: Commands;
  readonly platform: AdsPlatform;
  readonly proposals: ProposalService;
  readonly model: ModelClient;
  readonly wallClockMs: number;
  readonly modelBudgetMs: number;
  readonly now?: () => Date;
  /** Where the details of an internal failure go; the run's own message never carries them. */
  readonly logger?: Logger;
  /** Told how long each step of a run took (`agent_step_duration_seconds`). */
  readonly observeStep?: (step: AgentStep, seconds: number) => void;
}

/** The subjects a run's check before each tool call reads: its key's and its account's. */
export interface RunSubjects {
  readonly key: string;
  readonly account: string;
}

export function runSubjects(aggregates: Aggregates, workspaceId: string, accountId: string, keyId: string): RunSubjects {
  return {
    key: aggregates.subjects.forAggregate(streams.key(workspaceId, keyId)),
    account: aggregates.subjects.forAggregate(streams.account(workspaceId, accountId)),
  };
}

const ZERO_USAGE = { input_tokens: 0, output_tokens: 0, steps: 0 };

/**
 * Executes one claimed run and returns how it ended. The pre-flight checks come before
 * any model call: a key revoked since queueing gives key_revoked, an account without a
 * platform account_not_connected. Anything unexpected ends as internal, never as a
 * hanging run; actions proposed before a failure stay recorded and queued.
 *
 * `keyAndAccount` says whether anything was stored on the run's key or account since the caller
 * last looked, which must be before it claimed the run (the account state the run starts from)
 * and before this reads the key: the check before a tool call then reads only after a change.
 * Absent, every check reads both.
 *
 * `stopping` fires when the worker gives the run up (a shutdown past its grace): from then on
 * none of its tools still working may propose.
 */
export async function executeRun(
  deps: RunExecutorDependencies,
  run: { workspaceId: string; accountId: string; account: AccountState; active: ActiveRun; keyAndAccount?: ChangeTracker; stopping?: AbortSignal },
  actor: Actor,
): Promise<RunOutcome> {
  const subjects = runSubjects(deps.commands.aggregates, run.workspaceId, run.accountId, run.active.keyId);
  const keyAndAccount = run.keyAndAccount;
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const failed = (code: RunErrorCode, message: string, usage: AgentUsage = ZERO_USAGE): RunOutcome => ({
    kind: 'failed',
    code,
    message,
    text: '',
    truncated: false,
    usage,
    durationMs: elapsed(),
  });
  const { commands } = deps;
  const { aggregates } = commands;
  const key = await loadKey(aggregates, run.workspaceId, run.active.keyId);
  if (!key.state.exists || key.state.revoked) return failed('key_revoked', `API key ${run.active.keyId} was revoked after the run was queued`);
  const account = platformAccountOf(run.accountId, run.account);
  if (!account) return failed('account_not_connected', `account ${run.accountId} has no connected advertising-platform account`);
  const meta = { actor, correlationId: run.active.runId };
  try {
    // Platform calls (a rate limit waited out) must end within the run's wall clock.
    const outcome = await withPlatformDeadline(Date.now() + deps.wallClockMs, () => runAgent(
      {
        runId: run.active.runId,
        brief: run.active.brief,
        account,
        tools: ToolRegistry.forScope(run.active.scope),
        canPropose: run.active.scope !== 'read',
        wallClockMs: deps.wallClockMs,
        modelBudgetMs: deps.modelBudgetMs,
      },
      {
        model: deps.model,
        platform: deps.platform,
        now: deps.now ?? (() => new Date()),
        ...(deps.observeStep ? { observeStep: deps.observeStep } : {}),
        recordToolCall: async (call) => {
          // This worker is the transcript's only writer while it holds the run, and the transcript
          // begins with the run: no read of it, not even for the first call.
          await commands.handle(
            transcriptDecider,
            { type: 'RecordToolCall', workspaceId: run.workspaceId, accountId: run.accountId, call, meta },
            { preferRemembered: true, presumeNew: true },
          );
        },
        mayContinue: async () => {
          // Nothing stored on the key or the account since the last check, which let the run go on.
          if (keyAndAccount && !keyAndAccount.changedSinceLastLook()) return null;
          // A stop must not rest on a replica behind the stream leader (right after a failover the
          // run's RunStarted may be missing there): confirm it, as handle() confirms a refusal.
          for (let reloads = 0; ; reloads++) {
            const [current, account] = await Promise.all([
              loadKey(aggregates, run.workspaceId, run.active.keyId),
              loadAccount(aggregates, run.workspaceId, run.accountId),
            ]);
            const stop = reasonToStop(current.state, account.state.activeRun, run.active, actor);
            if (stop === null) return null;
            if (reloads >= MAX_STALE_RELOADS) return stop;
            const behind = await Promise.all([
              behindLeader(aggregates, subjects.key, current.lastSequence),
              behindLeader(aggregates, subjects.account, account.lastSequence),
            ]);
            if (!behind.includes(true)) return stop;
            await new Promise((resolve) => setTimeout(resolve, STALE_RELOAD_DELAY_MS));
          }
        },
        propose: (draft, summary, reason, signal, campaign) =>
          deps.proposals.propose({
            workspaceId: run.workspaceId,
            accountId: run.accountId,
            runId: run.active.runId,
            // The run's key as it was claimed, and the signals after which the run is over: a
            // tool that outlives its run (the wall clock does not wait for it) proposes nothing.
            run: { keyId: run.active.keyId, workerId: actor.id, signal: run.stopping ? AbortSignal.any([signal, run.stopping]) : signal },
            draft,
            summary,
            reason,
            autoApply: run.active.autoApply,
            meta,
            ...(campaign ? { campaign } : {}),
          }),
      },
    ));
    return { ...outcome, durationMs: elapsed() };
  } catch (error) {
    // The message is shown to API clients: it says what they can do; the cause goes only to the log.
    const crashed = error instanceof AgentCrashed ? error : null;
    deps.logger?.error({ run_id: run.active.runId, err: crashed ? crashed.cause : error }, 'run failed on the service side');
    // The tokens the run had spent count toward the workspace's quota all the same.
    return failed('internal', 'the run failed on the service side; start it again, and quote the run id to the operator if it keeps failing', crashed?.usage);
  }
}

/** Why a run must stop before its next tool call, or null while it may go on. */
function reasonToStop(key: KeyState, active: ActiveRun | null, ours: ActiveRun, actor: Actor): { code: 'key_revoked' | 'internal'; message: string } | null {
  if (!key.exists || key.revoked) {
    return { code: 'key_revoked', message: `API key ${ours.keyId} was revoked while the run was running; it stopped before its next tool call` };
  }
  if (active?.runId !== ours.runId || active.status !== 'running' || active.workerId !== actor.id) {
    return { code: 'internal', message: 'the run is no longer this worker’s (it ended or was taken over); it stopped before its next tool call' };
  }
  return null;
}
