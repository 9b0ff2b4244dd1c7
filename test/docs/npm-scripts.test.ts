import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';

const REPO = new URL('../../', import.meta.url);

const scripts = (JSON.parse(readFileSync(new URL('package.json', REPO), 'utf8')) as { scripts: Record<string, string> }).scripts;

/** README.md and every page of docs/. */
function documents(): { name: string; text: string }[] {
  const pages = readdirSync(new URL('docs/', REPO)).filter((file) => file.endsWith('.md')).map((file) => `docs/${file}`);
  return ['README.md', ...pages].map((name) => ({ name, text: readFileSync(new URL(name, REPO), 'utf8') }));
}

/**
 * The commands a reader is told to type must exist and must work on a fresh clone: `npm start`,
 * `npm test` and `npm run bench` install the npm dependencies and start NATS and Postgres when
 * they are missing (deploy/ensure-*.sh), as .ci/run does on a new machine.
 */
describe('npm scripts the docs name', () => {
  it('every `npm run NAME` in README.md and docs/ is a script of package.json', () => {
    const missing = documents().flatMap(({ name, text }) =>
      [...text.matchAll(/npm run ([a-z][a-z0-9:-]*)/g)].map((match) => match[1]!).filter((script) => !(script in scripts)).map((script) => `${name}: npm run ${script}`),
    );
    expect(missing).to.deep.equal([]);
  });

  for (const script of ['start', 'test', 'bench']) {
    it(`\`npm ${script === 'bench' ? 'run bench' : script}\` prepares a fresh machine before it runs`, () => {
      const command = scripts[script];
      expect(command, `package.json has no "${script}" script`).to.be.a('string');
      const steps = command!.split('&&').map((step) => step.trim());
      const preparation = steps.slice(0, 2);
      expect(preparation).to.deep.equal(['bash deploy/ensure-deps.sh', 'bash deploy/ensure-services.sh']);
    });
  }
});
