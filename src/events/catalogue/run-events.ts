import type { SchemaObject } from 'ajv';
import type { EventEnvelope } from '../envelope.ts';
import type { KeyScope } from './identity-events.ts';
import { bool, enumOf, id, int, nullable, object, str, type EventDefinition } from './schema-helpers.ts';

/** Error codes of a failed run, exactly the specification's list. */
export const RUN_ERROR_CODES = ['agent_error', 'timed_out', 'account_not_connected', 'key_revoked', 'internal'] as const;
export type RunErrorCode = (typeof RUN_ERROR_CODES)[number];

export interface RunUsage {
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly steps: number;
}

export interface AgentIdentity {
  /** `rules` (built-in) or `gemini`. */
  readonly kind: 'rules' | 'gemini';
  readonly model: string;
}

export interface RunQueuedData {
  readonly run_id: string;
  readonly brief: string;
  readonly auto_apply: boolean;
  readonly key_id: string;
  /** Scope of the key that started the run; `read` removes every write tool. */
  readonly scope: KeyScope;
}
export interface RunStartedData {
  readonly run_id: string;
  readonly worker_id: string;
  readonly agent: AgentIdentity;
}
export interface RunCanceledData {
  readonly run_id: string;
}
export interface RunSucceededData {
  readonly run_id: string;
  readonly text: string;
  readonly truncated: boolean;
  readonly usage: RunUsage;
  readonly duration_ms: number;
}
export interface RunFailedData {
  readonly run_id: string;
  readonly error: { readonly code: RunErrorCode; readonly message: string };
  readonly text: string;
  readonly truncated: boolean;
  readonly usage: RunUsage;
  /** Null when the run failed before it started (e.g. key revoked while queued). */
  readonly duration_ms: number | null;
}

export type RunQueued = EventEnvelope<'RunQueued', RunQueuedData>;
export type RunStarted = EventEnvelope<'RunStarted', RunStartedData>;
export type RunCanceled = EventEnvelope<'RunCanceled', RunCanceledData>;
export type RunSucceeded = EventEnvelope<'RunSucceeded', RunSucceededData>;
export type RunFailed = EventEnvelope<'RunFailed', RunFailedData>;

/** Lifecycle events live on the account's subject: that is what makes "one active run per account" exact. */
export type RunLifecycleEvent = RunQueued | RunStarted | RunCanceled | RunSucceeded | RunFailed;

const usage: SchemaObject = object({ input_tokens: int(), output_tokens: int(), steps: int() });
const runId = id();

export const RUN_EVENT_DEFINITIONS: readonly EventDefinition[] = [
  {
    type: 'RunQueued',
    version: 1,
    aggregate: 'account',
    description: 'POST /api/v1/runs accepted a brief; the run waits for an agent worker.',
    data: object({
      run_id: runId,
      brief: str({ minLength: 1 }),
      auto_apply: bool(),
      key_id: id(),
      scope: enumOf(['read', 'write', 'admin']),
    }),
  },
  {
    type: 'RunStarted',
    version: 1,
    aggregate: 'account',
    description: 'An agent worker claimed the run. Exactly one of RunStarted and RunCanceled follows a RunQueued.',
    data: object({
      run_id: runId,
      worker_id: str({ minLength: 1, maxLength: 200 }),
      agent: object({ kind: enumOf(['rules', 'gemini']), model: str() }),
    }),
  },
  {
    type: 'RunCanceled',
    version: 1,
    aggregate: 'account',
    description: 'DELETE /api/v1/runs/{runId} canceled a queued run.',
    data: object({ run_id: runId }),
  },
  {
    type: 'RunSucceeded',
    version: 1,
    aggregate: 'account',
    description: 'The agent answered; text is capped at 32,000 characters.',
    data: object({ run_id: runId, text: str({ maxLength: 32000 }), truncated: bool(), usage, duration_ms: int() }),
  },
  {
    type: 'RunFailed',
    version: 1,
    aggregate: 'account',
    description: 'The run ended with an error code; actions proposed before the failure stay queued.',
    data: object({
      run_id: runId,
      error: object({ code: enumOf(RUN_ERROR_CODES), message: str() }),
      text: str({ maxLength: 32000 }),
      truncated: bool(),
      usage,
      duration_ms: nullable(int()),
    }),
  },
];
