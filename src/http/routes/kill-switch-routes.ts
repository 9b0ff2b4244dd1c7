import type { Router } from '@koa/router';
import { v7 as uuidv7 } from 'uuid';
import { WorkspaceNotFoundError } from '../../../commands/errors.ts';
import { workspaceDecider, type KillSwitch } from '../../../commands/workspace/workspace-decider.ts';
import { loadWorkspace } from '../../../commands/queries.ts';
import { json, ref, requestIdHeader, TEXT_MAX_LENGTH } from '../openapi/openapi-helpers.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { defineRoute, type RequestBody, type RouteDefinition } from '../route-table/route-definition.ts';
import type { ApiContext } from './api-context.ts';

function representation(workspaceId: string, killSwitch: KillSwitch) {
  return { object: 'kill_switch', workspace_id: workspaceId, engaged: killSwitch.engaged, reason: killSwitch.reason, since: killSwitch.since };
}

const route = defineRoute<ApiContext>();

export const getKillSwitchRoute = route({
  method: 'get',
  path: '/api/v1/workspace/kill-switch',
  operationId: 'getKillSwitch',
  tags: ['workspace'],
  summary: 'Read the workspace kill switch',
  description: 'Any scope may read it: it explains why actions are queued instead of auto-applied.',
  access: 'read',
  backedBy: ['event-log'],
  responses: {
    '200': { description: 'The kill switch of the key’s workspace.', headers: requestIdHeader, content: json(ref('KillSwitch')) },
  },
  handler: (api) => async (ctx, { principal }) => {
    const workspace = await loadWorkspace(api.aggregates, principal.workspaceId);
    if (!workspace.state.exists) throw new WorkspaceNotFoundError(principal.workspaceId);
    ctx.body = representation(principal.workspaceId, workspace.state.killSwitch);
  },
});

const killSwitchBody: RequestBody = {
  component: 'KillSwitchRequest',
  required: false,
  description: 'Optional; no body means `{}`.',
  schema: { type: 'object', additionalProperties: false, properties: { reason: { type: 'string', maxLength: TEXT_MAX_LENGTH } } },
};

const TEXT = {
  engage: {
    operationId: 'engageKillSwitch',
    summary: 'Engage the workspace kill switch',
    description:
      'Engaged, no new action is auto-applied (they are queued, with the reason) and the apply worker sends auto-applied actions ' +
      'that are not live yet back to the queue; actions a person approved are still applied. Engaging an engaged switch changes nothing.',
    done: 'engaged',
  },
  release: {
    operationId: 'releaseKillSwitch',
    summary: 'Release the workspace kill switch',
    description: 'Auto-apply works again for new proposals. Releasing a released switch changes nothing.',
    done: 'released',
  },
} as const;

const [engageKillSwitchRoute, releaseKillSwitchRoute] = ([['engage', true], ['release', false]] as const).map(([verb, engaged]) =>
  route<Record<string, never>, { reason?: string }>({
    method: 'post',
    path: `/api/v1/workspace/kill-switch/${verb}`,
    operationId: TEXT[verb].operationId,
    tags: ['workspace'],
    summary: TEXT[verb].summary,
    description: TEXT[verb].description,
    access: 'admin',
    backedBy: ['event-log'],
    body: killSwitchBody,
    responses: {
      '200': {
        description: `The kill switch, ${TEXT[verb].done}.`,
        headers: requestIdHeader,
        content: json({ allOf: [ref('KillSwitch'), { type: 'object', properties: { engaged: { const: engaged } } }] }),
      },
    },
    handler: (api) => async (ctx, request) => {
      const { principal } = request;
      const body = await request.body();
      const result = await api.commands.handle(workspaceDecider, {
        type: 'SetKillSwitch',
        workspaceId: principal.workspaceId,
        engaged,
        reason: body.reason ?? '',
        meta: { actor: { kind: 'api_key', id: principal.keyId }, correlationId: uuidv7() },
      });
      ctx.body = representation(principal.workspaceId, result.state.killSwitch);
    },
  }),
);

export const KILL_SWITCH_ROUTES: readonly RouteDefinition<ApiContext>[] = [getKillSwitchRoute, engageKillSwitchRoute!, releaseKillSwitchRoute!];

/**
 * The workspace kill switch (admin scope). Engaged, nothing is auto-applied, and the apply
 * worker sends auto-applied actions that are not live yet back to the queue.
 */
export function killSwitchRouter(api: ApiContext): Router {
  return mountRoutes(KILL_SWITCH_ROUTES, api, { limits: api.config, keys: api.keys });
}
