import type { AgentIdentity } from '../../events/catalogue/index.ts';
import { sanitizeDeep, sanitizeText } from '../../text/hostile-text.ts';
import { cutDeeperThan, MAX_JSON_DEPTH } from '../../text/json-depth.ts';
import { ModelError, type ModelClient, type ModelPart, type ModelRequest, type ModelTurn } from './model-port.ts';

/**
 * Puts U+FFFD where a model wrote U+0000, another C0 control (tab, newline and carriage
 * return stay) or an unpaired surrogate: in its text, its function-call names and
 * arguments, and its error messages. Everything a run records comes from here or from
 * tools, and the event validator refuses such characters, so without this one bad token
 * would fail the run. A call's opaque signature is copied as it is (validSignature). Wraps
 * every adapter (see createModel).
 */
export class SanitizingModel implements ModelClient {
  private readonly inner: ModelClient;

  constructor(inner: ModelClient) {
    this.inner = inner;
  }

  get identity(): AgentIdentity {
    return this.inner.identity;
  }

  async generate(request: ModelRequest): Promise<ModelTurn> {
    let turn: ModelTurn;
    try {
      turn = await this.inner.generate(request);
    } catch (error) {
      if (error instanceof ModelError) throw new ModelError(sanitizeText(error.message), error.status, { cause: error, ...(error.usage ? { usage: error.usage } : {}) });
      throw error;
    }
    return { ...turn, parts: turn.parts.map(sanitizePart) };
  }
}

/**
 * Longest call signature kept. Gemini's thought signatures are base64 of a few kilobytes; one
 * goes back to the model with its call on every later turn of the run.
 */
const MAX_SIGNATURE_LENGTH = 256_000;

/**
 * How deep a call's arguments are kept: one level past what a tool takes (MAX_JSON_DEPTH), so
 * the run still sees, and records as text, an input nested too deep (agent-loop.ts, capInput).
 */
const MAX_CALL_ARGS_DEPTH = MAX_JSON_DEPTH + 1;
const SIGNATURE = /^[A-Za-z0-9+/=_-]*$/;

function sanitizePart(part: ModelPart): ModelPart {
  if (part.kind === 'text') return { kind: 'text', text: sanitizeText(part.text) };
  const signature = validSignature(part.signature);
  return {
    kind: 'function_call',
    // Cut first: every walk after it (this one, the tool's checks, the record) recurses per level.
    call: { name: sanitizeText(part.call.name), args: sanitizeDeep(cutDeeperThan(part.call.args, MAX_CALL_ARGS_DEPTH) as Record<string, unknown>) },
    ...(signature !== undefined ? { signature } : {}),
  };
}

/**
 * The call's signature, copied unchanged (it is opaque: the model checks it byte for byte,
 * and it is never recorded, so hostile characters cannot reach an event) when it is a
 * bounded base64 string; anything else is dropped, and the model judges the call without it.
 */
function validSignature(signature: unknown): string | undefined {
  if (typeof signature !== 'string' || signature.length === 0 || signature.length > MAX_SIGNATURE_LENGTH) return undefined;
  return SIGNATURE.test(signature) ? signature : undefined;
}
