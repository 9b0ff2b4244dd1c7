/**
 * The public event contract beyond what the catalogue itself holds: the envelope as a JSON
 * Schema with field descriptions, the NATS headers, and the subject of each aggregate type.
 * Both generated documents (docs/events.md, docs/asyncapi.yaml) are built from this module
 * and from EVENT_DEFINITIONS, so they cannot disagree with each other.
 *
 * Sources it mirrors (keep in step; test/docs/ checks it against real stored events):
 * src/events/envelope.ts, src/events/event-validator.ts (ENVELOPE_SCHEMA),
 * src/event-store/event-store.ts (headers), src/event-store/subjects.ts (including `streams`:
 * which account token and aggregate id each aggregate uses).
 */
import type { SchemaObject } from 'ajv';
import type { ActionKind, EventDefinition } from '../../src/events/catalogue/index.ts';
import { ACTOR_KINDS, AGGREGATE_TYPES, GENESIS_HASH, type AggregateType } from '../../src/events/envelope.ts';
import { EVENT_TYPE_HEADER, EVENT_VERSION_HEADER } from '../../src/event-store/event-store.ts';
import { NO_ACCOUNT_TOKEN, SUBJECT_VERSION } from '../../src/event-store/subjects.ts';
import { MATCH_TYPES } from '../../src/platform/ads-platform.ts';
import type { ActionDraftOf } from '../../src/policy/action-draft.ts';

export { AGGREGATE_TYPES, GENESIS_HASH, NO_ACCOUNT_TOKEN, SUBJECT_VERSION };
export type { AggregateType };

export const DEFAULT_STREAM = 'ADS_EVENTS';
export const DEFAULT_PREFIX = 'ads';

const HASH = { type: 'string', pattern: '^[0-9a-f]{64}$' } as const;

/**
 * JSON Schema of an envelope as stored (prev_hash and hash included). With a definition,
 * `type`, `version` and `aggregate.type` are fixed and `data` is that event's schema.
 */
export function envelopeSchema(definition?: EventDefinition): SchemaObject {
  return {
    type: 'object',
    additionalProperties: false,
    required: ['id', 'type', 'version', 'time', 'workspace_id', 'account_id', 'aggregate', 'actor', 'correlation_id', 'data', 'prev_hash', 'hash'],
    properties: {
      id: {
        type: 'string',
        format: 'uuid',
        description: 'Event id (UUID). Also the `Nats-Msg-Id` header, so a retried publish is stored once; dedupe on it.',
      },
      type: definition
        ? { type: 'string', const: definition.type, description: 'Event type.' }
        : { type: 'string', description: 'Event type, e.g. `ActionApproved`: selects the schema of `data`.' },
      version: definition
        ? { type: 'integer', const: definition.version, description: 'Schema version of `data` for this type.' }
        : { type: 'integer', minimum: 1, description: 'Schema version of `data` for this type (starts at 1).' },
      time: { type: 'string', format: 'date-time', description: 'ISO-8601 UTC time the event was decided.' },
      workspace_id: { type: 'string', minLength: 1, description: 'Workspace (tenant) the event belongs to.' },
      account_id: {
        anyOf: [{ type: 'string', minLength: 1 }, { type: 'null' }],
        description: 'Advertising account (the API\'s `project_id`); null for workspace-level aggregates (`workspace`, `key`).',
      },
      aggregate: {
        type: 'object',
        additionalProperties: false,
        required: ['type', 'id'],
        description: 'The aggregate (consistency boundary) the event belongs to; one subject per aggregate.',
        properties: {
          type: definition
            ? { type: 'string', const: definition.aggregate, description: 'Aggregate type.' }
            : { type: 'string', enum: [...AGGREGATE_TYPES], description: 'Aggregate type.' },
          id: { type: 'string', minLength: 1, description: 'Aggregate id; the last token of the subject.' },
        },
      },
      actor: {
        type: 'object',
        additionalProperties: false,
        required: ['kind', 'id'],
        description: 'Who caused the event.',
        properties: {
          kind: { type: 'string', enum: [...ACTOR_KINDS], description: 'Kind of actor.' },
          id: { type: 'string', minLength: 1, description: 'API key id, worker id, operator name or component name. Never a secret.' },
        },
      },
      correlation_id: {
        type: 'string',
        minLength: 1,
        description: "Run id or request id that caused the event; joins a run's events across aggregates.",
      },
      data: definition ? definition.data : { type: 'object', description: 'The payload; its schema is given by `type` and `version`.' },
      prev_hash: { ...HASH, description: `\`hash\` of the previous event of the same aggregate; ${GENESIS_HASH.length} zeros for the first.` },
      hash: { ...HASH, description: 'SHA-256 (hex) over `prev_hash` and the canonical JSON of every other field but `signature` (see "Hash chain").' },
      key_id: {
        type: 'string',
        pattern: '^[0-9a-f]{16}$',
        description: 'Id of the Ed25519 key that signed the event: the first 16 hex characters of SHA-256 over its raw 32-byte public key. Absent only on legacy events (see "Signatures").',
      },
      signature: {
        type: 'string',
        pattern: '^[A-Za-z0-9_-]{86}$',
        description: 'Ed25519 signature (unpadded base64url) over the canonical JSON of the envelope without `signature` (see "Signatures"). Absent only on legacy events.',
      },
    },
  };
}

