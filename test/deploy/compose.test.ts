import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { readPrivateKeyFile } from '../../src/events/signing/signing-keys.ts';

const run = promisify(execFile);
const deploy = (file: string) => fileURLToPath(new URL(`../../deploy/${file}`, import.meta.url));

// Docker is not needed: these check the files docker compose reads. YAML is parsed with the
// js-yaml that mocha itself depends on (mocha reads .mocharc.yml with it); the project has no
// YAML parser of its own.
const yaml = createRequire(import.meta.resolve('mocha'))('js-yaml') as { load(text: string): unknown };

interface ComposeService {
  image?: string;
  user?: string;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
}
interface Compose {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

const compose = yaml.load(readFileSync(deploy('compose.yaml'), 'utf8')) as Compose;

/** The named volume (a key of the top-level `volumes`) mounted over `file`'s directory, and that mount's options. */
function namedVolumeHolding(service: ComposeService, file: string): { volume: string; target: string; options: string } | undefined {
  for (const entry of service.volumes ?? []) {
    const [volume, target, options = ''] = entry.split(':');
    if (!volume || !target || !(volume in (compose.volumes ?? {}))) continue;
    if (file.startsWith(`${target.replace(/\/$/, '')}/`)) return { volume, target, options };
  }
  return undefined;
}

/**
 * deploy/compose.yaml and deploy/Dockerfile: the service's event signing key lives on a named
 * volume, not in the container (which every `up --build` replaces: a new key would leave every
 * stored event signed by an unknown key), and is there before the service starts (the service
 * refuses to start when EVENT_SIGNING_KEY_FILE names a missing file).
 */
describe('deploy/compose.yaml: the event signing key', () => {
  const service = compose.services.service!;
  const keyFile = service.environment?.EVENT_SIGNING_KEY_FILE;

  it('sets EVENT_SIGNING_KEY_FILE for the service to an absolute path on a named volume', () => {
    expect(keyFile, 'services.service.environment.EVENT_SIGNING_KEY_FILE').to.be.a('string').and.match(/^\//);
    const mount = namedVolumeHolding(service, keyFile!);
    expect(mount, `a named volume mounted over ${posix.dirname(keyFile!)} in services.service.volumes`).to.not.equal(undefined);
  });

  it('has the key made on that volume, at that path, by a one-shot service the service waits for', () => {
    const maker = compose.services['signing-key'];
    expect(maker, 'services.signing-key').to.not.equal(undefined);
    expect(maker!.environment?.EVENT_SIGNING_KEY_FILE).to.equal(keyFile);
    const made = namedVolumeHolding(maker!, keyFile!);
    const used = namedVolumeHolding(service, keyFile!);
    expect(made?.volume).to.equal(used?.volume);
    expect(made?.target).to.equal(used?.target);
    expect(made?.options, 'the maker writes the volume').not.to.include('ro');
    expect(service.depends_on?.['signing-key']?.condition).to.equal('service_completed_successfully');
  });

  it('makes an Ed25519 key the service reads, owned by node (1000) with mode 0600, and keeps it on the next start', async function () {
    // The maker's own script, run here with node instead of in its container (chown needs root).
    if (process.getuid?.() !== 0) this.skip();
    const maker = compose.services['signing-key']!;
    const [node, flag, script] = maker.command ?? [];
    expect([node, flag]).to.deep.equal(['node', '-e']);
    // docker compose would substitute a dollar sign; the script is run here exactly as written.
    expect(script).to.be.a('string').and.not.include('$');

    const root = mkdtempSync(join(tmpdir(), 'compose-signing-key-'));
    try {
      const file = join(root, 'volume', 'event-signing-key.pem');
      const env = { ...process.env, EVENT_SIGNING_KEY_FILE: file };
      await run('mkdir', [dirname(file)]); // the empty volume, root's as docker makes it
      const first = await run(process.execPath, ['-e', script!], { env });
      expect(first.stdout).to.include(`generated a new event signing key in ${file}`);
      const key = readPrivateKeyFile(file);
      expect(key.asymmetricKeyType).to.equal('ed25519');
      const pem = readFileSync(file, 'utf8');
      for (const path of [file, dirname(file)]) {
        expect(statSync(path).uid, path).to.equal(1000);
        expect(statSync(path).gid, path).to.equal(1000);
      }
      expect(statSync(file).mode & 0o777).to.equal(0o600);
      expect(statSync(dirname(file)).mode & 0o777).to.equal(0o700);

      const second = await run(process.execPath, ['-e', script!], { env });
      expect(second.stdout).to.include(`keeping the event signing key in ${file}`);
      expect(readFileSync(file, 'utf8')).to.equal(pem);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('Dockerfile: the key\'s directory belongs to node before the image switches to it, and EVENT_SIGNING_KEY_FILE names the same file', () => {
    const dockerfile = readFileSync(deploy('Dockerfile'), 'utf8');
    const directory = posix.dirname(keyFile!);
    const chown = dockerfile.search(new RegExp(`chown node:node ${directory.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\b`));
    const user = dockerfile.search(/^USER node$/m);
    expect(chown, `RUN ... chown node:node ${directory}`).to.be.at.least(0);
    expect(user).to.be.above(chown);
    expect(dockerfile).to.match(new RegExp(`EVENT_SIGNING_KEY_FILE=${keyFile!.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}(\\s|$)`));
  });
});
