import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from '../config/config.ts';

export type { Logger };

/**
 * Structured JSON logs on stdout. Secrets never reach a log line: API keys and
 * authorization headers are redacted by path, whatever code logs them; URLs in messages
 * are masked where they are built (src/log/redact-url.ts).
 */
export function createLogger(level: LogLevel, base: Record<string, unknown> = {}, destination?: DestinationStream): Logger {
  return pino({
    level,
    base: { service: 'ads-agent-runs', ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        'authorization', 'key', 'apiKey', 'headers.authorization', 'req.headers.authorization', '*.authorization', '*.key', '*.apiKey',
        // NATS and Postgres credentials, should a config or connection options object be logged.
        'password', 'pass', 'token', 'natsCredentials', '*.password', '*.pass', '*.token', '*.natsCredentials',
      ],
      censor: '[redacted]',
    },
    formatters: { level: (label) => ({ level: label }) },
  }, destination ?? (level === 'silent' ? undefined : asynchronousStdout()));
}

/**
 * Stdout written off the request path: pino's default destination writes every line with a
 * blocking system call, one per request for the access log. Lines are written as soon as the
 * previous write finished (no minimum batch, so nothing waits for more lines), and pino flushes
 * what is left when the process exits.
 */
function asynchronousStdout(): DestinationStream {
  return pino.destination({ dest: 1, sync: false, minLength: 0 });
}
