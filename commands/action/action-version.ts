import { createHash } from 'node:crypto';
import { canonicalJson } from '../../src/events/canonical-json.ts';

/** What an action's version is computed from: the same three facts on the read side (the approvals row) and the decision side (ActionState). */
export interface VersionFacts {
  readonly status: string;
  readonly params: Record<string, unknown>;
  /** Time of the last event that changed what the approvals view shows (every action event but heartbeats). */
  readonly changedAt: string | Date | null;
}

/**
 * The version of an action as a person sees it in the approvals view: an opaque string that
 * changes whenever the action changes (edited, approved, applied, returned to the queue,
 * rejected). Approve and reject take it back as `expected_version` and refuse with
 * `action-changed` when the action is no longer that version (ActionChangedError).
 *
 * @example
 * ```ts
 * actionVersion({ status: 'queued', params: { campaign_id: '1', target_cpa: 12 }, changedAt: '2026-11-21T10:00:00.000Z' }); // 'v1-…'
 * ```
 */
export function actionVersion(facts: VersionFacts): string {
  const at = facts.changedAt === null ? '' : new Date(facts.changedAt).toISOString();
  const digest = createHash('sha256').update(`${at}\n${facts.status}\n${canonicalJson(facts.params) ?? ''}`).digest('base64url');
  return `v1-${digest.slice(0, 22)}`;
}
