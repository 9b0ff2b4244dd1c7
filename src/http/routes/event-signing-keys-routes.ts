import Router from '@koa/router';
import type { EventSigning } from '../../events/signing/event-signing.ts';

export const EVENT_SIGNING_KEYS_PATH = '/api/v1/event-signing-keys';

/**
 * `GET /api/v1/event-signing-keys`, without authentication: public keys are public, and an
 * auditor checking the log needs them without holding an API key of any workspace.
 */
export function eventSigningKeysRouter(signing: Pick<EventSigning, 'describeKeys'>): Router {
  const router = new Router();
  router.get(EVENT_SIGNING_KEYS_PATH, async (ctx) => {
    ctx.set('Cache-Control', 'public, max-age=60');
    ctx.body = { object: 'list', data: await signing.describeKeys() };
  });
  return router;
}
