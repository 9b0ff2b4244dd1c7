import type { GoogleAdsAccountLink, PlatformKind } from '../../src/events/catalogue/index.ts';
import { AlreadyExistsError } from '../errors.ts';
import { newEvent, type CommandMeta } from '../shared/new-event.ts';
import type { AccountState } from './account-state.ts';
import { streams } from '../../src/event-store/subjects.ts';

export interface CreateAccount {
  readonly type: 'CreateAccount';
  readonly workspaceId: string;
  readonly accountId: string;
  readonly name: string;
  readonly platform: PlatformKind;
  readonly sandboxSeed: number | null;
  readonly googleAds?: GoogleAdsAccountLink;
  readonly meta: CommandMeta;
}

export function decideCreateAccount(command: CreateAccount, state: AccountState) {
  if (state.exists) throw new AlreadyExistsError('Account', command.accountId);
  return [
    newEvent(
      'AccountCreated',
      {
        name: command.name,
        platform: command.platform,
        sandbox_seed: command.sandboxSeed,
        ...(command.googleAds ? { google_ads: command.googleAds } : {}),
      },
      streams.account(command.workspaceId, command.accountId),
      command.meta,
    ),
  ];
}
