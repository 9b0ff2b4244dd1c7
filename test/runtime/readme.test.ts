import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { CONFIG_VARIABLES } from '../../src/config/config.ts';

describe('README', () => {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

  it('documents exactly the configuration variables the service reads, with their defaults', () => {
    const rows = [...readme.matchAll(/^\| `([A-Z_]+)` \| (.+?) \| .+ \|$/gm)].map((m) => ({ name: m[1], default: m[2] }));
    expect(rows.map((r) => r.name)).to.deep.equal(CONFIG_VARIABLES.map((v) => v.name));
    for (const variable of CONFIG_VARIABLES) {
      const row = rows.find((r) => r.name === variable.name)!;
      expect(row.default).to.equal(variable.default ? `\`${variable.default}\`` : '(unset)');
    }
  });

  it('gives the start and test commands', () => {
    expect(readme).to.include('npm start').and.include('npm test');
  });
});
