import Router from '@koa/router';
import { v7 as uuidv7 } from 'uuid';
import { WorkspaceNotFoundError } from '../../../commands/errors.ts';
import type { KillSwitch } from '../../../commands/workspace/workspace-decider.ts';
import { authenticate, principalOf } from '../../auth/authenticate.ts';
import { requireScope } from '../../auth/scopes.ts';
import { bodyValidator } from '../request-validation.ts';
import type { ApiContext } from './api-context.ts';
import { readOptionalJsonBody } from './optional-json-body.ts';

function representation(workspaceId: string, killSwitch: KillSwitch) {
  return { object: 'kill_switch', workspace_id: workspaceId, engaged: killSwitch.engaged, reason: killSwitch.reason, since: killSwitch.since };
}

/**
 * The workspace kill switch (admin scope). Engaged, nothing is auto-applied, and the apply
 * worker sends auto-applied actions that are not live yet back to the queue.
 */
export function killSwitchRouter(api: ApiContext): Router {
  const router = new Router();
  const auth = authenticate(api.keys);
  const validate = bodyValidator<{ reason?: string }>({
    type: 'object',
    additionalProperties: false,
    properties: { reason: { type: 'string', maxLength: 2000 } },
  });

  router.get('/api/v1/workspace/kill-switch', auth, async (ctx) => {
    const principal = principalOf(ctx);
    const workspace = await api.writeModel.workspaces.load(api.writeModel.workspaceSubject(principal.workspaceId));
    if (!workspace.state.exists) throw new WorkspaceNotFoundError(principal.workspaceId);
    ctx.body = representation(principal.workspaceId, workspace.state.killSwitch);
  });

  for (const [verb, engaged] of [['engage', true], ['release', false]] as const) {
    router.post(`/api/v1/workspace/kill-switch/${verb}`, auth, async (ctx) => {
      const principal = principalOf(ctx);
      requireScope(principal, 'admin');
      const body = validate(await readOptionalJsonBody(ctx, api.config.bodyLimitBytes));
      const result = await api.writeModel.setKillSwitch({
        workspaceId: principal.workspaceId,
        engaged,
        reason: body.reason ?? '',
        meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: uuidv7() },
      });
      ctx.body = representation(principal.workspaceId, result.state.killSwitch);
    });
  }
  return router;
}