export interface HeaderDoc {
  readonly name: string;
  readonly value: string;
  readonly meaning: string;
}

export const HEADERS: readonly HeaderDoc[] = [
  { name: 'Nats-Msg-Id', value: 'the event `id`', meaning: 'JetStream de-duplicates a retried publish within the stream\'s 10-minute duplicate window.' },
  { name: EVENT_TYPE_HEADER, value: 'the event `type`', meaning: 'Route or filter without parsing the body.' },
  { name: EVENT_VERSION_HEADER, value: 'the event `version`, as a decimal string', meaning: 'Pick the schema (or the upcaster) before parsing.' },
];

export interface AggregateDoc {
  readonly title: string;
  readonly description: string;
  /** The subject's account token: the account id, or `_` for workspace-level aggregates. */
  readonly accountToken: '<account_id>' | typeof NO_ACCOUNT_TOKEN;
  /** The subject's last token, as a placeholder. */
  readonly idToken: string;
  readonly idDescription: string;
}

export const AGGREGATES: Readonly<Record<AggregateType, AggregateDoc>> = {
  workspace: {
    title: 'Workspace',
    description: 'A tenant: it owns accounts and API keys, and holds the kill switch.',
    accountToken: NO_ACCOUNT_TOKEN,
    idToken: '<workspace_id>',
    idDescription: 'the workspace id',
  },
  key: {
    title: 'API key',
    description: 'An API key of a workspace: issued, then possibly revoked.',
    accountToken: NO_ACCOUNT_TOKEN,
    idToken: '<key_id>',
    idDescription: 'the key id (the public part of the key)',
  },
  account: {
    title: 'Account',
    description:
      'An advertising account, and the lifecycle of its runs: run lifecycle events live on the account subject, which is what makes "one active run per account" exact.',
    accountToken: '<account_id>',
    idToken: '<account_id>',
    idDescription: 'the account id (same as the account token)',
  },
  run: {
    title: 'Run transcript',
    description: "The transcript of one run: every tool the agent called, with its full output. The run's lifecycle is on the account subject.",
    accountToken: '<account_id>',
    idToken: '<run_id>',
    idDescription: 'the run id',
  },
  action: {
    title: 'Action',
    description: 'A proposed change and its lifecycle: proposed (and classified), approved or rejected, applied.',
    accountToken: '<account_id>',
    idToken: '<action_id>',
    idDescription: 'the action id',
  },
  quota: {
    title: 'Auto-apply quota',
    description: 'The auto-apply slots of one account for one UTC day (at most 20).',
    accountToken: '<account_id>',
    idToken: '<account_id>_<yyyymmdd>',
    idDescription: 'the account id, `_`, and the UTC day as `yyyymmdd`',
  },
};

