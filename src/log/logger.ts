import { pino, type Logger } from 'pino';
import type { LogLevel } from '../config/config.ts';

export type { Logger };

/**
 * Structured JSON logs on stdout. Secrets never reach a log line: API keys and
 * authorization headers are redacted by path, whatever code logs them; URLs in messages
 * are masked where they are built (src/log/redact-url.ts).
 */
export function createLogger(level: LogLevel, base: Record<string, unknown> = {}): Logger {
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
  });
}
