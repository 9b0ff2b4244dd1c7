import { ACTION_EVENT_DEFINITIONS, type ActionLifecycleEvent, type SafetyEvent } from './action-events.ts';
import { IDENTITY_EVENT_DEFINITIONS, type IdentityEvent } from './identity-events.ts';
import { PLATFORM_EVENT_DEFINITIONS, type PlatformEvent } from './platform-events.ts';
import { RUN_EVENT_DEFINITIONS, type RunLifecycleEvent } from './run-events.ts';
import { TRANSCRIPT_EVENT_DEFINITIONS, type ActionProposalEvent, type TranscriptEvent } from './transcript-events.ts';
import type { EventDefinition } from './schema-helpers.ts';

export * from './action-events.ts';
export * from './identity-events.ts';
export * from './platform-events.ts';
export * from './run-events.ts';
export * from './transcript-events.ts';
export type { EventDefinition } from './schema-helpers.ts';

/** Every event the service writes: a discriminated union on `type`. */
export type DomainEvent =
  | IdentityEvent
  | RunLifecycleEvent
  | TranscriptEvent
  | ActionProposalEvent
  | SafetyEvent
  | ActionLifecycleEvent
  | PlatformEvent;
export type EventType = DomainEvent['type'];
export type EventOfType<T extends EventType> = Extract<DomainEvent, { type: T }>;
export type EventData<T extends EventType> = EventOfType<T>['data'];

/** The catalogue: one definition per (type, version). docs/events.md is generated from it. */
export const EVENT_DEFINITIONS: readonly EventDefinition[] = [
  ...IDENTITY_EVENT_DEFINITIONS,
  ...RUN_EVENT_DEFINITIONS,
  ...TRANSCRIPT_EVENT_DEFINITIONS,
  ...ACTION_EVENT_DEFINITIONS,
  ...PLATFORM_EVENT_DEFINITIONS,
];

/** Current version written for each type. */
export const CURRENT_VERSION: Readonly<Record<string, number>> = Object.fromEntries(
  EVENT_DEFINITIONS.map((d) => [d.type, d.version]),
);
