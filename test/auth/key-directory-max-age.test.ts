import { expect } from 'chai';
import { sql } from 'kysely';
import { KeyDirectory, type KeyLookupSource } from '../../src/auth/key-directory.ts';
import { identityFreshnessOf } from '../../src/runtime/identity-freshness.ts';
import { ReadBarrier } from '../../src/runtime/read-barrier.ts';
import { eventually } from '../support/eventually.ts';
import { startTestService, type TestService, type TestTenant } from '../support/test-service.ts';

/**
 * A cached key is read again after keyMaxAgeMs: the backstop for an eviction that never
 * arrives (docs/api.md, "Key lookups"). The missed eviction is made by revoking the row in the
 * read model directly, with no ApiKeyRevoked on the wire.
 */
describe('key directory: the age limit of a cached key', function () {
  this.timeout(30_000);
  let svc: TestService;
  let tenant: TestTenant;

  before(async () => {
    svc = await startTestService('key-max-age', { ROLES: 'http,projectors' });
    tenant = await svc.tenant('max-age');
  });
  after(async () => {
    await svc?.stop();
  });

  it('answers a cached key from memory until its age limit, then reads the row again and sees a revocation it never heard', async () => {
    const infra = svc.service.infrastructure;
    let clock = Date.now();
    const lookups: KeyLookupSource[] = [];
    const keys = new KeyDirectory(infra.database.db, { now: () => clock, keyMaxAgeMs: 60_000, onLookup: (source) => lookups.push(source) });
    keys.watch(infra.nc, infra.subjects.filter('*', '_', 'key'), identityFreshnessOf(infra.store, infra.subjects, new ReadBarrier(infra.store, infra.database.db)));
    const keyId = tenant.keyIds.read;
    try {
      // Cached once the read model is known to be current (at once here: the projector keeps up).
      await eventually(async () => {
        await keys.find(keyId);
        expect(keys.cached(keyId), 'cached').to.not.equal(undefined);
      }, 5_000, 50);
      await sql`update ${sql.table(`${svc.config.databaseSchema}.api_keys`)} set revoked_at = now() where id = ${keyId}`.execute(infra.database.db);

      clock += 59_000;
      const young = await keys.find(keyId);
      expect(young?.revoked, 'within the age limit: from memory').to.equal(false);
      expect(lookups.at(-1)).to.equal('cache');

      clock += 2_000;
      const old = await keys.find(keyId);
      expect(lookups.at(-1), 'past the age limit: read again').to.equal('database');
      expect(old?.revoked, 'the revocation in the row').to.equal(true);
      expect(keys.cached(keyId), 'a revoked key is not cached').to.equal(undefined);
    } finally {
      keys.stop();
    }
  });
});
