import type { ActionKind, DomainEvent, RiskTier } from '../../src/events/catalogue/index.ts';

export const ACTION_STATUSES = ['proposed_queued', 'proposed_auto_applied', 'blocked'] as const;

/** Decision state of one action (subject `...action.<actionId>`). */
export interface ActionState {
  readonly exists: boolean;
  readonly kind: ActionKind | null;
  readonly riskTier: RiskTier | null;
  readonly status: 'none' | 'queued' | 'auto_applied' | 'blocked';
}

export const actionFolder = {
  stateVersion: 1,
  initialState: (): ActionState => ({ exists: false, kind: null, riskTier: null, status: 'none' }),
  evolve(state: ActionState, event: DomainEvent): ActionState {
    switch (event.type) {
      case 'ActionProposed':
        return { exists: true, kind: event.data.kind, riskTier: event.data.risk_tier, status: event.data.disposition };
      default:
        return state;
    }
  },
};
