import Router from '@koa/router';
import { listAccounts } from '../../../projections/identity/account-view.ts';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import type { ApiContext } from './api-context.ts';

/** GET /api/v1/accounts: the accounts (projectIds) of the key's workspace. */
export function accountsRouter(api: ApiContext): Router {
  const router = new Router();
  router.get('/api/v1/accounts', authenticate(api.keys), async (ctx) => {
    const principal = principalOf(ctx);
    ctx.body = { object: 'list', data: await listAccounts(api.db, principal.workspaceId) };
  });
  return router;
}
