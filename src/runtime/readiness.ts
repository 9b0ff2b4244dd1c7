import { pingDatabase } from '../db/database.ts';
import type { ReadinessCheck } from '../http/health-routes.ts';
import { CopyRole, type LeasedProjector } from '../../projections/runtime/leased-projector.ts';
import { countQuarantined } from '../../projections/runtime/quarantine.ts';
import { readCheckpoint } from '../../projections/runtime/checkpoints.ts';
import { PROJECTIONS } from '../../projections/index.ts';
import type { Infrastructure } from './infrastructure.ts';

/** A projector further behind the stream than this is reported not ready. */
export const READY_LAG_EVENTS = 1000;

/**
 * /readyz: NATS connected, Postgres answering, every projector caught up and not stalled.
 * Parked events (the quarantine) are named in the projections detail but do not make the
 * instance unready: the projectors went past them, and every other tenant is served.
 */
export function readinessChecks(options: {
  infrastructure: Infrastructure;
  /** This process's copy of the projectors role; read at each check, so it may come after the checks are made. */
  projectorCopy: () => LeasedProjector | undefined;
  /** Whether this process has the projectors role. */
  runsProjectors: boolean;
}): ReadinessCheck[] {
  const { infrastructure, projectorCopy, runsProjectors } = options;
  /** Each read model's checkpoint as Postgres holds it (null: never built on this database). */
  const storedCheckpoints = async () =>
    Promise.all(PROJECTIONS.map(async ({ name }) => ({ name, checkpoint: await readCheckpoint(infrastructure.database.db, name) })));
  const checks: ReadinessCheck[] = [
    {
      name: 'nats',
      check: async () => {
        if (infrastructure.nc.isClosed()) return { ok: false, detail: 'connection closed' };
        await infrastructure.nc.flush();
        return { ok: true };
      },
    },
    {
      name: 'postgres',
      check: async () => {
        await pingDatabase(infrastructure.database.db);
        return { ok: true };
      },
    },
  ];
  if (!runsProjectors) {
    // The read models this process serves are built elsewhere: until a projector has run on
    // this database its tables do not exist, and every read would answer 503.
    checks.push({
      name: 'read models',
      check: async () => {
        const missing = (await storedCheckpoints()).filter(({ checkpoint }) => checkpoint === null).map(({ name }) => name);
        return missing.length === 0
          ? { ok: true }
          : { ok: false, detail: `not built yet: ${missing.join(', ')} (no process with the projectors role has run on this database)` };
      },
    });
  } else {
    checks.push({
      name: 'projections',
      check: async () => {
        const copy = projectorCopy();
        if (!copy || copy.role === CopyRole.Stopped) return { ok: false, detail: 'the projectors are starting' };
        const head = await infrastructure.store.lastSequence();
        // A standby judges the read models by the checkpoints the active copy writes.
        const statuses =
          copy.role === CopyRole.Active
            ? copy.statuses()
            : (await storedCheckpoints()).map(({ name, checkpoint }) => ({ name, lastSeq: checkpoint?.lastSeq ?? 0, stalled: false, lastError: null }));
        const behind = statuses
          .filter((s) => s.stalled || head - s.lastSeq > READY_LAG_EVENTS)
          .map((s) => (s.stalled ? `${s.name} stalled: ${s.lastError}` : `${s.name} at ${s.lastSeq} of ${head}`));
        const standing = copy.role === CopyRole.Standby ? 'standby (another copy holds the projectors lease); ' : '';
        const parked = describeQuarantine(await countQuarantined(infrastructure.database.db));
        return behind.length === 0
          ? { ok: true, detail: `${standing}caught up at ${head}${parked}` }
          : { ok: false, detail: `${standing}${behind.join('; ')}${parked}` };
      },
    });
  }
  return checks;
}

function describeQuarantine(counts: ReadonlyMap<string, number>): string {
  if (counts.size === 0) return '';
  const total = [...counts.values()].reduce((sum, count) => sum + count, 0);
  const perProjection = [...counts].map(([name, count]) => `${name}: ${count}`).join(', ');
  return `; ${total} event(s) parked in quarantine (${perProjection}), see adsagent projections quarantine list`;
}
