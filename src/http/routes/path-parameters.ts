import { ActionNotFoundError } from '../../../commands/action/action-lifecycle.ts';
import { AccountNotFoundError } from '../../../commands/errors.ts';
import { RunNotFoundError } from '../../../projections/runs/run-errors.ts';
import { CampaignNotFoundError } from '../../platform/platform-errors.ts';
import type { PathParameter } from '../route-table/route-definition.ts';
import { ID_TOKEN_PATTERN } from './api-context.ts';

const UUID_PATTERN = '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';

/** The path parameters of the API: a value that cannot name anything answers that thing's 404, like one that does not exist. */
export const RUN_ID: PathParameter = {
  component: 'RunId',
  description: 'The run id. Anything that is not a run of the key’s workspace (including a non-UUID) answers 404.',
  schema: { type: 'string', pattern: UUID_PATTERN },
  notFound: (id) => new RunNotFoundError(id),
};
export const PROJECT_ID: PathParameter = {
  component: 'ProjectId',
  description: 'The account (an `id` from GET /api/v1/accounts). Anything that is not an account of the key’s workspace answers 404.',
  schema: { type: 'string', pattern: ID_TOKEN_PATTERN },
  notFound: (id) => new AccountNotFoundError(id),
};
export const ACTION_ID: PathParameter = {
  component: 'ActionId',
  description: 'An action `id` (from a run’s `result.actions`, the target endpoint or the approvals list); anything else answers 404.',
  schema: { type: 'string', pattern: UUID_PATTERN },
  notFound: (id) => new ActionNotFoundError(id),
};
export const CAMPAIGN_ID: PathParameter = {
  component: 'CampaignId',
  description: 'A campaign `id` from GET /api/v1/accounts/{projectId}/campaigns; anything else (or a removed campaign) answers 404.',
  schema: { type: 'string', pattern: ID_TOKEN_PATTERN },
  notFound: (id) => new CampaignNotFoundError(id),
};
