import { DiagnosticSeverity, Parser, type AsyncAPIDocumentInterface, type Diagnostic } from '@asyncapi/parser';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { describeDifference } from '../../scripts/check-docs.ts';
import { messageId, operationId, renderAsyncApi } from '../../scripts/generate-asyncapi.ts';
import { EVENT_DEFINITIONS } from '../../src/events/catalogue/index.ts';
import { AGGREGATE_TYPES, GENESIS_HASH } from '../../src/events/envelope.ts';
import { computeEventHash } from '../../src/events/event-hash.ts';
import { startTestService, type TestService } from '../support/test-service.ts';

const text = readFileSync(new URL('../../docs/asyncapi.yaml', import.meta.url), 'utf8');

/** Strips what the parser adds to schemas (x-parser-*), so Ajv sees plain JSON Schema. */
function plain(value: unknown): any {
  if (Array.isArray(value)) return value.map(plain);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).filter(([key]) => !key.startsWith('x-parser-')).map(([key, v]) => [key, plain(v)]));
}

describe('docs/asyncapi.yaml (AsyncAPI 3.0, generated from the event catalogue)', function () {
  this.timeout(60_000);
  let document: AsyncAPIDocumentInterface;
  let diagnostics: Diagnostic[];

  before(async () => {
    const parsed = await new Parser().parse(text);
    diagnostics = parsed.diagnostics;
    if (!parsed.document) throw new Error(`not a valid AsyncAPI document: ${JSON.stringify(parsed.diagnostics, null, 2)}`);
    document = parsed.document;
  });

  it('is up to date with the catalogue (run `npm run docs:events` when this fails)', () => {
    expect(describeDifference('docs/asyncapi.yaml', renderAsyncApi(), text)).to.equal(null);
  });

  it('parses with no error diagnostics', () => {
    const errors = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error);
    expect(errors.map((d) => `${d.code} at ${d.path.join('/')}: ${d.message}`)).to.deep.equal([]);
    expect(document.version()).to.equal('3.0.0');
  });

  it('has a message for every event type and version, with the envelope as payload and data as its schema', () => {
    const messages = new Map(document.messages().all().map((m) => [m.id(), m]));
    for (const definition of EVENT_DEFINITIONS) {
      const message = messages.get(messageId(definition));
      expect(message, `message ${messageId(definition)}`).to.not.equal(undefined);
      expect(message!.name()).to.equal(definition.type);
      const payload = plain(message!.payload()!.json());
      expect(payload.properties.type.const).to.equal(definition.type);
      expect(payload.properties.version.const).to.equal(definition.version);
      expect(payload.properties.aggregate.properties.type.const).to.equal(definition.aggregate);
      expect(payload.properties.data).to.deep.equal(definition.data);
      expect(payload.required).to.include.members(['id', 'type', 'version', 'data', 'prev_hash', 'hash']);
      const headers = plain(message!.headers()!.json());
      expect(headers.properties['Ads-Event-Type'].const).to.equal(definition.type);
    }
    expect(messages.size).to.equal(EVENT_DEFINITIONS.length);
  });

  it('has one channel per aggregate type, addressed by the subject hierarchy, with a receive operation', () => {
    for (const aggregate of AGGREGATE_TYPES) {
      const channel = document.channels().get(aggregate);
      expect(channel, `channel ${aggregate}`).to.not.equal(undefined);
      expect(channel!.address()).to.equal(`{prefix}.v1.{workspaceId}.{accountId}.${aggregate}.{aggregateId}`);
      expect(channel!.parameters().all().map((p) => p.id()).sort()).to.deep.equal(['accountId', 'aggregateId', 'prefix', 'workspaceId']);
      const types = channel!.messages().all().map((m) => m.name());
      expect(types.sort()).to.deep.equal(EVENT_DEFINITIONS.filter((d) => d.aggregate === aggregate).map((d) => d.type).sort());
      const operation = document.operations().get(operationId(aggregate));
      expect(operation, `operation ${operationId(aggregate)}`).to.not.equal(undefined);
      expect(operation!.action()).to.equal('receive');
      expect(operation!.channels().all().map((c) => c.id())).to.deep.equal([aggregate]);
      expect(operation!.bindings().has('nats')).to.equal(true);
    }
  });

  describe('against events a running service stores', () => {
    let svc: TestService;
    let validators: Map<string, { payload: ValidateFunction; headers: ValidateFunction; address: string }>;

    before(async () => {
      svc = await startTestService('asyncapi', { ROLES: 'http,projectors' });
      const ajv = new Ajv({ allErrors: true, strict: false });
      addFormats.default(ajv);
      validators = new Map();
      for (const message of document.messages().all()) {
        const channel = document.channels().all().find((c) => c.messages().has(message.id()))!;
        validators.set(message.name()!, {
          payload: ajv.compile(plain(message.payload()!.json())),
          headers: ajv.compile(plain(message.headers()!.json())),
          address: channel.address()!,
        });
      }
    });

    after(async () => {
      await svc?.stop();
    });

    it('every stored message matches its AsyncAPI message: payload, headers, subject and hash chain', async () => {
      const tenant = await svc.tenant('asyncapi');
      // An auto-applied proposal adds action and quota events to the workspace, key and account ones.
      const account = tenant.accounts.sandbox;
      const listed = await (await svc.request('GET', `/api/v1/accounts/${account}/campaigns`, { key: tenant.keys.read })).json();
      const campaign = (listed as any).data.find(
        (c: any) => c.status === 'enabled' && c.bidding_strategy.type === 'maximize_conversions' && c.bidding_strategy.target_cpa !== null && c.bidding_strategy.portfolio === null,
      );
      const proposed = await svc.request('POST', `/api/v1/accounts/${account}/campaigns/${campaign.id}/target`, {
        key: tenant.keys.write,
        body: { target_cpa: Math.round(campaign.bidding_strategy.target_cpa * 105) / 100, reason: 'asyncapi test', auto_apply: true },
      });
      expect(proposed.status).to.equal(200);

      const { jsm, config } = { jsm: svc.service.infrastructure.jsm, config: svc.config };
      const last = (await jsm.streams.info(config.eventStream)).state.last_seq;
      const chains = new Map<string, string>();
      const seen = new Set<string>();
      for (let seq = 1; seq <= last; seq++) {
        const stored = await jsm.streams.getMessage(config.eventStream, { seq });
        if (!stored) continue;
        const event = stored.json<any>();
        const spec = validators.get(event.type);
        expect(spec, `a message for ${event.type}`).to.not.equal(undefined);
        expect(spec!.payload(event), `${event.type} payload: ${JSON.stringify(spec!.payload.errors)}`).to.equal(true);
        const headers = Object.fromEntries(['Nats-Msg-Id', 'Ads-Event-Type', 'Ads-Event-Version'].map((h) => [h, stored.header.get(h)]));
        expect(spec!.headers(headers), `${event.type} headers: ${JSON.stringify(spec!.headers.errors)}`).to.equal(true);
        expect(headers['Nats-Msg-Id']).to.equal(event.id);
        const subject = spec!.address
          .replace('{prefix}', config.subjectPrefix)
          .replace('{workspaceId}', event.workspace_id)
          .replace('{accountId}', event.account_id ?? '_')
          .replace('{aggregateId}', event.aggregate.id);
        expect(stored.subject).to.equal(subject);
        expect(event.prev_hash, `chain of ${stored.subject}`).to.equal(chains.get(stored.subject) ?? GENESIS_HASH);
        expect(computeEventHash(event, event.prev_hash)).to.equal(event.hash);
        chains.set(stored.subject, event.hash);
        seen.add(event.aggregate.type);
      }
      expect([...seen].sort()).to.deep.equal(['account', 'action', 'key', 'quota', 'workspace']);
    });
  });
});
