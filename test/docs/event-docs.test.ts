import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { checkGeneratedDocs, describeDifference } from '../../scripts/check-docs.ts';
import { renderAsyncApi } from '../../scripts/generate-asyncapi.ts';
import { renderEventDocs } from '../../scripts/generate-event-docs.ts';
import { fieldRows } from '../../scripts/lib/schema-table.ts';
import { EVENT_DEFINITIONS } from '../../src/events/catalogue/index.ts';
import { computeEventHash } from '../../src/events/event-hash.ts';
import { GENESIS_HASH, type EventEnvelope } from '../../src/events/envelope.ts';

const REPO = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, REPO), 'utf8');
const run = promisify(execFile);

/** The part of docs/events.md about one event type: from its heading to the next heading of any event. */
function sectionOf(doc: string, type: string, version: number): string {
  const start = doc.indexOf(`\n### ${type} (v${version})\n`);
  expect(start, `docs/events.md has no section "### ${type} (v${version})"`).to.be.greaterThan(-1);
  const next = doc.indexOf('\n### ', start + 1);
  return doc.slice(start, next === -1 ? undefined : next);
}

describe('docs/events.md (generated from the event catalogue)', () => {
  const doc = read('docs/events.md');

  it('is up to date with the catalogue (run `npm run docs:events` when this fails)', () => {
    expect(describeDifference('docs/events.md', renderEventDocs(), doc)).to.equal(null);
  });

  it('documents every event type with its version, subject, description and every data field', () => {
    for (const definition of EVENT_DEFINITIONS) {
      const section = sectionOf(doc, definition.type, definition.version);
      expect(section).to.contain(definition.description);
      expect(section).to.contain(`.${definition.aggregate}.`);
      for (const row of fieldRows(definition.data)) expect(section, `${definition.type}.${row.path}`).to.contain(`\`${row.path}\``);
      expect(section).to.contain('<details>');
    }
  });

  it('documents the envelope, the hash chain, the headers and the subject hierarchy', () => {
    for (const field of ['id', 'type', 'version', 'time', 'workspace_id', 'account_id', 'aggregate', 'actor', 'correlation_id', 'data', 'prev_hash', 'hash']) {
      expect(doc).to.contain(`| \`${field}\` |`);
    }
    expect(doc).to.contain(GENESIS_HASH);
    expect(doc).to.contain('RFC 8785');
    for (const header of ['Nats-Msg-Id', 'Ads-Event-Type', 'Ads-Event-Version']) expect(doc).to.contain(header);
    expect(doc).to.contain('<prefix>.v1.<workspace_id>.<account_id|_>.<aggregate_type>.<aggregate_id>');
  });

  it('shows example events whose hash chain verifies by the documented rule', () => {
    const json = doc.slice(doc.indexOf('```json\n{') + '```json\n'.length, doc.indexOf('\n```', doc.indexOf('```json\n{')));
    const events = json.split(/\n(?=\{)/).map((text) => JSON.parse(text) as EventEnvelope);
    expect(events).to.have.length(2);
    let prev = GENESIS_HASH;
    for (const event of events) {
      expect(event.prev_hash).to.equal(prev);
      expect(computeEventHash(event, event.prev_hash)).to.equal(event.hash);
      prev = event.hash;
    }
  });

  it('is deterministic', () => {
    expect(renderEventDocs()).to.equal(renderEventDocs());
    expect(renderAsyncApi()).to.equal(renderAsyncApi());
  });
});

describe('npm run docs:check', function () {
  this.timeout(30_000);
  let scratch: string;

  beforeEach(() => {
    scratch = mkdtempSync(join(tmpdir(), 'docs-check-'));
    mkdirSync(join(scratch, 'docs'));
  });
  afterEach(() => rmSync(scratch, { recursive: true, force: true }));

  it('finds nothing to complain about in this checkout', () => {
    expect(checkGeneratedDocs()).to.deep.equal([]);
  });

  it('exits 1 naming the stale file, the first differing line, and the command that fixes it', async () => {
    const stale = renderEventDocs().replace('ActionApproved', 'ActionOKed');
    writeFileSync(join(scratch, 'docs/events.md'), stale);
    writeFileSync(join(scratch, 'docs/asyncapi.yaml'), renderAsyncApi());
    const script = new URL('scripts/check-docs.ts', REPO).pathname;
    const failure = await run(process.execPath, [script, '--root', scratch], { cwd: new URL('.', REPO).pathname }).then(
      () => null,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failure, 'docs:check should fail').to.not.equal(null);
    expect(failure!.code).to.equal(1);
    expect(failure!.stderr).to.match(/docs\/events\.md is out of date: first difference at line \d+/);
    expect(failure!.stderr).to.contain('npm run docs:events');
    expect(failure!.stderr).to.not.contain('asyncapi.yaml is out of date');
  });

  it('reports a missing generated file', () => {
    writeFileSync(join(scratch, 'docs/events.md'), renderEventDocs());
    expect(checkGeneratedDocs(scratch)).to.deep.equal(['docs/asyncapi.yaml does not exist.']);
  });
});

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const match of markdown.matchAll(/^#{1,6} (.+)$/gm)) {
    anchors.add(match[1]!.toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-'));
  }
  return anchors;
}

describe('docs/consumers.md (the subscription contract)', () => {
  const consumers = read('docs/consumers.md');
  const events = read('docs/events.md');

  it('states the stream, the subject wildcards, delivery, ordering, versioning and the operator commands', () => {
    for (const needle of [
      'ADS_EVENTS',
      'ads.v1.<ws>.>',
      'ads.v1.<ws>.<acct>.>',
      'ads.v1.*.*.action.*',
      'at least once',
      'stream sequence',
      'ignore event types they do not know',
      'nats consumer add',
      'jsm.consumers.add',
      'adsagent events tail [--account ID] [--type TYPE] [--from-seq N | --since TIME] [--follow]',
      'adsagent audit verify [--account ID] [--from-seq N]',
    ]) {
      expect(consumers, needle).to.contain(needle);
    }
  });

  it('links between events.md and consumers.md point at headings that exist', () => {
    const targets: Record<string, Set<string>> = { 'events.md': anchorsOf(events), 'consumers.md': anchorsOf(consumers) };
    let checked = 0;
    for (const [name, text] of [['events.md', events], ['consumers.md', consumers]] as const) {
      for (const [, file, anchor] of text.matchAll(/\]\((events\.md|consumers\.md)?#([^)]+)\)/g)) {
        const target = file ?? name;
        expect(targets[target]!.has(anchor!), `${name} links to ${target}#${anchor}`).to.equal(true);
        checked++;
      }
    }
    expect(checked).to.be.greaterThan(5);
  });
});
