import type { EventEnvelope } from '../envelope.ts';
import { bool, enumOf, int, nullable, object, str, type EventDefinition } from './schema-helpers.ts';

export const KEY_SCOPES = ['read', 'write', 'admin'] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];

export const PLATFORM_KINDS = ['sandbox', 'google-ads', 'none'] as const;
export type PlatformKind = (typeof PLATFORM_KINDS)[number];

export interface WorkspaceCreatedData {
  readonly name: string;
}
export interface ApiKeyIssuedData {
  readonly name: string;
  readonly scope: KeyScope;
  /** SHA-256 hex of the key's secret part; the key itself is never stored. */
  readonly secret_hash: string;
}
export type ApiKeyRevokedData = Record<string, never>;
export interface DistinctApproverRequirementSetData {
  /** On: the key that proposed an action (or started its run) cannot approve it. */
  readonly required: boolean;
}
export interface RunStartsPausedData {
  /** When agent workers may start the workspace's queued runs again (ISO 8601, UTC). */
  readonly until: string;
  readonly reason: string;
}
export interface RunStartsResumedData {
  readonly reason: string;
}
export interface AccountCreatedData {
  readonly name: string;
  readonly platform: PlatformKind;
  /** Seed of the generated sandbox account; null when not connected. */
  readonly sandbox_seed: number | null;
  /** Set for platform google-ads: which customer, and the manager it is reached through. Never a secret. */
  readonly google_ads?: GoogleAdsAccountLink;
}
export interface GoogleAdsAccountLink {
  /** Ten digits, no dashes. */
  readonly customer_id: string;
  /** Manager account sent as the login-customer-id header; null when the customer is reached directly. */
  readonly login_customer_id: string | null;
}

export type WorkspaceCreated = EventEnvelope<'WorkspaceCreated', WorkspaceCreatedData>;
export type ApiKeyIssued = EventEnvelope<'ApiKeyIssued', ApiKeyIssuedData>;
export type ApiKeyRevoked = EventEnvelope<'ApiKeyRevoked', ApiKeyRevokedData>;
export type AccountCreated = EventEnvelope<'AccountCreated', AccountCreatedData>;
export type DistinctApproverRequirementSet = EventEnvelope<'DistinctApproverRequirementSet', DistinctApproverRequirementSetData>;
export type RunStartsPaused = EventEnvelope<'RunStartsPaused', RunStartsPausedData>;
export type RunStartsResumed = EventEnvelope<'RunStartsResumed', RunStartsResumedData>;

export type IdentityEvent = WorkspaceCreated | ApiKeyIssued | ApiKeyRevoked | AccountCreated | DistinctApproverRequirementSet | RunStartsPaused | RunStartsResumed;

export const IDENTITY_EVENT_DEFINITIONS: readonly EventDefinition[] = [
  {
    type: 'WorkspaceCreated',
    version: 1,
    aggregate: 'workspace',
    description: 'A workspace was created; it owns accounts and API keys.',
    data: object({ name: str({ minLength: 1, maxLength: 200 }) }),
  },
  {
    type: 'DistinctApproverRequirementSet',
    version: 1,
    aggregate: 'workspace',
    description:
      "An operator turned the workspace's distinct-approver rule on or off. While on, the API key that proposed an action (or started the run that proposed it) cannot approve it.",
    data: object({ required: bool() }),
  },
  {
    type: 'RunStartsPaused',
    version: 1,
    aggregate: 'workspace',
    description:
      "An operator paused the start of the workspace's runs until a time: runs are still accepted and queued (and can be canceled), but no agent worker starts one before `until`. Runs already running go on.",
    data: object({ until: str({ format: 'date-time' }), reason: str({ maxLength: 500 }) }),
  },
  {
    type: 'RunStartsResumed',
    version: 1,
    aggregate: 'workspace',
    description: "An operator ended a pause of the workspace's run starts before its time; queued runs start again.",
    data: object({ reason: str({ maxLength: 500 }) }),
  },
  {
    type: 'ApiKeyIssued',
    version: 1,
    aggregate: 'key',
    description: 'An API key was issued. Only the SHA-256 of its secret is recorded.',
    data: object({
      name: str({ maxLength: 200 }),
      scope: enumOf(['read', 'write', 'admin']),
      secret_hash: str({ pattern: '^[0-9a-f]{64}$' }),
    }),
  },
  {
    type: 'ApiKeyRevoked',
    version: 1,
    aggregate: 'key',
    description: 'An API key was revoked; it stops working at once and its queued runs fail with key_revoked.',
    data: object({}),
  },
  {
    type: 'AccountCreated',
    version: 1,
    aggregate: 'account',
    description: 'An advertising account (the API\'s projectId) was added to a workspace.',
    data: object({
      name: str({ minLength: 1, maxLength: 200 }),
      platform: enumOf(PLATFORM_KINDS),
      sandbox_seed: { anyOf: [int(0), { type: 'null' }] },
      // Optional so AccountCreated events written before Google Ads existed stay valid.
      google_ads: object({
        customer_id: str({ pattern: '^[0-9]{10}$' }),
        login_customer_id: nullable(str({ pattern: '^[0-9]{10}$' })),
      }),
    }, ['google_ads']),
  },
];

