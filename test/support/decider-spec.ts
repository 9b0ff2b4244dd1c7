import { expect } from 'chai';
import type { Command, Decider } from '../../commands/shared/decider.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';
import type { AppError } from '../../src/errors/app-error.ts';
import { toHttpProblem } from '../../src/http/problems/problem-mapping.ts';

/**
 * Specification-style tests for deciders (after Emmett's DeciderSpecification), pure: the
 * `given` events are folded with the decider's `evolve`, the `when` command is decided, and
 * the `then` events (types, and the data fields named) must be exactly what it decided.
 *
 * ```ts
 * const spec = deciderSpec(accountDecider);
 * spec.given([queued]).when(cancel).then([{ type: 'RunCanceled', data: { run_id } }]);
 * spec.given([running]).when(cancel).thenThrows(RunNotCancelableError);
 * ```
 */
export function deciderSpec<C extends Command, S>(decider: Decider<C, S>) {
  return {
    given(events: readonly Partial<DomainEvent>[]) {
      const state = events.reduce((s, e) => decider.evolve(s, e as DomainEvent), decider.initialState());
      return {
        when(command: C) {
          const act = () => decider.decide(command, state);
          return {
            then(expected: readonly { type: string; data?: Record<string, unknown> }[]) {
              const produced = act();
              expect(produced.map((e) => e.type)).to.deep.equal(expected.map((e) => e.type));
              expected.forEach((e, i) => {
                if (e.data) expect(produced[i]!.data).to.deep.include(e.data);
              });
            },
            thenNothing() {
              expect(act()).to.deep.equal([]);
            },
            thenThrows(errorClass: new (...args: any[]) => Error, status?: number) {
              let thrown: unknown;
              try {
                act();
              } catch (error) {
                thrown = error;
              }
              expect(thrown, 'expected the decision to be refused').to.be.instanceOf(errorClass);
              // Errors carry a kind and a code; the status is what the HTTP edge maps them to.
              if (status !== undefined) expect(toHttpProblem(thrown as AppError).status).to.equal(status);
            },
          };
        },
      };
    },
  };
}

/** A recorded event for `given`: only the fields a fold reads. */
export function recorded<T extends DomainEvent['type']>(type: T, data: Extract<DomainEvent, { type: T }>['data'], extra: Partial<DomainEvent> = {}) {
  return { type, data, time: '2026-11-21T10:00:00.000Z', workspace_id: 'ws', account_id: 'acc', id: 'evt', actor: { kind: 'system', id: 'test' }, ...extra } as unknown as DomainEvent;
}
