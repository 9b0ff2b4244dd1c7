import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';

const REPO = new URL('../../', import.meta.url);

/**
 * .ci/run, the CI entry point: what its comments promise must exist. A comment naming a file
 * that is not in the repository (a baseline, a config) describes a check that does not run.
 */
describe('.ci/run', () => {
  it('names only files that exist in the repository, in its commands and its comments', () => {
    const text = readFileSync(new URL('.ci/run', REPO), 'utf8');
    const named = new Set(
      [...text.matchAll(/(?:^|[\s("'`])(?:\.\/)?((?:[\w.-]+\/)*[\w.-]+\.(?:sh|cjs|mjs|js|ts|json|ya?ml))\b/g)].map((match) => match[1]!),
    );
    expect([...named], 'no file names found: the pattern is broken').to.include('.dependency-cruiser.cjs');
    const missing = [...named].filter((file) => !existsSync(new URL(file, REPO)));
    expect(missing).to.deep.equal([]);
  });
});
