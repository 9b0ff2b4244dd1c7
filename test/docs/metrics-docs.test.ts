import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { ServiceMetrics } from '../../src/metrics/service-metrics.ts';

/** The `GET /metrics` bullet of docs/operations.md, "Health and metrics": what an operator scrapes. */
function documentedMetrics(): Map<string, string[]> {
  const text = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  const section = text.slice(text.indexOf('## Health and metrics'));
  const bullet = section.slice(section.indexOf('- `GET /metrics`'), section.indexOf('\n- Logs:'));
  const documented = new Map<string, string[]>();
  for (const match of bullet.matchAll(/`([a-z][a-z0-9_]*)(?:\{([a-z_,]*)\})?`/g)) {
    // Label values and words in backticks are not metric names: names have an underscore and a unit or kind at the end.
    if (!/_(total|seconds|sequence|events|stalled|held)$/.test(match[1]!)) continue;
    // A later mention without labels (`… are in \`name\` too`) does not undo the labelled one.
    if (match[2] !== undefined || !documented.has(match[1]!)) documented.set(match[1]!, match[2] ? match[2].split(',') : []);
  }
  return documented;
}

/** Every metric the service registers besides prom-client's process defaults, with its label names. */
function registeredMetrics(): Map<string, string[]> {
  // As a process with every role registers them (the lease metrics only exist with the projectors role).
  const metrics = new ServiceMetrics({ projectors: () => [], streamHead: async () => 0, projectorCopy: () => undefined });
  const registered = new Map<string, string[]>();
  for (const metric of metrics.registry.getMetricsAsArray()) {
    const { name, labelNames } = metric as unknown as { name: string; labelNames?: readonly string[] };
    if (name.startsWith('process_') || name.startsWith('nodejs_')) continue;
    registered.set(name, [...(labelNames ?? [])]);
  }
  return registered;
}

describe('docs/operations.md lists exactly the metrics the service exports', () => {
  it('names every registered metric with its labels, and nothing that is not registered', () => {
    const documented = documentedMetrics();
    const registered = registeredMetrics();
    expect(registered.size, 'the registry holds the service metrics').to.be.greaterThan(5);
    expect([...documented.keys()].sort()).to.deep.equal([...registered.keys()].sort());
    for (const [name, labels] of registered) expect(documented.get(name)!.sort(), name).to.deep.equal([...labels].sort());
  });
});
