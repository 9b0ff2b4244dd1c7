import cliProgress from 'cli-progress';
import { PROJECTIONS } from '../../projections/index.ts';
import { auditVerifier, verifyEventLog } from '../audit/verify-event-log.ts';
import type { Config } from '../config/config.ts';
import type { ReaderInfrastructure } from '../runtime/reader-infrastructure.ts';
import { printResult, UsageError, warn } from './output.ts';
import { accountOption } from './cli-options.ts';
import { terminalText } from '../text/terminal-text.ts';
import type { Options } from './cli-options.ts';

/**
 * `adsagent audit verify`: exit 0 when the log (and, given the database, the read models)
 * check out, 1 at the first discrepancy. An offline audit (`--public-key`) opens no database:
 * it verifies the log only.
 */
export async function runAuditVerify(infra: Pick<ReaderInfrastructure, 'store' | 'subjects' | 'signing' | 'database'>, config: Config, options: Options, json: boolean): Promise<number> {
  const fromSeq = options['from-seq'] === undefined ? 1 : Number(options['from-seq']);
  if (!Number.isInteger(fromSeq) || fromSeq < 1) throw new UsageError(`--from-seq must be a positive integer, e.g. --from-seq 1 (got '${options['from-seq']}')`);
  const accountId = accountOption(options);
  const bar = new cliProgress.SingleBar(
    { format: '{phase} [{bar}] {percentage}% | {value}/{total} | {duration}s', stream: process.stderr, noTTYOutput: false },
    cliProgress.Presets.shades_classic,
  );
  let phase = '';
  bar.start(1, 0, { phase: 'events'.padEnd(14) });
  // With --public-key, infra.signing holds only those keys (see adsagent.ts); a fresh verifier per audit.
  const report = await verifyEventLog({
    verifier: auditVerifier(infra.signing),
    store: infra.store,
    subjects: infra.subjects,
    accountId,
    fromSeq,
    ...(infra.database ? { readModels: { db: infra.database.db, schema: config.databaseSchema, projections: PROJECTIONS } } : {}),
    onProgress: (name, done, total) => {
      if (name !== phase) {
        phase = name;
        bar.setTotal(Math.max(1, total));
      }
      bar.update(done, { phase: name.padEnd(14) });
    },
  });
  bar.stop();
  const human = report.discrepancy
    ? `DISCREPANCY at stream sequence ${report.discrepancy.seq} (${report.discrepancy.kind}) on ${terminalText(report.discrepancy.subject)}: ${terminalText(report.discrepancy.detail)}`
    : `ok: ${report.events} events on ${report.subjects} subjects verified up to sequence ${report.lastSeq}; ${describeSignatures(report)}; read models checked: ${report.readModelsChecked.join(', ') || 'none'} (${report.durationMs} ms)`;
  // A filter that matched nothing verified nothing: a mistyped id must not read as a passed audit.
  if (!report.discrepancy && report.events === 0 && (accountId !== undefined || fromSeq > 1)) {
    const what = [accountId !== undefined ? `of account ${accountId}` : '', fromSeq > 1 ? `from sequence ${fromSeq}` : ''].filter(Boolean).join(' ');
    warn(`no event ${what} is in the log (its last sequence is ${await infra.store.lastSequence()}): nothing was verified; check --account (an account id, as GET /api/v1/accounts lists them) and --from-seq`);
    return 2;
  }
  printResult(json, { ok: report.discrepancy === null, ...report }, human);
  return report.discrepancy ? 1 : 0;
}

function describeSignatures(report: { signedEvents: number; legacyEvents: number; legacyBeforeKeyId: string | null }): string {
  const legacy = report.legacyEvents > 0 ? `, ${report.legacyEvents} unsigned legacy (before key ${report.legacyBeforeKeyId ?? 'none yet'})` : '';
  return `${report.signedEvents} signatures valid${legacy}`;
}
