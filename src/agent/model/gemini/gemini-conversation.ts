import type { Content, GenerateContentResponse, Part } from '@google/generative-ai';
import { ModelError, type ConversationEntry, type ModelPart, type ModelUsage } from '../model-port.ts';

/**
 * Mapping between the port's conversation and Gemini `contents`, both ways.
 *
 * Thought signatures: thinking models (Gemini 2.5+) attach an opaque `thoughtSignature` to
 * function-call parts, and Gemini 3 answers 400 when a function call comes back without it.
 * It travels as the part's `signature`, a plain field every wrapper of the model copies (an
 * identity-keyed side table was lost as soon as SanitizingModel rebuilt the parts). A
 * conversation rebuilt from stored events has none: signatures are never recorded.
 */

/** `Part` as the REST API has it; SDK 0.24's typings predate `thought` and `thoughtSignature`. */
type WirePart = Part & { thought?: boolean; thoughtSignature?: string };

/**
 * Longest function name taken from Gemini: its declarations allow 64 characters, and a name
 * goes back to it in every later turn of the run.
 */
const MAX_FUNCTION_NAME_LENGTH = 128;

/** Gemini `contents` for the port's conversation. Entries left with no parts are dropped: Gemini rejects empty `parts`. */
export function toGeminiContents(conversation: readonly ConversationEntry[]): Content[] {
  const contents: Content[] = [];
  for (const entry of conversation) {
    const content = toContent(entry);
    if (content.parts.length > 0) contents.push(content);
  }
  return contents;
}

function toContent(entry: ConversationEntry): Content {
  switch (entry.role) {
    case 'user':
      return { role: 'user', parts: entry.text ? [{ text: entry.text }] : [] };
    case 'model':
      return { role: 'model', parts: entry.parts.flatMap(toGeminiPart) };
    case 'tool':
      // The SDK's own chat session sends function responses under role 'function'
      // (POSSIBLE_ROLES), one content holding every response of the turn — Gemini wants as
      // many responses in that turn as there were calls.
      return {
        role: 'function',
        parts: entry.results.map((result) => ({ functionResponse: { name: result.name, response: result.response } })),
      };
  }
}

function toGeminiPart(part: ModelPart): Part[] {
  if (part.kind === 'text') return part.text ? [{ text: part.text }] : [];
  const wire: WirePart = { functionCall: { name: part.call.name, args: part.call.args } };
  if (part.signature !== undefined) wire.thoughtSignature = part.signature;
  return [wire];
}

/**
 * The model's parts, in the order Gemini produced them: text and function calls. Thought
 * summaries and part kinds we never ask for (code execution, inline data) are skipped.
 *
 * @throws ModelError for parts that are not a list of objects, and for a function call the run could neither run nor answer (Gemini needs
 *   the call's name in its response): a name that is not a non-empty string of at most 128
 *   characters, or arguments that are not an object. The run ends agent_error, as for
 *   Gemini's own MALFORMED_FUNCTION_CALL.
 */
export function fromGeminiParts(parts: unknown): ModelPart[] {
  // The SDK hands on whatever JSON the response held: `parts` may be anything.
  if (!Array.isArray(parts)) throw new ModelError(`Gemini answered content.parts as ${kindOf(parts)}, not a list of parts`);
  const result: ModelPart[] = [];
  for (const part of parts as readonly unknown[]) {
    if (typeof part !== 'object' || part === null || Array.isArray(part)) throw new ModelError(`Gemini answered a part that is ${kindOf(part)}, not an object`);
    const { thought, functionCall, thoughtSignature, text } = part as WirePart;
    if (thought) continue;
    if (functionCall) {
      const { name, args } = wellFormedCall(functionCall as unknown as Record<string, unknown>);
      result.push({ kind: 'function_call', call: { name, args }, ...(typeof thoughtSignature === 'string' ? { signature: thoughtSignature } : {}) });
    } else if (typeof text === 'string' && text !== '') {
      result.push({ kind: 'text', text });
    }
  }
  return result;
}

/** The call's name and arguments, checked: the SDK hands on whatever JSON the response held. */
function wellFormedCall(call: Record<string, unknown>): { name: string; args: Record<string, unknown> } {
  const { name, args } = call;
  const malformed = (what: string) => new ModelError(`Gemini produced a malformed function call: ${what}`);
  if (typeof name !== 'string') throw malformed(`its name is ${kindOf(name)}, not a string`);
  if (name === '') throw malformed('its name is empty');
  if (name.length > MAX_FUNCTION_NAME_LENGTH) throw malformed(`its name is ${name.length} characters long (at most ${MAX_FUNCTION_NAME_LENGTH})`);
  // Gemini omits `args` entirely for a call without arguments.
  if (args === undefined || args === null) return { name, args: {} };
  if (typeof args !== 'object' || Array.isArray(args)) throw malformed(`the arguments of ${name} are ${kindOf(args)}, not an object`);
  return { name, args: args as Record<string, unknown> };
}

/** What a JSON value is, in words. */
function kindOf(value: unknown): string {
  if (value === null || value === undefined) return 'missing';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/**
 * Token counts of one response, as Gemini bills them: thinking tokens (`thoughtsTokenCount`)
 * are output tokens, and the prompt of a tool Gemini ran itself (`toolUsePromptTokenCount`)
 * input tokens. A count that is missing, not a number, negative, not finite or above
 * {@link MAX_TOKENS_PER_RESPONSE} counts 0:
 * usage is recorded in the run's outcome, whose schema takes only non-negative integers.
 */
export function usageOf(response: GenerateContentResponse): ModelUsage {
  const metadata = (response.usageMetadata ?? {}) as Record<string, unknown>;
  return {
    input_tokens: tokenCount(metadata.promptTokenCount) + tokenCount(metadata.toolUsePromptTokenCount),
    output_tokens: tokenCount(metadata.candidatesTokenCount) + tokenCount(metadata.thoughtsTokenCount),
  };
}

/**
 * More tokens than one response can bill (Gemini's longest context is a few million): a count
 * above it is not a count, and summed into a run's usage it would overflow the read model's
 * bigint (1e300) or spend a workspace's token quota at once.
 */
export const MAX_TOKENS_PER_RESPONSE = 1_000_000_000;

function tokenCount(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 && value <= MAX_TOKENS_PER_RESPONSE ? Math.floor(value) : 0;
}
