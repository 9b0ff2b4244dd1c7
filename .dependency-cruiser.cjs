// Which way imports may go (issue #13, item 6), checked by `npm run lint:deps` in CI.
//
// The domain decides and folds; it must be testable without a server. So it imports
// nothing from the HTTP edge, the NATS adapter or Postgres. Type-only imports count
// too (see parser below): a type imported from a module that drags in
// @nats-io or kysely ties the domain to that module just the same; the interface it
// needs belongs in a module that is itself pure.
//
// There is no baseline of tolerated violations: the rule holds for the whole tree.

// Without swc, dependency-cruiser falls back to a JavaScript parser that misses most of our
// TypeScript imports and would pass without checking anything: fail loudly instead.
try {
  require.resolve('@swc/core');
} catch {
  throw new Error('@swc/core is not installed (a devDependency): run `npm ci`, then `npm run lint:deps` again');
}

/** The domain: where commands are decided and where events are folded without I/O. */
const DOMAIN = [
  '^commands/',
  '^src/policy/',
  // The pure folds of projections/: functions from (state, event) to state, no I/O.
  // Everything else in projections/ writes or reads Postgres and is not domain:
  //   projections/*/*-projection.ts (apply events in a transaction), projections/*/*-view.ts
  //   (queries), projections/*/*-tables.ts (kysely table types), projections/runtime/ (projector).
  '^projections/runs/fold-runs\\.ts$',
  '^projections/runs/run-record\\.ts$', // the row shapes the fold works on, free of kysely types
];

/** The NATS adapter: the JetStream client and our modules that wrap it. */
const NATS_ADAPTER = [
  '^node_modules/@nats-io/',
  // Not src/event-store/event-store.ts: it is the EventStore interface alone, which the domain
  // may import; the JetStream class is src/event-store/jetstream-event-store.ts.
  '^src/event-store/nats-connection\\.ts$',
  '^src/event-store/snapshot-store\\.ts$', // JetStream KV
  '^src/event-store/stream-setup\\.ts$',
  '^src/event-store/jetstream[^/]*\\.ts$', // the concrete JetStream store
];

/** Postgres: the driver, the query builder and our database module. */
const POSTGRES = ['^node_modules/(pg|pg-[^/]+|kysely)/', '^src/db/'];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'domain-not-to-http',
      comment: 'The domain knows nothing of HTTP: statuses, headers and URLs are decided in src/http (errors by kind, mapped at the edge).',
      severity: 'error',
      from: { path: DOMAIN },
      to: { path: '^src/http/' },
    },
    {
      name: 'domain-not-to-nats',
      comment: 'The domain talks to an event store interface, never to JetStream: the in-memory store must be able to stand in.',
      severity: 'error',
      from: { path: DOMAIN },
      to: { path: NATS_ADAPTER },
    },
    {
      name: 'domain-not-to-postgres',
      comment: 'Deciders and pure folds do no I/O; read models are queried outside the domain.',
      severity: 'error',
      from: { path: DOMAIN },
      to: { path: POSTGRES },
    },
    {
      name: 'domain-not-to-infrastructure-transitively',
      comment:
        'Not through a detour either: a domain module that imports a "pure" module which itself imports HTTP, NATS or Postgres ' +
        'still cannot run without them. (An interface imported with `import type` is fine when its module is pure.)',
      severity: 'error',
      from: { path: DOMAIN },
      to: { path: ['^src/http/', '^node_modules/@nats-io/', ...POSTGRES], reachable: true },
    },
    {
      name: 'http-only-from-wiring',
      comment: 'Only the HTTP edge itself, the runtime that wires the service together, and tests and benchmarks may import src/http.',
      severity: 'error',
      from: { pathNot: ['^src/http/', '^src/runtime/', '^test/', '^bench/', '^scripts/'] },
      to: { path: '^src/http/', pathNot: '^src/http/problems/problem-(catalogue|mapping)\\.ts$' },
    },
    {
      // The operator CLI is an edge too: it words a refusal with the same title an API client
      // reads (the problem catalogue), and nothing else of the HTTP layer.
      name: 'cli-only-problem-titles-from-http',
      severity: 'error',
      from: { pathNot: ['^src/http/', '^src/runtime/', '^src/cli/', '^test/', '^bench/', '^scripts/'] },
      to: { path: '^src/http/problems/problem-(catalogue|mapping)\\.ts$' },
    },
    {
      name: 'no-circular',
      comment: 'An import cycle makes load order matter and hides which module owns what.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    // Our code, its tests, scripts and benchmarks; node_modules is seen only as a target.
    includeOnly: ['^(src|commands|projections|test|scripts|bench|bin|examples)/', '^node_modules/'],
    doNotFollow: { path: '^node_modules/' },
    // `import type` counts as a dependency: the rule is about modules, not only about values.
    // The project's compiler is TypeScript 7, which has no JavaScript API dependency-cruiser
    // can use yet, so sources are parsed with swc; swc reports type-only imports always
    // (checked: projections/runs/fold-runs.ts -> kysely is an `import type` and is reported).
    // tsPreCompilationDeps would ask for the tsc parser (TypeScript < 7) and only warn here.
    parser: 'swc',
    tsPreCompilationDeps: false,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'],
    },
    moduleSystems: ['es6', 'cjs'],
  },
};
