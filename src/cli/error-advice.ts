import { AppError, ErrorKind } from '../errors/app-error.ts';
import { toHttpProblem } from '../http/problems/problem-mapping.ts';

/** What an operator can do next about a refusal of each kind; every CLI error ends with one. */
const NEXT_STEP: Readonly<Record<ErrorKind, string>> = {
  [ErrorKind.NotFound]:
    'check the id: ids are printed by `adsagent workspace create`, `account create` and `key create`, and ' +
    '`adsagent events tail --type WorkspaceCreated` (or AccountCreated, ApiKeyIssued) lists earlier ones',
  [ErrorKind.Conflict]: 'nothing was changed; `adsagent events tail --follow` shows what the current state is',
  [ErrorKind.IllegalState]: 'nothing was changed; `adsagent events tail --follow` shows what the current state is',
  [ErrorKind.Validation]: 'fix the value named above and run the command again',
  [ErrorKind.Contention]: 'others changed the same thing at the same moment; run the command again',
  [ErrorKind.Unavailable]: 'a backing service is down; start it (`bash deploy/ensure-services.sh`) and run the command again',
  [ErrorKind.Unauthenticated]: 'check the key, or issue a new one with `adsagent key create`',
  [ErrorKind.Forbidden]: 'use a key or workspace allowed to do this',
  [ErrorKind.LimitExceeded]: 'wait for the limit to reset and run the command again',
};

/**
 * One line for a refusal of the domain (an AppError): what went wrong, then
 * what to do next. Null for any other error, which the caller reports as a fault.
 *
 * @example
 * refusalMessage(new WorkspaceNotFoundError('w1'))
 * // => 'Workspace not found: No workspace w1. Next: check the id: ...'
 */
export function refusalMessage(error: unknown): string | null {
  if (!(error instanceof AppError)) return null;
  // The problem catalogue's title is the same sentence an API client reads for this error.
  return `${toHttpProblem(error).title}: ${error.message} Next: ${NEXT_STEP[error.kind]}`;
}
