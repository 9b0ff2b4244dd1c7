import { performance } from 'node:perf_hooks';

/**
 * Timing and printing helpers shared by every benchmark. Each result line carries the
 * baseline measured in the same run and their ratio, because absolute figures on a small,
 * shared machine mean little on their own:
 *
 *   append (OCC, sync)             3,900 ev/s   baseline raw js.publish        8,100 ev/s   ratio 0.48
 */

const NAME_WIDTH = 40;
const VALUE_WIDTH = 10;
const BASELINE_NAME_WIDTH = 34;

export function now(): number {
  return performance.now();
}

export interface Timed<T> {
  readonly value: T;
  readonly ms: number;
}

/** Runs `work` once and returns its result with the wall time it took. */
export async function timed<T>(work: () => Promise<T>): Promise<Timed<T>> {
  const started = now();
  const value = await work();
  return { value, ms: now() - started };
}

/** Items per second of `count` items done in `ms` milliseconds. */
export function perSecond(count: number, ms: number): number {
  return ms > 0 ? (count * 1000) / ms : Infinity;
}

/** Nearest-rank percentile (p in 0..100) of a series; NaN when the series is empty. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export interface LatencySummary {
  readonly count: number;
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
  readonly max: number;
}

export function summarize(samples: readonly number[]): LatencySummary {
  const total = samples.reduce((sum, v) => sum + v, 0);
  return {
    count: samples.length,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    mean: samples.length > 0 ? total / samples.length : NaN,
    max: samples.length > 0 ? Math.max(...samples) : NaN,
  };
}

/** 12345.6 → "12,346"; small values keep a few significant digits (0.84, 12.3). */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : 2;
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function formatRatio(value: number): string {
  return Number.isFinite(value) ? value.toFixed(2) : String(value);
}

function measure(value: number, unit: string, width = VALUE_WIDTH): string {
  return `${formatNumber(value).padStart(width)} ${unit.padEnd(4)}`;
}

/** A banner line before a benchmark or one of its sections. */
export function header(title: string): void {
  console.log('');
  console.log(`== ${title} ${'='.repeat(Math.max(3, 100 - title.length))}`);
}

export function section(title: string): void {
  console.log(`-- ${title}`);
}

/** A free-form line under the current section (setup figures, notes). */
export function note(text: string): void {
  console.log(`   ${text}`);
}

export interface Comparison {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  readonly baselineName: string;
  readonly baselineValue: number;
  /** Unit of the baseline; defaults to `unit`. */
  readonly baselineUnit?: string;
  /** Text after the ratio, e.g. "(big/new)". */
  readonly ratioNote?: string;
}

/**
 * Prints one aligned result line: name, value, unit, baseline name, baseline value, and
 * ratio = value / baseline. For throughputs a ratio under 1 is the cost of the measured
 * path relative to the baseline; for latencies a ratio over 1 is the slowdown.
 */
export function compare(result: Comparison): number {
  const ratio = result.value / result.baselineValue;
  const line = [
    result.name.padEnd(NAME_WIDTH),
    measure(result.value, result.unit),
    '  baseline ',
    result.baselineName.padEnd(BASELINE_NAME_WIDTH),
    measure(result.baselineValue, result.baselineUnit ?? result.unit),
    '  ratio ',
    formatRatio(ratio),
    result.ratioNote ? ` ${result.ratioNote}` : '',
  ].join('');
  console.log(line);
  return ratio;
}

/** Throughput line: `count` items in `ms` vs `baselineCount` items in `baselineMs`. */
export function compareThroughput(
  name: string,
  count: number,
  ms: number,
  baselineName: string,
  baselineCount: number,
  baselineMs: number,
  unit = 'ev/s',
): number {
  return compare({ name, value: perSecond(count, ms), unit, baselineName, baselineValue: perSecond(baselineCount, baselineMs) });
}

/**
 * Two lines for a latency series against its baseline series: p50 and p99 (milliseconds),
 * each with its ratio.
 */
export function compareLatency(
  name: string,
  samples: readonly number[],
  baselineName: string,
  baselineSamples: readonly number[],
  ratioNote?: string,
): { p50: number; p99: number } {
  const subject = summarize(samples);
  const baseline = summarize(baselineSamples);
  const n = `n=${subject.count}`;
  const bn = `n=${baseline.count}`;
  const p50 = compare({
    name: `${name} p50 (${n})`,
    value: subject.p50,
    unit: 'ms',
    baselineName: `${baselineName} p50 (${bn})`,
    baselineValue: baseline.p50,
    ratioNote,
  });
  const p99 = compare({
    name: `${name} p99`,
    value: subject.p99,
    unit: 'ms',
    baselineName: `${baselineName} p99`,
    baselineValue: baseline.p99,
    ratioNote,
  });
  return { p50, p99 };
}

/** A single figure without a baseline (setup costs, one-off measurements). */
export function figure(name: string, value: number, unit: string, detail = ''): void {
  console.log(`${name.padEnd(NAME_WIDTH)}${measure(value, unit)}${detail ? `  ${detail}` : ''}`.trimEnd());
}
