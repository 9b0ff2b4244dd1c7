import { expect } from 'chai';
import type { UnsealedEvent } from '../../src/events/envelope.ts';
import type { DomainEvent } from '../../src/events/catalogue/index.ts';

/**
 * Specification-style tests for deciders (after Emmett's DeciderSpecification):
 *
 * ```ts
 * spec.given([queued]).when(cancel).then([{ type: 'RunCanceled', data: { run_id } }]);
 * spec.given([running]).when(cancel).thenThrows(RunNotCancelableError);
 * ```
 */
export function deciderSpec<C, S>(folder: { initialState(): S; evolve(state: S, event: DomainEvent): S }, decide: (command: C, state: S) => readonly UnsealedEvent[]) {
  return {
    given(events: readonly Partial<DomainEvent>[]) {
      const state = events.reduce((s, e) => folder.evolve(s, e as DomainEvent), folder.initialState());
      return {
        when(command: C) {
          const act = () => decide(command, state);
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
              if (status !== undefined) expect((thrown as { status?: number }).status).to.equal(status);
            },
          };
        },
      };
    },
  };
}

/** A recorded event for `given`: only the fields a fold reads. */
export function recorded<T extends DomainEvent['type']>(type: T, data: Extract<DomainEvent, { type: T }>['data'], extra: Partial<DomainEvent> = {}) {
  return { type, data, time: '2026-11-21T10:00:00.000Z', workspace_id: 'ws', account_id: 'acc', ...extra } as unknown as DomainEvent;
}
