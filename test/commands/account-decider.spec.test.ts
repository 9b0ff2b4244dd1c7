import { expect } from 'chai';
import { accountDecider, type AccountCommand } from '../../commands/account/account-decider.ts';
import { platformAccountOf } from '../../commands/account/platform-account.ts';
import { AlreadyExistsError } from '../../commands/errors.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

/** The account decider's own commands; its run lifecycle is in run-lifecycle.spec.test.ts, platform changes in record-platform-changes.spec.test.ts. */
const meta = { actor: { kind: 'operator' as const, id: 'op' }, correlationId: 'c' };
const googleAds = { customer_id: '1234567890', login_customer_id: null };
const create = (overrides: Partial<Extract<AccountCommand, { type: 'CreateAccount' }>> = {}): AccountCommand => ({
  type: 'CreateAccount',
  workspaceId: 'ws',
  accountId: 'acc',
  name: 'Acme',
  platform: 'sandbox',
  sandboxSeed: 7,
  meta,
  ...overrides,
});
const fold = (events: ReturnType<typeof recorded>[]) => events.reduce(accountDecider.evolve, accountDecider.initialState());

describe('account decider (specs)', () => {
  const spec = deciderSpec(accountDecider);
  it('creates a sandbox account with its seed', () => spec.given([]).when(create()).then([{ type: 'AccountCreated', data: { name: 'Acme', platform: 'sandbox', sandbox_seed: 7 } }]));
  it('creates a Google Ads account with its customer', () =>
    spec.given([]).when(create({ platform: 'google-ads', sandboxSeed: null, googleAds })).then([{ type: 'AccountCreated', data: { google_ads: googleAds } }]));
  it('refuses to create an account twice', () => spec.given([recorded('AccountCreated', { name: 'A', platform: 'none', sandbox_seed: null })]).when(create()).thenThrows(AlreadyExistsError));
  it('decides every command on the account’s subject', () => {
    expect(accountDecider.streamOf(create())).to.deep.equal({ workspaceId: 'ws', accountId: 'acc', aggregate: { type: 'account', id: 'acc' } });
    expect(accountDecider.streamOf({ type: 'CancelRun', workspaceId: 'ws', accountId: 'acc', runId: 'r', knownStatus: 'queued', meta })).to.deep.include({
      aggregate: { type: 'account', id: 'acc' },
    });
  });

  describe('the connected-account rule', () => {
    it('a sandbox account is addressed on the sandbox platform', () => {
      const state = fold([recorded('AccountCreated', { name: 'Acme', platform: 'sandbox', sandbox_seed: 7 })]);
      expect(platformAccountOf('acc', state)).to.deep.equal({ accountId: 'acc', name: 'Acme', platform: 'sandbox', sandboxSeed: 7, googleAds: null });
    });
    it('an account with no platform, or no account at all, is not connected', () => {
      expect(platformAccountOf('acc', fold([recorded('AccountCreated', { name: 'A', platform: 'none', sandbox_seed: null })]))).to.equal(null);
      expect(platformAccountOf('acc', fold([]))).to.equal(null);
    });
  });
});