/** The subject of one aggregate, with placeholders: `<prefix>.v1.<workspace_id>._.workspace.<workspace_id>`. */
export function subjectPattern(aggregate: AggregateType, prefix = '<prefix>'): string {
  const doc = AGGREGATES[aggregate];
  return [prefix, SUBJECT_VERSION, '<workspace_id>', doc.accountToken, aggregate, doc.idToken].join('.');
}

export interface ActionKindDoc {
  readonly summary: string;
  readonly params: Readonly<Record<string, string>>;
  readonly basedOn: Readonly<Record<string, string>>;
}

type KindDocs = {
  readonly [K in ActionKind]: {
    readonly summary: string;
    // Keyed by the draft's own fields: a field added to or removed from ActionDraft fails the typecheck here.
    readonly params: Readonly<Record<keyof ActionDraftOf<K>['params'], string>>;
    readonly basedOn: Readonly<Record<keyof ActionDraftOf<K>['based_on'], string>>;
  };
};

const TARGET_BASIS = {
  campaign_status: 'Campaign status when proposed.',
  strategy_type: 'Bidding strategy type when proposed.',
  portfolio_id: 'Portfolio strategy id, or null.',
  campaigns_affected: 'Campaigns the change moves: 1, or every campaign on the portfolio.',
} as const;

/** `params` and `based_on` of ActionProposed, per `kind` (src/policy/action-draft.ts). */
export const ACTION_KINDS_DOC: KindDocs = {
  add_negative_keywords: {
    summary: 'Add negative keywords to a campaign.',
    params: {
      campaign_id: 'Campaign id.',
      keywords: `Array of \`{text, match_type}\`; match_type is one of ${MATCH_TYPES.map((t) => `\`${t}\``).join(', ')}.`,
    },
    basedOn: {
      campaign_status: 'Campaign status when proposed.',
      matched_cost_30d: 'Cost of the search terms the keywords match, last 30 days.',
      matched_conversions_30d: 'Net conversions of those search terms, last 30 days (a retraction counts negative; any value but 0 makes the action `review`).',
      converting_terms_30d: 'How many of those search terms had conversions other than 0, last 30 days (any makes the action `review`). Absent in proposals recorded before it was.',
      account_cost_30d: "The account's cost, last 30 days.",
      blocked_keywords: "Keywords of the campaign, all but paused ones, the negatives would block (any makes the action `review`).",
    },
  },
  pause_keywords: {
    summary: 'Pause keywords.',
    params: { keyword_ids: 'Array of keyword ids.' },
    basedOn: {
      keywords: 'Array of `{id, text, status, cost_30d, conversions_30d}` as read when proposed.',
      account_cost_30d: "The account's cost, last 30 days.",
    },
  },
  set_campaign_budget: {
    summary: "Set a campaign's daily budget.",
    params: { campaign_id: 'Campaign id.', daily_budget: 'New daily budget, in account currency.' },
    basedOn: {
      campaign_status: 'Campaign status when proposed.',
      daily_budget: 'Daily budget when proposed.',
      shared_budget: 'The shared budget the campaign drew on, `{id, campaign_ids}`, or null for a budget of its own (a shared one makes the action `review`); absent on actions proposed before it was recorded.',
    },
  },
  set_target_cpa: {
    summary: "Set the target CPA of a campaign's maximize_conversions strategy.",
    params: { campaign_id: 'Campaign id.', target_cpa: 'New target CPA, in account currency (cents precision).' },
    basedOn: { ...TARGET_BASIS, target_cpa: 'Target CPA when proposed, or null.' },
  },
  set_target_roas: {
    summary: "Set the target ROAS of a campaign's maximize_conversion_value strategy.",
    params: { campaign_id: 'Campaign id.', target_roas_pct: 'New target ROAS, in percent (one decimal).' },
    basedOn: { ...TARGET_BASIS, target_roas_pct: 'Target ROAS percent when proposed, or null.' },
  },
};
