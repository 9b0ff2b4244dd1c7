import { pino, type Logger } from 'pino';
import type { LogLevel } from '../config/config.ts';

export type { Logger };

/**
 * Structured JSON logs on stdout. Secrets never reach a log line: API keys and
 * authorization headers are redacted by path, whatever code logs them.
 */
export function createLogger(level: LogLevel, base: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { service: 'ads-agent-runs', ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['authorization', 'key', 'apiKey', 'headers.authorization', 'req.headers.authorization', '*.authorization', '*.key', '*.apiKey'],
      censor: '[redacted]',
    },
    formatters: { level: (label) => ({ level: label }) },
  });
}
