/**
 * Generates docs/asyncapi.yaml (AsyncAPI 3.0) from the event catalogue: one channel per
 * aggregate type, one message per event type and version (payload: the envelope with `data`
 * set to that event's schema), and a receive operation per channel for consumers.
 *
 *   npm run docs:events   writes it (with docs/events.md)
 *   npm run docs:check    fails when it differs from what the catalogue gives
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { EVENT_DEFINITIONS, type EventDefinition } from '../src/events/catalogue/index.ts';
import { EVENT_TYPE_HEADER, EVENT_VERSION_HEADER } from '../src/event-store/event-store.ts';
import {
  AGGREGATE_TYPES,
  AGGREGATES,
  DEFAULT_PREFIX,
  DEFAULT_STREAM,
  NO_ACCOUNT_TOKEN,
  SUBJECT_VERSION,
  envelopeSchema,
  subjectPattern,
  type AggregateType,
} from './lib/event-contract.ts';
import { isMainModule } from './lib/main-module.ts';
import { REPO_ROOT } from './lib/paths.ts';
import { toYaml } from './lib/yaml.ts';

export const ASYNCAPI_PATH = 'docs/asyncapi.yaml';

/** The key of an event type's message in components.messages and in its channel. */
export const messageId = (definition: Pick<EventDefinition, 'type' | 'version'>) => `${definition.type}_v${definition.version}`;

const capitalized = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);
export const operationId = (aggregate: AggregateType) => `receive${capitalized(aggregate)}Events`;

function channelAddress(aggregate: AggregateType): string {
  return `{prefix}.${SUBJECT_VERSION}.{workspaceId}.{accountId}.${aggregate}.{aggregateId}`;
}

function channelParameters(aggregate: AggregateType): Record<string, unknown> {
  const info = AGGREGATES[aggregate];
  const workspaceLevel = info.accountToken === NO_ACCOUNT_TOKEN;
  return {
    prefix: {
      description: 'EVENT_SUBJECT_PREFIX of the deployment.',
      default: DEFAULT_PREFIX,
    },
    workspaceId: {
      description: 'Workspace id.',
      location: '$message.payload#/workspace_id',
    },
    accountId: workspaceLevel
      ? {
          description: `Always \`${NO_ACCOUNT_TOKEN}\`: ${aggregate} is a workspace-level aggregate (its events have account_id null).`,
          enum: [NO_ACCOUNT_TOKEN],
          default: NO_ACCOUNT_TOKEN,
        }
      : {
          description: 'Account id.',
          location: '$message.payload#/account_id',
        },
    aggregateId: {
      description: `Aggregate id: ${info.idDescription}.`,
      location: '$message.payload#/aggregate/id',
    },
  };
}

function message(definition: EventDefinition): Record<string, unknown> {
  return {
    name: definition.type,
    title: `${definition.type} v${definition.version}`,
    summary: definition.description,
    contentType: 'application/json',
    correlationId: { $ref: '#/components/correlationIds/correlationId' },
    headers: {
      type: 'object',
      required: ['Nats-Msg-Id', EVENT_TYPE_HEADER, EVENT_VERSION_HEADER],
      properties: {
        'Nats-Msg-Id': { type: 'string', format: 'uuid', description: 'The event id; JetStream de-duplicates on it.' },
        [EVENT_TYPE_HEADER]: { type: 'string', const: definition.type },
        [EVENT_VERSION_HEADER]: { type: 'string', const: String(definition.version) },
      },
    },
    payload: envelopeSchema(definition),
  };
}

