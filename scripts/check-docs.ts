/**
 * `npm run docs:check`: regenerates docs/events.md and docs/asyncapi.yaml in memory and
 * exits 1, naming the first differing line, when a file in the repository is stale or
 * missing. CI runs it. `--root DIR` checks another checkout (the tests use it).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ASYNCAPI_PATH, renderAsyncApi } from './generate-asyncapi.ts';
import { EVENT_DOCS_PATH, renderEventDocs } from './generate-event-docs.ts';
import { isMainModule } from './lib/main-module.ts';
import { REPO_ROOT } from './lib/paths.ts';

export interface GeneratedDoc {
  /** Relative to the repository root. */
  readonly path: string;
  readonly render: () => string;
}

export const GENERATED_DOCS: readonly GeneratedDoc[] = [
  { path: EVENT_DOCS_PATH, render: renderEventDocs },
  { path: ASYNCAPI_PATH, render: renderAsyncApi },
];

/** Null when `actual` is what the generator gives, otherwise an explanation naming the first differing line. */
export function describeDifference(path: string, expected: string, actual: string | null): string | null {
  if (actual === null) return `${path} does not exist.`;
  if (actual === expected) return null;
  const want = expected.split('\n');
  const have = actual.split('\n');
  let line = 0;
  while (line < want.length && line < have.length && want[line] === have[line]) line++;
  const show = (text: string | undefined) => (text === undefined ? '(end of file)' : JSON.stringify(text));
  return `${path} is out of date: first difference at line ${line + 1}\n  generated: ${show(want[line])}\n  in file:   ${show(have[line])}`;
}

/** Every problem of the generated docs under `root`; empty when they are up to date. */
export function checkGeneratedDocs(root: string = REPO_ROOT): string[] {
  const problems: string[] = [];
  for (const doc of GENERATED_DOCS) {
    const file = join(root, doc.path);
    const problem = describeDifference(doc.path, doc.render(), existsSync(file) ? readFileSync(file, 'utf8') : null);
    if (problem) problems.push(problem);
  }
  return problems;
}

if (isMainModule(import.meta.url)) {
  const { values } = parseArgs({ options: { root: { type: 'string' } } });
  const problems = checkGeneratedDocs(values.root ?? REPO_ROOT);
  if (problems.length > 0) {
    console.error(problems.join('\n\n'));
    console.error(
      '\ndocs:check failed: the event catalogue (src/events/catalogue/) and the generated docs disagree.\n' +
        'Run `npm run docs:events` and commit docs/events.md and docs/asyncapi.yaml.',
    );
    process.exit(1);
  }
  console.log(`docs up to date: ${GENERATED_DOCS.map((d) => d.path).join(', ')}`);
}
