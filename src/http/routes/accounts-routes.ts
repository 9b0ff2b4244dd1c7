import type { Router } from '@koa/router';
import { listAccounts } from '../../../projections/identity/account-view.ts';
import { json, ref, requestIdHeader } from '../openapi/openapi-helpers.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { defineRoute, type RouteDefinition } from '../route-table/route-definition.ts';
import type { ApiContext } from './api-context.ts';

export const listAccountsRoute = defineRoute<ApiContext>()({
  method: 'get',
  path: '/api/v1/accounts',
  operationId: 'listAccounts',
  tags: ['accounts'],
  summary: 'List the accounts of the key’s workspace',
  description: 'The `id` of an account is the `project_id` of POST /api/v1/runs. Only the key’s own workspace is ever listed.',
  access: 'read',
  backedBy: ['database'],
  responses: {
    '200': { description: 'The accounts, oldest first.', headers: requestIdHeader, content: json(ref('AccountList')) },
  },
  handler: (api) => async (ctx, { principal }) => {
    ctx.body = { object: 'list', data: await listAccounts(api.db, principal.workspaceId) };
  },
});

export const ACCOUNT_ROUTES: readonly RouteDefinition<ApiContext>[] = [listAccountsRoute];

/** GET /api/v1/accounts: the accounts (projectIds) of the key's workspace. */
export function accountsRouter(api: ApiContext): Router {
  return mountRoutes(ACCOUNT_ROUTES, api, { limits: api.config, keys: api.keys });
}
