import { UsageError } from './output.ts';

/**
 * The parsed command-line options every `adsagent` subcommand receives. Kept apart from
 * adsagent.ts (the entry point) so that subcommands do not import the entry point back.
 */
export type Options = Record<string, string | boolean | string[] | undefined>;

/** What an id can be where it becomes a token of a NATS subject filter: no `.`, `*`, `>` or space. */
const SUBJECT_TOKEN = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * `--account ID` of the commands that read the log by account, or undefined when not given.
 * The id becomes a token of the subject filter, so a value that could widen or break it
 * (`x.>`, `*`) is refused here rather than read as a filter.
 *
 * @throws UsageError
 */
export function accountOption(options: Options): string | undefined {
  const value = options.account;
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !SUBJECT_TOKEN.test(value)) {
    throw new UsageError(`--account must be an account id (letters, digits, '-' and '_'), e.g. --account 01a21b44-bce2-7249-93ad-5000c6634146 (got '${String(value).slice(0, 80)}')`);
  }
  return value;
}
