import { CURRENT_VERSION } from '../events/catalogue/index.ts';
import type { AdmissionResult } from '../events/event-admission.ts';
import { SubjectChains } from '../events/subject-chains.ts';
import type { ReaderInfrastructure } from '../runtime/reader-infrastructure.ts';
import { UsageError } from './output.ts';
import { accountOption, type Options } from './cli-options.ts';

/**
 * `adsagent events tail`: events as JSON lines (envelope plus `seq` and `subject`). A
 * message that is not a believable event prints as `{"seq","subject","corrupt":true,
 * "code","error"}` and the tail goes on (a `--type` filter does not hide it); so does a
 * replayed copy (`chain-broken`) on a subject whose chain the tail follows from its start.
 */
export async function runEventsTail(infra: Pick<ReaderInfrastructure, 'store' | 'subjects'>, options: Options): Promise<number> {
  checkEventsTailOptions(options);
  const account = accountOption(options) ?? '*';
  const filter = account === '*' ? infra.subjects.all : `${infra.subjects.prefix}.v1.*.${account}.>`;
  const type = typeof options.type === 'string' ? options.type : undefined;
  let from = 1;
  if (options['from-seq'] !== undefined) from = Number(options['from-seq']);
  else if (typeof options.since === 'string') from = await infra.store.firstSeqAtOrAfter(new Date(options.since));
  const print = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);
  // Subjects that start in the range are followed from their first event: a replayed copy on
  // them prints as corrupt. From the beginning (the default) that is every subject. Unless the
  // read covers the whole stream as it was ever written, a first event is checked to be its
  // subject's first message.
  const wholeStream = from <= 1 && (await infra.store.firstSequence()) === 1;
  const chains = new SubjectChains(wholeStream ? {} : { chainStartOf: (subject) => infra.store.firstGenesisSeqOf(subject) });
  const show = async (admitted: AdmissionResult) => {
    const { result } = await chains.judge(admitted);
    if (!result.ok) {
      const { seq, subject, code, error } = result.corrupt;
      print({ seq, subject, corrupt: true, code, error });
      return;
    }
    const { seq, subject, event } = result.stored;
    if (!type || event.type === type) print({ seq, subject, ...event });
  };
  if (!options.follow) {
    for await (const result of infra.store.readFilteredChecked(filter, from)) await show(result);
    return 0;
  }
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    for await (const result of infra.store.followChecked(filter, from, controller.signal)) await show(result);
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  return 0;
}


/** Every event type the catalogue defines, sorted: what --type accepts. */
export const KNOWN_EVENT_TYPES: readonly string[] = Object.keys(CURRENT_VERSION).sort();

/**
 * Refuses options `events tail` cannot honour, before anything is read: a `--type` no event
 * has would print nothing and look like an empty log, so it is an error listing the types.
 */
export function checkEventsTailOptions(options: Options): void {
  accountOption(options);
  if (options['from-seq'] !== undefined && options.since !== undefined) {
    throw new UsageError('use --from-seq or --since, not both (--from-seq N starts at a stream sequence, --since TIME at a time)');
  }
  if (options['from-seq'] !== undefined) {
    const from = Number(options['from-seq']);
    if (!Number.isInteger(from) || from < 1) throw new UsageError(`--from-seq must be a positive integer, e.g. --from-seq 1 (got '${options['from-seq']}')`);
  }
  if (typeof options.since === 'string' && Number.isNaN(new Date(options.since).getTime())) {
    throw new UsageError(`--since must be a time, e.g. --since 2026-11-21T10:00:00Z (got '${options.since}')`);
  }
  if (typeof options.type === 'string' && !KNOWN_EVENT_TYPES.includes(options.type)) {
    throw new UsageError(`unknown event type '${options.type}' for --type; known types: ${KNOWN_EVENT_TYPES.join(', ')}`);
  }
}
