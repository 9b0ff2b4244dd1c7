import type { Content, GenerateContentResponse, Part } from '@google/generative-ai';
import type { ConversationEntry, ModelPart } from '../model-port.ts';

/**
 * Mapping between the port's conversation and Gemini `contents`, both ways.
 *
 * Thought signatures: thinking models (Gemini 2.5+) attach an opaque `thoughtSignature` to
 * function-call parts, and Gemini 3 answers 400 when a function call comes back without it.
 * The port's `ModelPart` has no field for it, so the signature is remembered against the part
 * object we handed out (the agent loop sends the very same objects back in the next turn).
 * A conversation rebuilt from stored events loses the signatures; carrying them would need an
 * opaque field on the port's `ModelPart`.
 */
const thoughtSignatures = new WeakMap<ModelPart, string>();

/** `Part` as the REST API has it; SDK 0.24's typings predate `thought` and `thoughtSignature`. */
type WirePart = Part & { thought?: boolean; thoughtSignature?: string };

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
  const signature = thoughtSignatures.get(part);
  if (signature !== undefined) wire.thoughtSignature = signature;
  return [wire];
}

/**
 * The model's parts, in the order Gemini produced them: text and function calls. Thought
 * summaries and part kinds we never ask for (code execution, inline data) are skipped.
 */
export function fromGeminiParts(parts: readonly Part[]): ModelPart[] {
  const result: ModelPart[] = [];
  for (const part of parts as readonly WirePart[]) {
    if (part.thought) continue;
    if (part.functionCall) {
      // Gemini omits `args` entirely for a call without arguments.
      const args = (part.functionCall.args ?? {}) as Record<string, unknown>;
      const modelPart: ModelPart = { kind: 'function_call', call: { name: part.functionCall.name, args } };
      if (part.thoughtSignature) thoughtSignatures.set(modelPart, part.thoughtSignature);
      result.push(modelPart);
    } else if (typeof part.text === 'string' && part.text !== '') {
      result.push({ kind: 'text', text: part.text });
    }
  }
  return result;
}

/** Token counts of one response; 0 for what Gemini did not report. */
export function usageOf(response: GenerateContentResponse): { input_tokens: number; output_tokens: number } {
  return {
    input_tokens: response.usageMetadata?.promptTokenCount ?? 0,
    output_tokens: response.usageMetadata?.candidatesTokenCount ?? 0,
  };
}
