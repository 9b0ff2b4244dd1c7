import { streams } from '../../src/event-store/subjects.ts';
import { unknownCommand, type Decider } from '../shared/decider.ts';
import { accountFold, type AccountState } from './account-state.ts';
import { decideCreateAccount, type CreateAccount } from './create-account.ts';
import { decideRecordPlatformChanges, type RecordPlatformChanges } from './record-platform-changes.ts';
import { decideCancelRun, decideClaimRun, decideFinishRun, decideStartRun, type CancelRun, type ClaimRun, type FinishRun, type StartRun } from './run-lifecycle.ts';

export type AccountCommand = CreateAccount | StartRun | CancelRun | ClaimRun | FinishRun | RecordPlatformChanges;

/**
 * An ad account with its runs: the run lifecycle is decided here (not on a run aggregate),
 * so "one active run per account" holds under any concurrency.
 *
 * @example
 * ```ts
 * await commands.handle(accountDecider, { type: 'StartRun', workspaceId, accountId, runId, brief, autoApply, keyId, scope, meta });
 * ```
 */
export const accountDecider: Decider<AccountCommand, AccountState> = {
  name: 'account',
  ...accountFold,
  decide(command, state) {
    switch (command.type) {
      case 'CreateAccount':
        return decideCreateAccount(command, state);
      case 'StartRun':
        return decideStartRun(command, state);
      case 'CancelRun':
        return decideCancelRun(command, state);
      case 'ClaimRun':
        return decideClaimRun(command, state);
      case 'FinishRun':
        return decideFinishRun(command, state);
      case 'RecordPlatformChanges':
        return decideRecordPlatformChanges(command, state);
      default:
        return unknownCommand(command);
    }
  },
  streamOf: (command) => streams.account(command.workspaceId, command.accountId),
  // POST /api/v1/runs: the account is usually idle and last written (created, or its previous
  // run queued) by this process, so its remembered state saves a NATS round trip per run.
  decideOnRemembered: (command) => command.type === 'StartRun',
};
