import { HEALTH_ROUTES } from '../health-routes.ts';
import type { RouteDefinition } from '../route-table/route-definition.ts';
import { ACCOUNT_ROUTES } from './accounts-routes.ts';
import { APPROVAL_ROUTES } from './approvals-routes.ts';
import { CAMPAIGN_TARGET_ROUTES } from './campaign-target-routes.ts';
import { CAMPAIGN_ROUTES } from './campaigns-routes.ts';
import { EVENT_SIGNING_KEY_ROUTES } from './event-signing-keys-routes.ts';
import { HISTORY_ROUTES } from './history-routes.ts';
import { KILL_SWITCH_ROUTES } from './kill-switch-routes.ts';
import { METRICS_ROUTES } from './metrics-routes.ts';
import { RUN_EVENT_ROUTES } from './run-events-routes.ts';
import { RUN_ROUTES } from './runs-routes.ts';

/**
 * Every route of the service but the OpenAPI document's own (src/http/openapi/openapi-document.ts
 * adds it): the one list the document is generated from and the tests derive theirs from.
 */
export const ROUTE_TABLE: readonly RouteDefinition<any>[] = [
  ...RUN_ROUTES,
  ...RUN_EVENT_ROUTES,
  ...ACCOUNT_ROUTES,
  ...CAMPAIGN_ROUTES,
  ...CAMPAIGN_TARGET_ROUTES,
  ...APPROVAL_ROUTES,
  ...HISTORY_ROUTES,
  ...KILL_SWITCH_ROUTES,
  ...HEALTH_ROUTES,
  ...METRICS_ROUTES,
  ...EVENT_SIGNING_KEY_ROUTES,
];
