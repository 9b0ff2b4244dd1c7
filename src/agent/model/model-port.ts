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

export type ModelPart =
  | { readonly kind: 'text'; readonly text: string }
  | {
      readonly kind: 'function_call';
      readonly call: FunctionCall;
      /**
       * Opaque token the model attached to the call (Gemini's `thoughtSignature`), sent back
       * unchanged with the call on later turns: Gemini 3 refuses a signed call returned
       * without it. Kept in memory only, never recorded.
       */
      readonly signature?: string;
    };

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
  /** The run's tools; empty for a run that has none. */
  readonly tools: readonly ToolDeclaration[];
  /**
   * 'none' once the run has used its tool calls: the model still knows the tools it called
   * earlier in the conversation but must answer in text. Default 'auto'.
   */
  readonly toolChoice?: 'auto' | 'none';
  readonly signal: AbortSignal;
}

export interface ModelUsage {
  readonly input_tokens: number;
  readonly output_tokens: number;
}

export interface ModelTurn {
  readonly parts: readonly ModelPart[];
  readonly usage: ModelUsage;
  /** The model stopped at its output-token limit: its text is cut off. */
  readonly truncated?: boolean;
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
  /**
   * Tokens of an answer the model did give but that could not be used (a malformed call, an
   * answer stopped for a finish reason the run cannot go on from): billed all the same.
   */
  readonly usage?: ModelUsage;

  constructor(message: string, status?: number, options?: { cause?: unknown; usage?: ModelUsage }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.status = status;
    if (options?.usage) this.usage = options.usage;
    this.name = 'ModelError';
  }
}
