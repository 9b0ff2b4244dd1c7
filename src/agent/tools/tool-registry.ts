import { Ajv, type ValidateFunction } from 'ajv';
import type { KeyScope } from '../../events/catalogue/index.ts';
import type { ToolDeclaration } from '../model/model-port.ts';
import { escapePointerToken, sanitizeDeep, sanitizeText } from '../../text/hostile-text.ts';
import type { AgentTool, ToolContext } from './agent-tool.ts';
import { PROPOSE_TOOLS } from './propose-tools.ts';
import { READ_TOOLS } from './read-tools.ts';

const REGISTRIES = new Map<KeyScope, ToolRegistry>();

/**
 * The tools of one run. Which tools exist depends on the run's key scope only — never on
 * what the model asks for: a read-scoped run's registry has no propose tool at all.
 */
export class ToolRegistry {
  private readonly tools: ReadonlyMap<string, AgentTool<any>>;
  private readonly validators = new Map<string, ValidateFunction>();
  /** One array for every turn of every run: a model adapter can key its converted form on it. */
  private readonly declared: readonly ToolDeclaration[];

  private constructor(tools: readonly AgentTool<any>[]) {
    this.tools = new Map(tools.map((t) => [t.name, sanitizing(t)]));
    const ajv = new Ajv({ allErrors: true, strict: false });
    for (const tool of tools) this.validators.set(tool.name, ajv.compile(tool.parameters));
    this.declared = Object.freeze([...this.tools.values()].map((t) => Object.freeze({ name: t.name, description: t.description, parameters: t.parameters })));
  }

  /**
   * One registry per scope for the whole process: it holds nothing of a run, and compiling
   * its input schemas (a new Ajv each time) cost about ten milliseconds of every run.
   */
  static forScope(scope: KeyScope): ToolRegistry {
    let registry = REGISTRIES.get(scope);
    if (!registry) {
      registry = new ToolRegistry(scope === 'read' ? READ_TOOLS : [...READ_TOOLS, ...PROPOSE_TOOLS]);
      REGISTRIES.set(scope, registry);
    }
    return registry;
  }

  get(name: string): AgentTool<any> | undefined {
    return this.tools.get(name);
  }

  declarations(): readonly ToolDeclaration[] {
    return this.declared;
  }

  /** Null when valid, else a message for the model. */
  validate(name: string, input: unknown): string | null {
    const validate = this.validators.get(name);
    if (!validate) return `unknown tool ${name}`;
    // Ajv takes Infinity for a number (and an integer); a model writing 1e400 gets it from
    // JSON.parse, and no budget, target or stored event can hold it.
    const infinite = nonFiniteNumberAt(input, '');
    if (infinite !== null) return `${infinite || 'input'} must be a finite number`;
    if (validate(input)) return null;
    return (validate.errors ?? []).map((e) => `${e.instancePath || 'input'} ${e.message ?? 'is invalid'}`).join('; ');
  }
}

/** The JSON pointer of the first number in `value` that is not finite, or null. */
function nonFiniteNumberAt(value: unknown, pointer: string): string | null {
  if (typeof value === 'number') return Number.isFinite(value) ? null : pointer;
  if (typeof value !== 'object' || value === null) return null;
  for (const [key, item] of Object.entries(value)) {
    const found = nonFiniteNumberAt(item, `${pointer}/${escapePointerToken(key)}`);
    if (found !== null) return found;
  }
  return null;
}

/**
 * Platform text (search terms, campaign names) is as hostile as the model's: a tool's
 * output, and the summary and reason it proposes with, get U+FFFD for characters no event
 * may carry (src/text/hostile-text.ts), so recording them never fails the run.
 */
function sanitizing<I>(tool: AgentTool<I>): AgentTool<I> {
  return {
    ...tool,
    run: async (input: I, context: ToolContext) => {
      const guarded: ToolContext = {
        ...context,
        propose: (draft, summary, reason, campaign) => context.propose(sanitizeDeep(draft), sanitizeText(summary), sanitizeText(reason), campaign && sanitizeDeep(campaign)),
      };
      return sanitizeDeep(await tool.run(input, guarded));
    },
  };
}

/** Every tool name a model might know of, for telling "not offered to this run" from "does not exist". */
export const ALL_TOOL_NAMES: ReadonlySet<string> = new Set([...READ_TOOLS, ...PROPOSE_TOOLS].map((t) => t.name));
