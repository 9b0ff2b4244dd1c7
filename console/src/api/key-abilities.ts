import { ApiProblem, apiPaths, apiRequest } from './api-client.ts';

/** An action id no action can have: approving it changes nothing. */
const NO_ACTION_ID = '00000000-0000-0000-0000-000000000000';

/**
 * Whether the signed-in key may approve and reject on this account.
 *
 * The public API has no endpoint that states a key's scope, so the console asks the approve
 * endpoint about an action that cannot exist: the scope check comes before the action
 * lookup, so a read key gets 403 `insufficient-scope` and a write key 404
 * `action-not-found`. Nothing is recorded either way.
 */
export async function canActOn(projectId: string, signal?: AbortSignal): Promise<boolean> {
  try {
    await apiRequest('POST', apiPaths.approve(projectId, NO_ACTION_ID), { body: {}, signal });
    return true;
  } catch (error) {
    if (error instanceof ApiProblem && error.status === 403) return false;
    if (error instanceof ApiProblem && error.status === 404 && error.slug === 'action-not-found') return true;
    throw error;
  }
}
