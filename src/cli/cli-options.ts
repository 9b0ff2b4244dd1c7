/**
 * The parsed command-line options every `adsagent` subcommand receives. Kept apart from
 * adsagent.ts (the entry point) so that subcommands do not import the entry point back.
 */
export type Options = Record<string, string | boolean | string[] | undefined>;
