import { PROJECTIONS } from '../../projections/index.ts';
import { listQuarantine } from '../../projections/runtime/quarantine.ts';
import { retryQuarantined, RetryOutcome } from '../../projections/runtime/quarantine-retry.ts';
import type { Infrastructure } from '../runtime/infrastructure.ts';
import { terminalText } from '../text/terminal-text.ts';
import type { Options } from './cli-options.ts';
import { printResult, UsageError } from './output.ts';

/**
 * `adsagent projections quarantine list|retry SEQ [--force]`: the events projections parked.
 * `list` exits 0 whether or not anything is parked; `retry` exits 1 unless every
 * projection that parked the event applied it.
 */
export async function runQuarantineCommand(infra: Infrastructure, args: readonly string[], options: Options, json: boolean): Promise<number> {
  const [verb, seqText] = args;
  const db = infra.database.db;
  if (verb === 'list') {
    const entries = await listQuarantine(db);
    const rows = entries.map((entry) => ({
      projection: entry.projection,
      seq: entry.seq,
      subject: entry.subject,
      code: entry.code,
      error: entry.error,
      first_seen_at: entry.firstSeenAt.toISOString(),
      last_seen_at: entry.lastSeenAt.toISOString(),
      payload_base64: Buffer.from(entry.payload).toString('base64'),
    }));
    const human =
      rows.length === 0
        ? 'no parked events'
        : rows.map((r) => `${r.seq}\t${r.projection}\t${r.code}\t${terminalText(r.subject)}\t${r.first_seen_at}\t${terminalText(r.error)}`).join('\n');
    printResult(json, { events: rows }, human);
    return 0;
  }
  if (verb === 'retry') {
    const seq = Number(seqText);
    if (!seqText || !Number.isInteger(seq) || seq < 1) throw new UsageError('projections quarantine retry needs SEQ, a positive stream sequence: see them with `adsagent projections quarantine list`');
    const results = await retryQuarantined({ db, store: infra.store, projections: PROJECTIONS, seq, force: options.force === true });
    if (results.length === 0) {
      printResult(json, { seq, results }, `no projection has parked sequence ${seq}; adsagent projections quarantine list shows the parked ones`);
      return 1;
    }
    printResult(json, { seq, results }, results.map((r) => `${r.projection}: ${r.outcome} (${terminalText(r.detail)})`).join('\n'));
    return results.every((r) => r.outcome === RetryOutcome.Applied) ? 0 : 1;
  }
  throw new UsageError('projections quarantine needs a verb: adsagent projections quarantine list, or adsagent projections quarantine retry SEQ [--force]');
}
