import { expect } from 'chai';
import { setTimeout as delay } from 'node:timers/promises';
import { generateApiKey } from '../../src/auth/api-key.ts';
import type { Config } from '../../src/config/config.ts';
import { createLogger } from '../../src/log/logger.ts';
import { createWorkspace, issueKey, revokeKey } from '../../src/operator/operator-commands.ts';
import { openInfrastructure, type Infrastructure } from '../../src/runtime/infrastructure.ts';
import { startService, type RunningService } from '../../src/runtime/service.ts';
import { eventually } from '../support/eventually.ts';
import { dropIsolated, isolatedConfig } from '../support/isolation.ts';

/**
 * An HTTP process that starts while the identity read model is behind the stream (its
 * projector down, restarting or rebuilding) finds no row for a key issued before it
 * subscribed, and sees no ApiKeyIssued on the wire for it. That "not found" must not be
 * remembered: the key has to work as soon as the projector reaches it, not a whole
 * unknown-key TTL (60 s) later.
 */
describe('API keys while the identity read model is behind', function () {
  this.timeout(60_000);

  let config: Config;
  let issuer: Infrastructure | undefined;
  const services: RunningService[] = [];

  before(async () => {
    config = isolatedConfig('key-read-behind', { ROLES: 'http' });
    issuer = await openInfrastructure(config, 'test-key-issuer', { notice: () => undefined });
  });

  after(async () => {
    for (const service of services.reverse()) await service.stop();
    await issuer?.close();
    await dropIsolated(config);
  });

  const get = (path: string, key: string): Promise<Response> =>
    fetch(`${services[0]!.http!.url}${path}`, { headers: { authorization: `Bearer ${key}` } });

  async function lookups(adminKey: string): Promise<Record<string, number>> {
    const text = await (await get('/metrics', adminKey)).text();
    const counts: Record<string, number> = {};
    for (const match of text.matchAll(/^api_key_lookups_total\{source="([a-z_]+)"\} (\d+)/gm)) counts[match[1]!] = Number(match[2]);
    return counts;
  }

  it('accepts a key issued before the process started as soon as the projector reaches it, caches keys the read model fully holds, and only then remembers unknown ids', async () => {
    const logger = createLogger('silent');
    // The read model exists (a projector ran and made the workspace visible) and then falls behind: its projector stops.
    const firstProjector = await startService({ ...config, roles: ['projectors'] }, logger);
    const workspaceId = (await createWorkspace(issuer!, 'behind')).value.id;
    const [early, doomed] = await Promise.all([issueKey(issuer!, workspaceId, 'admin', 'early'), issueKey(issuer!, workspaceId, 'read', 'doomed')]);
    expect(early.visible).to.equal(true);
    await firstProjector.stop();
    // Issued while no projector runs and before the HTTP process subscribes: it sees no ApiKeyIssued for them.
    // Meanwhile one key is revoked twice (an operator retrying): the call that finds the revocation
    // stored appends nothing, and must not say it is visible while the read model is behind.
    const [read, admin, revocations] = await Promise.all([
      issueKey(issuer!, workspaceId, 'read', 'read'),
      issueKey(issuer!, workspaceId, 'admin', 'admin'),
      Promise.all([revokeKey(issuer!, doomed.value.id), delay(300).then(() => revokeKey(issuer!, doomed.value.id))]),
    ]);
    expect(read.visible, 'the read model is behind').to.equal(false);
    expect(revocations.map((revocation) => revocation.visible), 'both revocations').to.deep.equal([false, false]);

    services.push(await startService(config, logger));
    for (let attempt = 0; attempt < 3; attempt++) {
      const early = await get('/api/v1/accounts', read.value.key);
      expect(early.status, 'the read model does not hold the key yet').to.equal(401);
    }

    // A key whose every event the read model holds is cached all the same, the read model being
    // behind elsewhere: its second request is answered from memory (and charges no client address).
    await get('/api/v1/accounts', early.value.key);
    const beforeCached = await lookups(early.value.key);
    expect((await get('/api/v1/accounts', early.value.key)).status).to.equal(200);
    const afterCached = await lookups(early.value.key);
    expect((afterCached.cache ?? 0) - (beforeCached.cache ?? 0), 'answered from memory').to.be.at.least(1);
    expect(afterCached.database ?? 0, 'no database lookup').to.equal(beforeCached.database ?? 0);

    const projectorsStarted = Date.now();
    services.push(await startService({ ...config, roles: ['projectors'] }, logger));
    await eventually(async () => expect((await get('/api/v1/accounts', read.value.key)).status).to.equal(200), 10_000, 50);
    // Well inside the 60 s an unknown entry would have been kept.
    expect(Date.now() - projectorsStarted).to.be.below(10_000);

    // Caught up, the process remembers a made-up id again: the second request is answered from memory.
    const madeUp = generateApiKey().key;
    await eventually(async () => {
      expect((await get('/api/v1/accounts', madeUp)).status).to.equal(401);
      const before = await lookups(admin.value.key);
      expect((await get('/api/v1/accounts', madeUp)).status).to.equal(401);
      const after = await lookups(admin.value.key);
      expect((after.unknown_cache ?? 0) - (before.unknown_cache ?? 0)).to.equal(1);
      expect(after.database ?? 0).to.equal(before.database ?? 0);
    }, 5_000, 100);
  });
});
