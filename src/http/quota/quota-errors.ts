import { ProblemError } from '../../errors/problem-error.ts';

export const WORKSPACE_QUOTAS = ['runs_per_hour', 'model_tokens_per_day'] as const;
export type WorkspaceQuota = (typeof WORKSPACE_QUOTAS)[number];

const DESCRIPTIONS: Readonly<Record<WorkspaceQuota, string>> = {
  runs_per_hour: 'runs started in the last hour',
  model_tokens_per_day: 'model tokens used today (UTC)',
};

export class QuotaExceededError extends ProblemError {
  constructor(quota: WorkspaceQuota, limit: number, used: number, resetsAt: Date, now: Date) {
    const retryAfterSeconds = Math.max(1, Math.ceil((resetsAt.getTime() - now.getTime()) / 1000));
    super({
      type: 'quota-exceeded',
      status: 429,
      title: 'Workspace quota exceeded',
      detail: `The workspace has used ${used} of its ${limit} ${DESCRIPTIONS[quota]}; new runs are accepted again at ${resetsAt.toISOString()}.`,
      extensions: { quota, limit, used, resets_at: resetsAt.toISOString() },
      headers: { 'Retry-After': String(retryAfterSeconds) },
    });
  }
}
