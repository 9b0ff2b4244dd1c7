import type { AgentIdentity } from '../../events/catalogue/index.ts';
import { sanitizeDeep, sanitizeText } from '../../text/hostile-text.ts';
import { ModelError, type ModelClient, type ModelPart, type ModelRequest, type ModelTurn } from './model-port.ts';

/**
 * Puts U+FFFD where a model wrote U+0000, another C0 control (tab, newline and carriage
 * return stay) or an unpaired surrogate: in its text, its function-call names and
 * arguments, and its error messages. Everything a run records comes from here or from
 * tools, and the event validator refuses such characters, so without this one bad token
 * would fail the run. Wraps every adapter (see createModel).
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
      if (error instanceof ModelError) throw new ModelError(sanitizeText(error.message), error.status, { cause: error });
      throw error;
    }
    return { ...turn, parts: turn.parts.map(sanitizePart) };
  }
}

function sanitizePart(part: ModelPart): ModelPart {
  if (part.kind === 'text') return { kind: 'text', text: sanitizeText(part.text) };
  return { kind: 'function_call', call: { name: sanitizeText(part.call.name), args: sanitizeDeep(part.call.args) } };
}
