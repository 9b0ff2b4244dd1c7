import type { Router } from '@koa/router';
import { json, ref, requestIdHeader, responseRef } from '../openapi/openapi-helpers.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { defineRoute, type RouteDefinition } from '../route-table/route-definition.ts';
import { accountOf, connectedAccount } from './account-access.ts';
import type { ApiContext } from './api-context.ts';
import { PROJECT_ID } from './path-parameters.ts';

export const listCampaignsRoute = defineRoute<ApiContext>()({
  method: 'get',
  path: '/api/v1/accounts/{projectId}/campaigns',
  operationId: 'listCampaigns',
  tags: ['campaigns'],
  summary: 'List the campaigns of an account',
  description:
    'Read from the account’s advertising platform: status, daily budget and bidding strategy (type, target CPA, target ROAS ' +
    'percent, portfolio). Money is in account currency units.',
  access: 'read',
  backedBy: ['event-log', 'platform'],
  pathParameters: { projectId: PROJECT_ID },
  responses: {
    '200': { description: 'The campaigns, by name.', headers: requestIdHeader, content: json(ref('CampaignList')) },
    '404': responseRef('AccountNotFound'),
    '409': responseRef('AccountNotConnected'),
    '502': responseRef('PlatformRefused'),
    '503': responseRef('PlatformUnavailable'),
  },
  handler: (api) => async (ctx, { principal, params }) => {
    const accountId = params.projectId!;
    const account = connectedAccount(accountId, await accountOf(api, principal, accountId));
    const campaigns = await api.platform.listCampaigns(account);
    ctx.body = { object: 'list', data: campaigns.map((c) => ({ object: 'campaign', ...c })) };
  },
});

export const CAMPAIGN_ROUTES: readonly RouteDefinition<ApiContext>[] = [listCampaignsRoute];

/** GET /api/v1/accounts/{projectId}/campaigns: the account's campaigns, read from its platform. */
export function campaignsRouter(api: ApiContext): Router {
  return mountRoutes(CAMPAIGN_ROUTES, api, { limits: api.config, keys: api.keys });
}
