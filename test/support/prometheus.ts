/**
 * The value of one series in a Prometheus text exposition (GET /metrics), or undefined when
 * the series is not there.
 *
 * @example
 * sampleOf(text, 'agent_runs_finished_total{outcome="succeeded",code=""}'); // 1
 */
export function sampleOf(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}
