import { expect } from 'chai';
import { accountFold } from '../../commands/account/account-state.ts';
import { decideRecordPlatformChanges } from '../../commands/account/record-platform-changes.ts';
import type { DomainEvent, PlatformChangeObservedData } from '../../src/events/catalogue/index.ts';

const change = (id: string, time: string): PlatformChangeObservedData => ({
  change_id: id,
  change_date_time: time,
  resource_type: 'CAMPAIGN',
  resource_name: 'customers/1/campaigns/2',
  operation: 'UPDATE',
  client_type: 'GOOGLE_ADS_WEB_CLIENT',
  user_email: 'a@example.com',
  campaign_id: '2',
  changes: [],
  more_changes: 0,
});

describe('recording platform changes (decider)', () => {
  const meta = { actor: { kind: 'worker' as const, id: 'w' }, correlationId: 'c', now: new Date('2026-11-22T10:00:00Z') };
  const created = accountFold.evolve(accountFold.initialState(), {
    type: 'AccountCreated',
    workspace_id: 'ws',
    data: { name: 'A', platform: 'google-ads', sandbox_seed: null, google_ads: { customer_id: '1234567890', login_customer_id: null } },
  } as unknown as DomainEvent);
  const fold = (events: readonly unknown[]) => events.reduce((s, e) => accountFold.evolve(s as never, e as DomainEvent), created) as typeof created;

  it('given nothing recorded, when three changes arrive out of order, then all are recorded oldest first', () => {
    const events = decideRecordPlatformChanges(
      { type: 'RecordPlatformChanges', workspaceId: 'ws', accountId: 'acc', changes: [change('b', '2026-11-21 10:00:00.000000'), change('a', '2026-11-20 09:00:00.000000'), change('c', '2026-11-21 10:00:00.000000')], meta },
      created,
    );
    expect(events.map((e) => e.data.change_id)).to.deep.equal(['a', 'b', 'c']);
  });

  it('given changes recorded up to a time, when the import overlaps (same time, older), then only new ones are recorded', () => {
    const state = fold(decideRecordPlatformChanges({ type: 'RecordPlatformChanges', workspaceId: 'ws', accountId: 'acc', changes: [change('a', '2026-11-20 09:00:00.000000'), change('b', '2026-11-21 10:00:00.000000')], meta }, created));
    expect(state.platformChanges).to.deep.equal({ lastTime: '2026-11-21 10:00:00.000000', idsAtLastTime: ['b'] });
    const again = decideRecordPlatformChanges(
      { type: 'RecordPlatformChanges', workspaceId: 'ws', accountId: 'acc', changes: [change('a', '2026-11-20 09:00:00.000000'), change('b', '2026-11-21 10:00:00.000000'), change('c', '2026-11-21 10:00:00.000000'), change('d', '2026-11-22 08:00:00.000000')], meta },
      state,
    );
    expect(again.map((e) => e.data.change_id)).to.deep.equal(['c', 'd']);
    const latest = again.reduce((s, e) => accountFold.evolve(s, e as unknown as DomainEvent), state);
    expect(decideRecordPlatformChanges({ type: 'RecordPlatformChanges', workspaceId: 'ws', accountId: 'acc', changes: [change('c', '2026-11-21 10:00:00.000000'), change('d', '2026-11-22 08:00:00.000000')], meta }, latest)).to.deep.equal([]);
  });

  it('refuses an account of another workspace', () => {
    expect(() => decideRecordPlatformChanges({ type: 'RecordPlatformChanges', workspaceId: 'other', accountId: 'acc', changes: [], meta }, created)).to.throw(/acc/);
  });
});
