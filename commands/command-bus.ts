import type { Aggregates } from './shared/aggregates.ts';
import type { Command, Decider } from './shared/decider.ts';
import { handle, type CommandResult, type HandleOptions } from './shared/handle.ts';

/**
 * The one way state changes: callers (HTTP routes, workers, the policy, the operator CLI)
 * hand a command to the decider of its aggregate here, and never append events themselves.
 * A thin binding of {@link handle} to this process's aggregates (store, subjects, snapshots).
 *
 * @example
 * ```ts
 * const commands = new Commands(aggregates);
 * await commands.handle(keyDecider, { type: 'RevokeKey', workspaceId, keyId, meta });
 * ```
 */
export class Commands {
  readonly aggregates: Aggregates;
  /** Options every command of this bus gets unless it says otherwise (e.g. riding out outages). */
  readonly defaults: HandleOptions;

  constructor(aggregates: Aggregates, defaults: HandleOptions = {}) {
    this.aggregates = aggregates;
    this.defaults = defaults;
  }

  handle<C extends Command, S>(decider: Decider<C, S>, command: C, options?: HandleOptions): Promise<CommandResult<S>> {
    return handle(this.aggregates, decider, command, { ...this.defaults, ...options });
  }
}
