import Router from '@koa/router';
import type { Config } from '../../config/config.ts';
import { openApiDocumentFor } from './openapi-document.ts';

export const OPENAPI_PATH = '/api/v1/openapi.json';

/** `GET /api/v1/openapi.json`, without authentication: the API's description with `servers` set to PUBLIC_BASE_URL. */
export function openApiRouter(config: Pick<Config, 'publicBaseUrl' | 'briefMaxLength' | 'bodyLimitBytes'>): Router {
  const router = new Router();
  const body = JSON.stringify(
    openApiDocumentFor({ publicBaseUrl: config.publicBaseUrl, briefMaxLength: config.briefMaxLength, bodyLimitBytes: config.bodyLimitBytes }),
  );
  router.get(OPENAPI_PATH, (ctx) => {
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.type = 'application/json';
    ctx.body = body;
  });
  return router;
}
