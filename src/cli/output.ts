/** Prints a command's result: one JSON document with --json, readable lines otherwise. */
export function printResult(json: boolean, value: Record<string, unknown>, human: string): void {
  process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${human}\n`);
}

export function warn(message: string): void {
  process.stderr.write(`adsagent: ${message}\n`);
}

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
