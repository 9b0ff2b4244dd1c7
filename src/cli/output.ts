/** Prints a command's result: one JSON document with --json, readable lines otherwise. */
export function printResult(json: boolean, value: Record<string, unknown>, human: string): void {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${human}\n`);
}

export function warn(message: string): void {
  process.stderr.write(`adsagent: ${message}\n`);
}

/** The command line is wrong (exit 2, usage printed): the message says what to type instead. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The command was right but could not be done (exit 1): the message says what to do next. */
export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliError';
  }
}
