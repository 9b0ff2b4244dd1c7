import { run as runAgent } from './agent.bench.ts';
import { run as runAudit } from './audit.bench.ts';
import { run as runEventStore } from './event-store.bench.ts';
import { run as runHttpApi } from './http-api.bench.ts';
import { run as runSigning } from './signing.bench.ts';
import { run as runRateLimit } from './rate-limit.bench.ts';
import { run as runGoogleAds } from './google-ads.bench.ts';
import { run as runCluster } from './cluster.bench.ts';
import { run as runConsole } from './console.bench.ts';
import { releaseAll } from './support/isolation.ts';
import { header, note } from './support/report.ts';

/**
 * Runs every benchmark in sequence: `npm run bench`; BENCH_ONLY=http,audit runs only the
 * benchmarks whose name or file contains one of those words. Each one creates private streams and
 * schemas (bench/support/isolation.ts); whatever is left is dropped here, also when a
 * benchmark fails or the run is interrupted. Exits 0 when every benchmark completed.
 */
const ALL_BENCHMARKS: readonly { readonly name: string; readonly file: string; readonly run: () => Promise<void> }[] = [
  { name: 'event store', file: 'bench/event-store.bench.ts', run: runEventStore },
  { name: 'http api', file: 'bench/http-api.bench.ts', run: runHttpApi },
  { name: 'rate limiter', file: 'bench/rate-limit.bench.ts', run: runRateLimit },
  { name: 'agent', file: 'bench/agent.bench.ts', run: runAgent },
  { name: 'audit', file: 'bench/audit.bench.ts', run: runAudit },
  { name: 'signing', file: 'bench/signing.bench.ts', run: runSigning },
  { name: 'google ads adapter', file: 'bench/google-ads.bench.ts', run: runGoogleAds },
  { name: 'nats cluster scale-out', file: 'bench/cluster.bench.ts', run: runCluster },
  { name: 'approvals console', file: 'bench/console.bench.ts', run: runConsole },
];
const only = (process.env.BENCH_ONLY ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
const BENCHMARKS = ALL_BENCHMARKS.filter((b) => only.length === 0 || only.some((word) => b.name.includes(word) || b.file.includes(word)));

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\n${signal}: dropping benchmark streams and schemas`);
    void releaseAll().finally(() => process.exit(130));
  });
}

async function main(): Promise<number> {
  const started = Date.now();
  const failed: string[] = [];
  console.log(`benchmarks on node ${process.version}, ${new Date().toISOString()}`);
  for (const benchmark of BENCHMARKS) {
    header(`${benchmark.name} (${benchmark.file})`);
    const t0 = Date.now();
    try {
      await benchmark.run();
      note(`${benchmark.name}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    } catch (error) {
      failed.push(benchmark.name);
      console.error(`${benchmark.name} FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    } finally {
      await releaseAll();
    }
  }
  console.log('');
  console.log(
    `${BENCHMARKS.length - failed.length}/${BENCHMARKS.length} benchmarks completed in ${((Date.now() - started) / 1000).toFixed(1)} s` +
      (failed.length > 0 ? `; failed: ${failed.join(', ')}` : ''),
  );
  if (interrupted) return 130;
  return failed.length === 0 ? 0 : 1;
}

main()
  .catch(async (error) => {
    console.error(error);
    await releaseAll();
    return 1;
  })
  .then((code) => process.exit(code));
