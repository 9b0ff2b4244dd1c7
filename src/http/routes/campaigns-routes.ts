import Router from '@koa/router';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import { accountOf, connectedAccount } from './account-access.ts';
import type { ApiContext } from './api-context.ts';

/** GET /api/v1/accounts/{projectId}/campaigns: the account's campaigns, read from its platform. */
export function campaignsRouter(api: ApiContext): Router {
  const router = new Router();
  router.get('/api/v1/accounts/:projectId/campaigns', authenticate(api.keys), async (ctx) => {
    const principal = principalOf(ctx);
    const accountId = ctx.params.projectId!;
    const account = connectedAccount(accountId, await accountOf(api, principal, accountId));
    const campaigns = await api.platform.listCampaigns(account);
    ctx.body = { object: 'list', data: campaigns.map((c) => ({ object: 'campaign', ...c })) };
  });
  return router;
}
