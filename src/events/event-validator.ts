import { createHash } from 'node:crypto';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { ACTOR_KINDS, AGGREGATE_TYPES, type EventEnvelope, type UnsealedEvent } from './envelope.ts';
import { EVENT_DEFINITIONS } from './catalogue/index.ts';
import { describeHostileCharacter, findHostileText, hasHostileText } from '../text/hostile-text.ts';

/** Raised when an event does not match its schema; the store refuses to append it. */
export class EventSchemaError extends Error {
  readonly eventType: string;
  readonly errors: readonly string[];

  constructor(eventType: string, errors: readonly string[]) {
    super(`event ${eventType} does not match its schema: ${errors.join('; ')}`);
    this.eventType = eventType;
    this.errors = errors;
    this.name = 'EventSchemaError';
  }
}

/** Raised for a type/version pair the catalogue does not know (a newer writer, or a forger). */
export class UnknownEventTypeError extends EventSchemaError {
  constructor(eventType: string, version: number) {
    super(eventType, [`unknown type/version ${eventType}@${version}`]);
    this.name = 'UnknownEventTypeError';
  }
}

/**
 * Raised when a string anywhere in an event (envelope, data, keys) holds U+0000, another
 * C0 control or an unpaired surrogate. A subclass so callers catching schema errors still
 * catch it; admission tells it apart to quarantine with its own code.
 */
export class EventTextError extends EventSchemaError {
  readonly pointer: string;

  constructor(eventType: string, pointer: string, problem: string) {
    super(eventType, [`${pointer} ${problem}`]);
    this.pointer = pointer;
    this.name = 'EventTextError';
  }
}

const ENVELOPE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'type', 'version', 'time', 'workspace_id', 'account_id', 'aggregate', 'actor', 'correlation_id', 'data'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    type: { type: 'string' },
    version: { type: 'integer', minimum: 1 },
    time: { type: 'string', format: 'date-time' },
    workspace_id: { type: 'string', minLength: 1 },
    account_id: { anyOf: [{ type: 'string', minLength: 1 }, { type: 'null' }] },
    aggregate: {
      type: 'object',
      additionalProperties: false,
      required: ['type', 'id'],
      properties: { type: { enum: [...AGGREGATE_TYPES] }, id: { type: 'string', minLength: 1 } },
    },
    actor: {
      type: 'object',
      additionalProperties: false,
      required: ['kind', 'id'],
      properties: { kind: { enum: [...ACTOR_KINDS] }, id: { type: 'string', minLength: 1 } },
    },
    correlation_id: { type: 'string', minLength: 1 },
    data: { type: 'object' },
    prev_hash: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    hash: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    key_id: { type: 'string', pattern: '^[0-9a-f]{16}$' },
    signature: { type: 'string', pattern: '^[A-Za-z0-9_-]{86}$' },
  },
} as const;

export interface AssertValidOptions {
  /**
   * The caller has proven that no string of the event can hold a bad character, e.g. with
   * {@link jsonTextMayHoldHostileText}, so the walk over every string is skipped. Only for
   * events fresh from JSON.parse; the schema is checked all the same.
   */
  readonly textClean?: boolean;
}

/**
 * Whether JSON.parse of `text` could give a string (or key) holding a bad character
 * (src/text/hostile-text.ts: C0 controls but tab, LF and CR; unpaired surrogates). JSON
 * refuses C0 controls written as they are inside a string, so one can only come from a
 * `\b`, `\f` or `\u` escape; an unpaired surrogate comes from a `\u` escape or from a
 * surrogate in the text itself (never in text decoded from valid UTF-8). False means the
 * parsed value is clean; true means it has to be walked (a `\\u`, or an emoji, also says
 * true: it errs only on the side of looking).
 */
export function jsonTextMayHoldHostileText(text: string): boolean {
  return MAY_HOLD_HOSTILE.test(text);
}

const MAY_HOLD_HOSTILE = /\\[bfu]|[\uD800-\uDFFF]/;

/**
 * Validates envelopes and per-type data against the catalogue. Compiled once; used by the
 * store on append and by `adsagent audit verify` on replay.
 */
export class EventValidator {
  private readonly envelope: ValidateFunction;
  private readonly byTypeVersion = new Map<string, ValidateFunction>();
  /**
   * SHA-256 (hex) of every schema this validator checks: part of the admission rules a
   * recorded verdict was reached under (see EventAdmission.rulesFingerprint).
   */
  readonly fingerprint: string;

  constructor() {
    this.fingerprint = createHash('sha256')
      .update(JSON.stringify({ envelope: ENVELOPE_SCHEMA, data: EVENT_DEFINITIONS.map(({ type, version, data }) => ({ type, version, data })) }))
      .digest('hex');
    const ajv = new Ajv({ allErrors: true, strict: true });
    addFormats.default(ajv);
    this.envelope = ajv.compile(ENVELOPE_SCHEMA);
    for (const definition of EVENT_DEFINITIONS) {
      this.byTypeVersion.set(`${definition.type}@${definition.version}`, ajv.compile(definition.data));
    }
  }

  /**
   * Whatever wrote the event (a command, the model, a platform, a forger), it is refused
   * unless every string in it is clean: Postgres would refuse it later, in every projector.
   *
   * @throws EventSchemaError, UnknownEventTypeError (a subclass) or EventTextError (a subclass)
   */
  assertValid(event: UnsealedEvent | EventEnvelope, options: AssertValidOptions = {}): void {
    // `event` may be any JSON value when it came off the stream (null, a number…): name its type carefully.
    const claimedType = typeof event === 'object' && event !== null ? String((event as { type?: unknown }).type) : `(${event === null ? 'null' : typeof event})`;
    if (!this.envelope(event)) throw new EventSchemaError(claimedType, describe(this.envelope));
    const validateData = this.byTypeVersion.get(`${event.type}@${event.version}`);
    if (!validateData) throw new UnknownEventTypeError(event.type, event.version);
    if (!validateData(event.data)) throw new EventSchemaError(event.type, describe(validateData, '/data'));
    // After the schema so the walk only ever sees plain JSON shapes; one pass, stops at the first finding.
    if (options.textClean === true || !hasHostileText(event)) return;
    const [finding] = findHostileText(event, 1);
    if (finding) throw new EventTextError(event.type, finding.pointer, describeHostileCharacter(finding.character));
  }
}

function describe(validate: ValidateFunction, prefix = ''): string[] {
  return (validate.errors ?? []).map((e) => `${prefix}${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
}

let shared: EventValidator | undefined;
/** The process-wide validator (compiling the catalogue takes a few milliseconds). */
export function eventValidator(): EventValidator {
  shared ??= new EventValidator();
  return shared;
}
