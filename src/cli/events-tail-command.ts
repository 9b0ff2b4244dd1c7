import type { Infrastructure } from '../runtime/infrastructure.ts';
import { UsageError } from './output.ts';
import type { Options } from './adsagent.ts';

/** `adsagent events tail`: events as JSON lines (envelope plus `seq` and `subject`). */
export async function runEventsTail(infra: Infrastructure, options: Options): Promise<number> {
  if (options['from-seq'] !== undefined && options.since !== undefined) throw new UsageError('use --from-seq or --since, not both');
  const account = typeof options.account === 'string' ? options.account : '*';
  const filter = account === '*' ? infra.subjects.all : `${infra.subjects.prefix}.v1.*.${account}.>`;
  const type = typeof options.type === 'string' ? options.type : undefined;
  let start: { seq: number } | { time: Date } = { seq: 1 };
  if (options['from-seq'] !== undefined) {
    const seq = Number(options['from-seq']);
    if (!Number.isInteger(seq) || seq < 1) throw new UsageError('--from-seq must be a positive integer');
    start = { seq };
  } else if (typeof options.since === 'string') {
    const time = new Date(options.since);
    if (Number.isNaN(time.getTime())) throw new UsageError('--since must be a time, e.g. 2026-11-21T10:00:00Z');
    start = { time };
  }
  const print = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);
  if (!options.follow) {
    const from = 'seq' in start ? start.seq : await firstSeqAtOrAfter(infra, filter, start.time);
    if (from === null) return 0;
    for await (const { seq, subject, event } of infra.store.readFiltered(filter, from)) {
      if (!type || event.type === type) print({ seq, subject, ...event });
    }
    return 0;
  }
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    for await (const { seq, subject, event } of infra.store.follow(filter, start, controller.signal)) {
      if (!type || event.type === type) print({ seq, subject, ...event });
    }
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  return 0;
}

/** The sequence of the first event at or after a time, or null when there is none. */
async function firstSeqAtOrAfter(infra: Infrastructure, filter: string, time: Date): Promise<number | null> {
  const controller = new AbortController();
  const head = await infra.store.lastSequence();
  if (head === 0) return null;
  const timer = setTimeout(() => controller.abort(), 2000);
  try {
    for await (const { seq } of infra.store.follow(filter, { time }, controller.signal)) return seq;
    return null;
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
}