/** The AsyncAPI document, as a plain JSON value. */
export function buildAsyncApi(definitions: readonly EventDefinition[] = EVENT_DEFINITIONS): Record<string, unknown> {
  const channels: Record<string, unknown> = {};
  const operations: Record<string, unknown> = {};
  const messages: Record<string, unknown> = {};
  for (const definition of definitions) messages[messageId(definition)] = message(definition);

  for (const aggregate of AGGREGATE_TYPES) {
    const defs = definitions.filter((d) => d.aggregate === aggregate);
    if (defs.length === 0) continue;
    const info = AGGREGATES[aggregate];
    const filter = `${DEFAULT_PREFIX}.${SUBJECT_VERSION}.*.*.${aggregate}.*`;
    channels[aggregate] = {
      address: channelAddress(aggregate),
      title: info.title,
      summary: `Events of ${aggregate} aggregates: one subject per aggregate, ${subjectPattern(aggregate)}.`,
      description:
        `${info.description}\n\n` +
        'Each subject is totally ordered and hash-chained (docs/events.md, "Hash chain"). ' +
        `All ${aggregate} subjects of the deployment: \`${filter}\`.`,
      parameters: channelParameters(aggregate),
      messages: Object.fromEntries(defs.map((d) => [messageId(d), { $ref: `#/components/messages/${messageId(d)}` }])),
    };
    operations[operationId(aggregate)] = {
      action: 'receive',
      channel: { $ref: `#/channels/${aggregate}` },
      title: `Consume ${aggregate} events`,
      summary: `A JetStream consumer on the stream with filter_subject ${filter} (or a narrower one).`,
      description:
        'Use a durable pull consumer (ack_policy explicit) on the event stream. Delivery is at least once: ' +
        'dedupe on the event id or the stream sequence, ack after your own commit, and ignore event types ' +
        'you do not know (docs/consumers.md).',
      messages: defs.map((d) => ({ $ref: `#/channels/${aggregate}/messages/${messageId(d)}` })),
      bindings: { nats: { bindingVersion: '0.1.0' } },
      'x-jetstream': {
        stream: DEFAULT_STREAM,
        filter_subject: filter,
        ack_policy: 'explicit',
        deliver_policy: 'all',
      },
    };
  }

  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Ads agent event log',
      version: '1.0.0',
      description:
        'Every event of the ads agent service, as stored on its NATS JetStream stream: what analytics consumers ' +
        'and auditors subscribe to. Generated from src/events/catalogue/ by scripts/generate-asyncapi.ts; ' +
        'the prose reference is docs/events.md and the subscription contract docs/consumers.md.\n\n' +
        `Stream: \`${DEFAULT_STREAM}\` (EVENT_STREAM). Subjects: ` +
        `\`<prefix>.${SUBJECT_VERSION}.<workspace_id>.<account_id|${NO_ACCOUNT_TOKEN}>.<aggregate_type>.<aggregate_id>\`, ` +
        `prefix \`${DEFAULT_PREFIX}\` (EVENT_SUBJECT_PREFIX).`,
    },
    defaultContentType: 'application/json',
    servers: {
      local: {
        host: '127.0.0.1:4222',
        protocol: 'nats',
        description: 'NATS with JetStream (NATS_URL) for development (deploy/ensure-services.sh): loopback, no users, no TLS.',
      },
      deployed: {
        host: 'nats:4222',
        protocol: 'nats',
        description:
          'The shipped setups (deploy/compose.yaml; the 3-node cluster in deploy/nats-cluster/): TLS verified against NATS_TLS_CA, ' +
          'and a user of deploy/nats/auth.conf. Consumers log in as `analytics` (read-only: own consumers, no publish) and ' +
          'receive replies at `_INBOX.analytics.>`. See deploy/README.md.',
        security: [{ $ref: '#/components/securitySchemes/natsUser' }],
      },
    },
    channels,
    operations,
    components: {
      securitySchemes: {
        natsUser: { type: 'userPassword', description: 'NATS user and password (NATS_USER / NATS_PASSWORD); users and permissions in deploy/nats/auth.conf.' },
      },
      messages,
      correlationIds: {
        correlationId: {
          description: "Run id or request id that caused the event; joins a run's events across aggregates.",
          location: '$message.payload#/correlation_id',
        },
      },
    },
  };
}

/** docs/asyncapi.yaml, as text. */
export function renderAsyncApi(definitions: readonly EventDefinition[] = EVENT_DEFINITIONS): string {
  return toYaml(buildAsyncApi(definitions), [
    'Generated by `npm run docs:events` (scripts/generate-asyncapi.ts) from src/events/catalogue/.',
    'Do not edit by hand: CI runs `npm run docs:check`, which fails when this file is stale.',
  ]);
}

if (isMainModule(import.meta.url)) {
  writeFileSync(join(REPO_ROOT, ASYNCAPI_PATH), renderAsyncApi());
  console.log(`wrote ${ASYNCAPI_PATH} (${EVENT_DEFINITIONS.length} messages)`);
}
