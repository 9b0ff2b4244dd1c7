import type { DateRange } from '../../platform/ads-platform.ts';
import { ToolInputError } from './agent-tool.ts';

const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;

function isoDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** The default window: the 30 full days before today (UTC). */
export function last30Days(today: Date): DateRange {
  const to = new Date(today.getTime() - 86_400_000);
  const from = new Date(to.getTime() - 29 * 86_400_000);
  return { from: isoDay(from), to: isoDay(to) };
}

/** A range from optional tool inputs, defaulting to the last 30 days; at most 366 days. */
export function rangeFrom(input: { date_from?: string; date_to?: string }, today: Date): DateRange {
  const fallback = last30Days(today);
  const from = input.date_from ?? fallback.from;
  const to = input.date_to ?? fallback.to;
  for (const value of [from, to]) {
    if (!ISO_DATE.test(value) || Number.isNaN(Date.parse(value))) throw new ToolInputError(`'${value}' is not a date (YYYY-MM-DD)`);
  }
  if (from > to) throw new ToolInputError('date_from is after date_to');
  if ((Date.parse(to) - Date.parse(from)) / 86_400_000 > 366) throw new ToolInputError('a date range may span at most 366 days');
  return { from, to };
}

export const DATE_RANGE_PROPERTIES = {
  date_from: { type: 'string', description: 'First day, YYYY-MM-DD. Default: 30 days ago.' },
  date_to: { type: 'string', description: 'Last day, YYYY-MM-DD. Default: yesterday.' },
} as const;
