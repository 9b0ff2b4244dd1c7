import type { ObservedFieldChange, PlatformChangeObservedData } from '../../events/catalogue/index.ts';
import { platformText } from './google-ads-errors.ts';
import { at, text } from './google-ads-mapping.ts';
import type { GoogleAdsRow } from './google-ads-transport.ts';

/** Google keeps change_event for 30 days; a query must stay inside them. */
export const CHANGE_EVENT_DAYS = 29;
/** Rows one import reads at most (the API requires a LIMIT, at most 10,000). */
export const CHANGE_EVENT_LIMIT = 1000;
const MAX_FIELDS = 20;

export const CHANGE_EVENT_QUERY_FIELDS =
  'change_event.resource_name, change_event.change_date_time, change_event.change_resource_type, change_event.change_resource_name, ' +
  'change_event.client_type, change_event.user_email, change_event.resource_change_operation, change_event.changed_fields, ' +
  'change_event.old_resource, change_event.new_resource, change_event.campaign';

const snakeToCamel = (path: string) => path.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/** A changed value as recorded: scalars as they are (strings bounded), anything else as bounded JSON. */
function scalar(value: unknown): string | number | boolean | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'number' || typeof value === 'boolean') return Number.isFinite(value as number) || typeof value === 'boolean' ? value : null;
  if (typeof value === 'string') return platformText(value).slice(0, 500);
  return platformText(JSON.stringify(value)).slice(0, 500);
}

/**
 * One change_event row as a PlatformChangeObserved: who (client type, user), what
 * (resource, operation) and, for each changed field, its old and new value read from
 * old_resource / new_resource (ChangedResource: the resource under its type's key).
 */
export function observedChangeOf(row: GoogleAdsRow): PlatformChangeObservedData {
  const oldResource = at(row, 'changeEvent.oldResource');
  const newResource = at(row, 'changeEvent.newResource');
  const resourceOf = (changed: unknown) => {
    const entries = typeof changed === 'object' && changed !== null ? Object.values(changed as Record<string, unknown>) : [];
    return (entries[0] ?? {}) as GoogleAdsRow;
  };
  const fields = text(row, 'changeEvent.changedFields')
    .split(',')
    .map((f) => f.trim())
    // The REST API names fields in lowerCamelCase ("targetCpa.targetCpaMicros"); snake_case
    // paths (GAQL spelling) are read too, so either spelling finds its value.
    .filter((f) => /^[A-Za-z0-9_.]{1,200}$/.test(f));
  const changes: ObservedFieldChange[] = fields.slice(0, MAX_FIELDS).map((field) => {
    const path = snakeToCamel(field);
    return { field, old: scalar(at(resourceOf(oldResource), path)), new: scalar(at(resourceOf(newResource), path)) };
  });
  const campaign = /\/campaigns\/(\d{1,19})$/.exec(text(row, 'changeEvent.campaign'));
  return {
    change_id: platformText(text(row, 'changeEvent.resourceName')).slice(0, 300) || 'unknown',
    change_date_time: platformText(text(row, 'changeEvent.changeDateTime')).slice(0, 40),
    resource_type: platformText(text(row, 'changeEvent.changeResourceType')).slice(0, 80),
    resource_name: platformText(text(row, 'changeEvent.changeResourceName')).slice(0, 300),
    operation: platformText(text(row, 'changeEvent.resourceChangeOperation')).slice(0, 40),
    client_type: platformText(text(row, 'changeEvent.clientType')).slice(0, 80),
    user_email: platformText(text(row, 'changeEvent.userEmail')).slice(0, 320),
    campaign_id: campaign && campaign[1] !== '0' ? campaign[1]! : null,
    changes,
    more_changes: Math.max(0, fields.length - MAX_FIELDS),
  };
}

/** "yyyy-MM-dd HH:mm:ss" of `date` minus CHANGE_EVENT_DAYS (UTC; a day's margin covers any account time zone). */
export function oldestChangeTime(now: Date): string {
  return new Date(now.getTime() - CHANGE_EVENT_DAYS * 86_400_000).toISOString().replace('T', ' ').slice(0, 19);
}

/** "yyyy-MM-dd HH:mm:ss" of `date` plus a day: the range's upper bound, late enough for any account time zone. */
export function newestChangeTime(now: Date): string {
  return new Date(now.getTime() + 86_400_000).toISOString().replace('T', ' ').slice(0, 19);
}
