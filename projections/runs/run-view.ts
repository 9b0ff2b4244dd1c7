import type { Kysely, Selectable } from 'kysely';
import type { Database } from '../../src/db/schema.ts';
import { TERMINAL_RUN_STATUSES, type RunStatus, type RunsTable } from './runs-tables.ts';

export type RunRow = Selectable<RunsTable>;

/** What the read model knows of an action a run proposed (the HTTP edge turns it into the Action representation). */
export interface RunActionFacts {
  readonly id: string;
  readonly account_id: string;
  readonly kind: string;
  readonly summary: string;
  readonly risk_tier: string;
  readonly disposition: string;
  readonly policy_reasons: readonly string[];
}

/** The Run resource of the specification, as GET /api/v1/runs/{runId} returns it; `A` is the action representation. */
export interface RunRepresentation<A = RunActionFacts> {
  readonly id: string;
  readonly object: 'run';
  readonly status: RunStatus;
  readonly project_id: string;
  readonly auto_apply: boolean;
  readonly scope: string;
  readonly created_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
  readonly poll_url: string;
  /** Null until the run has finished. */
  readonly duration_ms: number | null;
  readonly agent: { kind: string; model: string } | null;
  readonly result: {
    readonly text: string;
    readonly truncated: boolean;
    readonly actions: readonly A[];
    readonly tool_calls: readonly { name: string; input: Record<string, unknown>; ok: boolean }[];
    readonly usage: { input_tokens: number; output_tokens: number; steps: number };
  };
  readonly error: { code: string; message: string } | null;
}

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL_RUN_STATUSES.includes(status);
}

export function runUrl(publicBaseUrl: string, runId: string): string {
  return `${publicBaseUrl}/api/v1/runs/${runId}`;
}

/** A run of one workspace; another workspace's run is indistinguishable from none. */
export async function findRun(db: Kysely<Database>, workspaceId: string, runId: string): Promise<RunRow | undefined> {
  return db.selectFrom('runs').selectAll().where('id', '=', runId).where('workspace_id', '=', workspaceId).executeTakeFirst();
}

/** The run's actions in the order they were proposed. */
export async function findRunActions(db: Kysely<Database>, runId: string): Promise<RunActionFacts[]> {
  const rows = await db.selectFrom('run_actions').selectAll().where('run_id', '=', runId).orderBy('seq').execute();
  return rows.map((row) => ({
    id: row.id,
    account_id: row.account_id,
    kind: row.kind,
    summary: row.summary,
    risk_tier: row.risk_tier,
    disposition: row.disposition,
    policy_reasons: row.policy_reasons,
  }));
}

export function toRunRepresentation<A>(row: RunRow, publicBaseUrl: string, actions: readonly A[] = []): RunRepresentation<A> {
  return {
    id: row.id,
    object: 'run',
    status: row.status,
    project_id: row.account_id,
    auto_apply: row.auto_apply,
    scope: row.scope,
    created_at: row.created_at.toISOString(),
    started_at: row.started_at?.toISOString() ?? null,
    finished_at: row.finished_at?.toISOString() ?? null,
    poll_url: runUrl(publicBaseUrl, row.id),
    duration_ms: row.duration_ms,
    agent: row.agent,
    result: {
      text: row.result_text,
      truncated: row.truncated,
      actions,
      tool_calls: row.tool_calls,
      usage: row.usage,
    },
    error: row.error,
  };
}
