#!/usr/bin/env node
// The operator CLI. Node (24+) runs the TypeScript sources directly by stripping their
// types, like `npm start` does; there is no build step.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  process.stderr.write(
    `adsagent: needs Node 24 or later to run its TypeScript sources, this is Node ${process.versions.node}; ` +
      'run it as `npm run adsagent -- <command>` (npm uses the project\'s own Node 24 from node_modules), or install Node 24\n',
  );
  process.exit(2);
}
// Compiled modules are cached on disk (see src/main.ts): each command starts in about half the time.
(await import('node:module')).enableCompileCache();
await import('../src/cli/adsagent.ts');
