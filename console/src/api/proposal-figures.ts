import { apiPaths, fetchAllPages } from './api-client.ts';
import type { HistoryEntry } from './types.ts';

/**
 * The figures an action was proposed on (`based_on` of its ActionProposed event), or, once an
 * approver edited it, those the edited version was measured on (`after.based_on` of its latest
 * ActionEdited). The approvals list does not carry them, the account history does: one read
 * per run (or per action proposed outside a run), kept for the page's life since events never
 * change (read again for an edited action, whose edit may be newer than the cached read).
 */
const historyByCorrelation = new Map<string, Promise<HistoryEntry[]>>();

export async function proposalFigures(projectId: string, correlationId: string, actionId: string, edited = false): Promise<Record<string, unknown> | null> {
  const cacheKey = `${projectId}/${correlationId}`;
  let entries = edited ? undefined : historyByCorrelation.get(cacheKey);
  if (!entries) {
    entries = fetchAllPages<HistoryEntry>((cursor) => {
      const query = new URLSearchParams({ run_id: correlationId, limit: '500' });
      if (cursor) query.set('cursor', cursor);
      return apiPaths.history(projectId, query);
    }, { maxPages: 10 }).then((page) => page.rows);
    historyByCorrelation.set(cacheKey, entries);
    entries.catch(() => historyByCorrelation.delete(cacheKey));
  }
  const ofAction = await entries;
  const lastEdit = ofAction.filter((entry) => entry.type === 'ActionEdited' && entry.aggregate?.id === actionId).at(-1);
  const proposed = ofAction.find((entry) => entry.type === 'ActionProposed' && entry.data?.action_id === actionId);
  const basedOn = lastEdit ? (lastEdit.data?.after as Record<string, unknown> | undefined)?.based_on : proposed?.data?.based_on;
  return basedOn && typeof basedOn === 'object' ? (basedOn as Record<string, unknown>) : null;
}
