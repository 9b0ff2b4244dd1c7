import { AppError, ErrorKind } from '../../errors/app-error.ts';

export const WORKSPACE_QUOTAS = ['runs_per_hour', 'model_tokens_per_day'] as const;
export type WorkspaceQuota = (typeof WORKSPACE_QUOTAS)[number];

const DESCRIPTIONS: Readonly<Record<WorkspaceQuota, string>> = {
  runs_per_hour: 'runs started in the last hour',
  model_tokens_per_day: 'model tokens used today (UTC)',
};

export class QuotaExceededError extends AppError {
  readonly kind = ErrorKind.LimitExceeded;

  constructor(quota: WorkspaceQuota, limit: number, used: number, resetsAt: Date, now: Date) {
    super(
      'quota-exceeded',
      `The workspace has used ${used} of its ${limit} ${DESCRIPTIONS[quota]}; new runs are accepted again at ${resetsAt.toISOString()}.`,
      {
        details: { quota, limit, used, resets_at: resetsAt.toISOString() },
        retryAfterSeconds: Math.max(1, Math.ceil((resetsAt.getTime() - now.getTime()) / 1000)),
      },
    );
  }
}
