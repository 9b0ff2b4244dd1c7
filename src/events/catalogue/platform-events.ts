import type { EventEnvelope } from '../envelope.ts';
import { int, nullable, object, str, type EventDefinition } from './schema-helpers.ts';

/** One field a change outside the service set, with its value before and after (as the platform reports them). */
export interface ObservedFieldChange {
  /** The platform's field path as the API reports it, e.g. `maximizeConversions.targetCpaMicros`. */
  readonly field: string;
  readonly old: string | number | boolean | null;
  readonly new: string | number | boolean | null;
}

export interface PlatformChangeObservedData {
  /** The platform's id of the change (Google Ads: the change_event resource name); each is recorded once. */
  readonly change_id: string;
  /** When the platform says it happened, in the account's time zone (`yyyy-MM-dd HH:mm:ss.ffffff`), as reported. */
  readonly change_date_time: string;
  readonly resource_type: string;
  readonly resource_name: string;
  /** CREATE, UPDATE or REMOVE. */
  readonly operation: string;
  /** Where the change came from: GOOGLE_ADS_WEB_CLIENT, GOOGLE_ADS_API, GOOGLE_ADS_EDITOR, ... */
  readonly client_type: string;
  readonly user_email: string;
  readonly campaign_id: string | null;
  readonly changes: readonly ObservedFieldChange[];
  /** Changed fields beyond the ones listed in `changes` (bounded), 0 normally. */
  readonly more_changes: number;
}

export type PlatformChangeObserved = EventEnvelope<'PlatformChangeObserved', PlatformChangeObservedData>;
export type PlatformEvent = PlatformChangeObserved;

const value = () => ({ anyOf: [str({ maxLength: 500 }), { type: 'number' }, { type: 'boolean' }, { type: 'null' }] });

export const PLATFORM_EVENT_DEFINITIONS: readonly EventDefinition[] = [
  {
    type: 'PlatformChangeObserved',
    version: 1,
    aggregate: 'account',
    description:
      "A change the advertising platform reports for the account (Google Ads change_event), made by anyone: the web UI, the Editor, another API client or this service. Imported so the account's history shows changes made outside the service too.",
    data: object({
      change_id: str({ minLength: 1, maxLength: 300 }),
      change_date_time: str({ maxLength: 40 }),
      resource_type: str({ maxLength: 80 }),
      resource_name: str({ maxLength: 300 }),
      operation: str({ maxLength: 40 }),
      client_type: str({ maxLength: 80 }),
      user_email: str({ maxLength: 320 }),
      campaign_id: nullable(str({ maxLength: 40 })),
      changes: { type: 'array', maxItems: 20, items: object({ field: str({ maxLength: 200 }), old: value(), new: value() }) },
      more_changes: int(0),
    }),
  },
];
