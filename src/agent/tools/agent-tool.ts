import type { SchemaObject } from 'ajv';
import type { AdsPlatform, Campaign, PlatformAccountRef } from '../../platform/ads-platform.ts';
import type { ActionDraft } from '../../policy/action-draft.ts';
import type { ActionRepresentation } from '../../policy/proposal-service.ts';

/** Read tools look; propose tools create actions. A read-scoped run is offered read tools only. */
export const TOOL_KINDS = ['read', 'propose'] as const;
export type ToolKind = (typeof TOOL_KINDS)[number];

export interface ToolContext {
  readonly platform: AdsPlatform;
  readonly account: PlatformAccountRef;
  /** "Today" for default date ranges (UTC); injected so tests and replays are deterministic. */
  readonly today: Date;
  readonly signal: AbortSignal;
  /**
   * Records a proposal through the policy; only propose tools call it. `campaign`: the draft's
   * campaign as the tool just read it, so the policy does not read the account's campaigns again.
   */
  propose(draft: ActionDraft, summary: string, reason: string, campaign?: Campaign): Promise<ActionRepresentation>;
}

export interface AgentTool<I = Record<string, unknown>> {
  readonly name: string;
  readonly kind: ToolKind;
  readonly description: string;
  readonly parameters: SchemaObject;
  run(input: I, context: ToolContext): Promise<Record<string, unknown>>;
}

/** A tool refused its input or could not do what was asked; the model sees the message. */
export class ToolInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ToolInputError';
  }
}
