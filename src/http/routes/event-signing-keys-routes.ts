import type { Router } from '@koa/router';
import type { EventSigning } from '../../events/signing/event-signing.ts';
import { json, requestIdHeader } from '../openapi/openapi-helpers.ts';
import { mountRoutes } from '../route-table/mount-routes.ts';
import { defineRoute, type RouteDefinition } from '../route-table/route-definition.ts';

export const EVENT_SIGNING_KEYS_PATH = '/api/v1/event-signing-keys';

type Signing = Pick<EventSigning, 'describeKeys'>;

export const EVENT_SIGNING_KEY_ROUTES: readonly RouteDefinition<Signing>[] = [
  defineRoute<Signing>()({
    method: 'get',
    path: EVENT_SIGNING_KEYS_PATH,
    operationId: 'listEventSigningKeys',
    tags: ['operations'],
    summary: 'Public keys that sign the event log',
    description:
      'The Ed25519 public keys whose signatures readers believe: the current signing key and every retired one still trusted. ' +
      'No authentication: public keys are public, and an auditor verifying the log (docs/events.md, "Signatures") may hold no API key.',
    access: 'public',
    backedBy: ['event-log'],
    responses: {
      '200': {
        description: 'The keys, current first.',
        headers: { ...requestIdHeader, 'Cache-Control': { description: 'Short public caching.', schema: { type: 'string' } } },
        content: json({
          type: 'object',
          additionalProperties: false,
          required: ['object', 'data'],
          properties: {
            object: { const: 'list' },
            data: {
              type: 'array',
              minItems: 1,
              items: {
                type: 'object',
                additionalProperties: false,
                required: ['key_id', 'algorithm', 'status', 'activated_at', 'public_key_pem', 'public_key_jwk'],
                properties: {
                  key_id: { type: 'string', pattern: '^[0-9a-f]{16}$', description: 'First 16 hex characters of SHA-256 over the raw 32-byte public key; the `key_id` of the events it signs.' },
                  algorithm: { const: 'Ed25519' },
                  status: { enum: ['current', 'retired'] },
                  activated_at: { type: ['string', 'null'], format: 'date-time', description: 'When the key first signed on this stream; null when not recorded.' },
                  public_key_pem: { type: 'string', pattern: '^-----BEGIN PUBLIC KEY-----', description: 'SPKI PEM.' },
                  public_key_jwk: {
                    type: 'object',
                    additionalProperties: false,
                    required: ['kty', 'crv', 'x', 'kid', 'use', 'alg'],
                    description: 'RFC 8037 OKP JSON Web Key.',
                    properties: {
                      kty: { const: 'OKP' },
                      crv: { const: 'Ed25519' },
                      x: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' },
                      kid: { type: 'string' },
                      use: { const: 'sig' },
                      alg: { const: 'EdDSA' },
                    },
                  },
                },
              },
            },
          },
        }),
      },
    },
    handler: (signing) => async (ctx) => {
      ctx.set('Cache-Control', 'public, max-age=60');
      ctx.body = { object: 'list', data: await signing.describeKeys() };
    },
  }),
];

/**
 * `GET /api/v1/event-signing-keys`, without authentication: public keys are public, and an
 * auditor checking the log needs them without holding an API key of any workspace.
 */
export function eventSigningKeysRouter(signing: Signing): Router {
  return mountRoutes(EVENT_SIGNING_KEY_ROUTES, signing, {});
}
