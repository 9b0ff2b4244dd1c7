import type { DomainEvent, GoogleAdsAccountLink, KeyScope, PlatformKind } from '../../src/events/catalogue/index.ts';

/** The one run an account may have queued or running. */
export interface ActiveRun {
  readonly runId: string;
  readonly status: 'queued' | 'running';
  readonly keyId: string;
  readonly scope: KeyScope;
  readonly autoApply: boolean;
  readonly brief: string;
  readonly queuedAt: string;
  readonly startedAt: string | null;
  readonly workerId: string | null;
}

/**
 * Decision state of an account: everything the run lifecycle needs and nothing more, so
 * it stays the same size however many runs the account has had.
 */
export interface AccountState {
  readonly exists: boolean;
  readonly name: string;
  readonly workspaceId: string | null;
  readonly platform: PlatformKind | null;
  readonly sandboxSeed: number | null;
  /** The Google Ads customer of a google-ads account. */
  readonly googleAds: GoogleAdsAccountLink | null;
  readonly activeRun: ActiveRun | null;
  readonly runsQueued: number;
  /**
   * The ids of the last RECENT_RUN_IDS runs queued (newest last): a StartRun for one of them is a
   * retry of a request that queued it already (an Idempotency-Key takeover whose first attempt
   * was only slow), never a second RunQueued of the same run. Bounded, so the state keeps its size.
   */
  readonly recentRunIds: readonly string[];
  /** Newest platform change recorded (PlatformChangeObserved), and the ids recorded at exactly that time: what the next import skips. */
  readonly platformChanges: { readonly lastTime: string; readonly idsAtLastTime: readonly string[] };
}

/** Queued runs an account remembers (see AccountState.recentRunIds). */
export const RECENT_RUN_IDS = 16;

/** How an account's events fold into its decision state (the decider is account-decider.ts). */
export const accountFold = {
  // 5: recentRunIds.
  stateVersion: 5,
  initialState: (): AccountState => ({
    exists: false,
    name: '',
    workspaceId: null,
    platform: null,
    sandboxSeed: null,
    googleAds: null,
    activeRun: null,
    runsQueued: 0,
    recentRunIds: [],
    platformChanges: { lastTime: '', idsAtLastTime: [] },
  }),
  evolve(state: AccountState, event: DomainEvent): AccountState {
    switch (event.type) {
      case 'AccountCreated':
        return {
          ...state,
          exists: true,
          name: event.data.name,
          workspaceId: event.workspace_id,
          platform: event.data.platform,
          sandboxSeed: event.data.sandbox_seed,
          googleAds: event.data.google_ads ?? null,
        };
      case 'RunQueued':
        return {
          ...state,
          runsQueued: state.runsQueued + 1,
          recentRunIds: [...state.recentRunIds, event.data.run_id].slice(-RECENT_RUN_IDS),
          activeRun: {
            runId: event.data.run_id,
            status: 'queued',
            keyId: event.data.key_id,
            scope: event.data.scope,
            autoApply: event.data.auto_apply,
            brief: event.data.brief,
            queuedAt: event.time,
            startedAt: null,
            workerId: null,
          },
        };
      case 'RunStarted':
        return state.activeRun?.runId === event.data.run_id
          ? { ...state, activeRun: { ...state.activeRun, status: 'running', startedAt: event.time, workerId: event.data.worker_id } }
          : state;
      case 'PlatformChangeObserved': {
        const time = event.data.change_date_time;
        const seen = state.platformChanges;
        if (time < seen.lastTime) return state;
        const ids = time === seen.lastTime ? [...seen.idsAtLastTime, event.data.change_id] : [event.data.change_id];
        return { ...state, platformChanges: { lastTime: time, idsAtLastTime: ids } };
      }
      case 'RunCanceled':
      case 'RunSucceeded':
      case 'RunFailed':
        return state.activeRun?.runId === event.data.run_id ? { ...state, activeRun: null } : state;
      default:
        return state;
    }
  },
};
