import type { Router } from '@koa/router';
import type { Config } from '../../config/config.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { OPENAPI_PATH, openApiDocumentRoute } from './openapi-document.ts';

export { OPENAPI_PATH };

/** `GET /api/v1/openapi.json`, without authentication: the API's description with `servers` set to PUBLIC_BASE_URL. */
export function openApiRouter(config: Pick<Config, 'publicBaseUrl' | 'briefMaxLength' | 'bodyLimitBytes'>): Router {
  return mountRoutes([openApiDocumentRoute], config, {});
}
