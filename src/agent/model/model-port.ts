import type { SchemaObject } from 'ajv';
import type { AgentIdentity } from '../../events/catalogue/index.ts';

/**
 * The model port: one conversation turn in, one model turn out. Adapters: Gemini
 * (`@google/generative-ai`) and the built-in rules agent. Moving to another SDK touches
 * only an adapter.
 */
export interface ToolDeclaration {
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments (the OpenAPI 3 subset Gemini accepts: type, properties, required, items, enum, description). */
  readonly parameters: SchemaObject;
}

export interface FunctionCall {
  readonly name: string;
  readonly args: Record<string, unknown>;
}

export type ModelPart = { readonly kind: 'text'; readonly text: string } | { readonly kind: 'function_call'; readonly call: FunctionCall };

export interface FunctionResult {
  readonly name: string;
  readonly response: Record<string, unknown>;
}

export type ConversationEntry =
  | { readonly role: 'user'; readonly text: string }
  | { readonly role: 'model'; readonly parts: readonly ModelPart[] }
  | { readonly role: 'tool'; readonly results: readonly FunctionResult[] };

export interface ModelRequest {
  readonly system: string;
  readonly conversation: readonly ConversationEntry[];
  /** Empty when the run has used its tool calls: the model must answer in text. */
  readonly tools: readonly ToolDeclaration[];
  readonly signal: AbortSignal;
}

export interface ModelTurn {
  readonly parts: readonly ModelPart[];
  readonly usage: { readonly input_tokens: number; readonly output_tokens: number };
}

export interface ModelClient {
  readonly identity: AgentIdentity;
  /**
   * @throws ModelError for failures the run reports as agent_error (after the adapter's own
   *   retries), or an AbortError when `signal` fired.
   */
  generate(request: ModelRequest): Promise<ModelTurn>;
}

/** The model failed in a way retries did not fix; the run fails with agent_error and this detail. */
export class ModelError extends Error {
  readonly status?: number;

  constructor(message: string, status?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.status = status;
    this.name = 'ModelError';
  }
}
