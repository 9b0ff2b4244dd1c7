import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * Where a benchmark's CPU goes while it measures: this process (the in-process service), and
 * the whole machine (NATS, Postgres and the load client too), each per request. On a 2-core
 * machine the service competes with its own dependencies, so both matter. Also how long this
 * process's event loop was held up, which bounds the latency of whatever arrives meanwhile.
 */
export interface CpuShare {
  /** CPU time of this process per request, in µs. */
  readonly processMicros: number;
  /** CPU time of every process on the machine per request, in µs (from /proc/stat). */
  readonly machineMicros: number;
  /**
   * CPU time of the machine's nats-server and postgres processes per request, in µs, backends
   * that ended meanwhile included (NaN where /proc is missing, or a service was restarted).
   */
  readonly natsMicros: number;
  readonly postgresMicros: number;
  /** This process's event-loop delay meanwhile, in ms: what a request arriving during a long synchronous stretch waits. */
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
}

/** Busy jiffies of all CPUs (everything but idle and iowait), in µs; null where /proc/stat is missing. */
function machineBusyMicros(): number | null {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = fields;
    // USER_HZ is 100 on every Linux this runs on.
    return ((user! + nice! + system! + irq! + softirq! + (steal ?? 0)) * 1_000_000) / 100;
  } catch {
    return null;
  }
}

/** The machine's backing services, by the command name /proc gives their processes. */
const SERVICES = ['nats-server', 'postgres'] as const;
type ServiceTimes = Record<(typeof SERVICES)[number], number>;

/** CPU time (user + system) of each service's processes, in µs, from one walk of /proc; null without /proc. */
function servicesBusyMicros(): ServiceTimes | null {
  try {
    const totals: ServiceTimes = { 'nats-server': 0, postgres: 0 };
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const close = stat.lastIndexOf(')');
        const comm = stat.slice(stat.indexOf('(') + 1, close);
        if (!(SERVICES as readonly string[]).includes(comm)) continue;
        const fields = stat.slice(close + 2).split(' ');
        // utime and stime are fields 14 and 15 of /proc/PID/stat; fields[0] here is field 3. Fields
        // 16 and 17 (cutime, cstime) hold the children it reaped: Postgres's postmaster reaps every
        // backend, so a connection that closed during the measurement keeps its count there.
        const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
        totals[comm as keyof ServiceTimes] += (ticks * 1_000_000) / 100;
      } catch {
        // The process ended meanwhile.
      }
    }
    return totals;
  } catch {
    return null;
  }
}

/** Per request, or NaN where /proc is missing or a process ended meanwhile and took its count with it. */
function perRequest(before: number | undefined, after: number | undefined, n: number): number {
  return before === undefined || after === undefined || after < before ? NaN : (after - before) / n;
}

/**
 * Runs `work`, returning its value and the CPU spent per `count(value)` requests. With
 * BENCH_PROFILE=DIR set, also writes a V8 CPU profile of this process during `work` to
 * DIR/<label>.cpuprofile (open it in Chrome DevTools). With BENCH_HEAP_PROFILE=DIR, a sampled
 * allocation profile of `work` instead, garbage included (what each request allocates, not only
 * what it keeps), to DIR/<label>.heapprofile.
 */
export async function accountCpu<T>(label: string, work: () => Promise<T>, count: (value: T) => number): Promise<{ value: T; cpu: CpuShare }> {
  const profileDir = process.env.BENCH_PROFILE;
  const heapProfileDir = process.env.BENCH_HEAP_PROFILE;
  const session = profileDir || heapProfileDir ? new Session() : undefined;
  if (session) {
    session.connect();
    if (heapProfileDir) {
      await session.post('HeapProfiler.enable');
      await session.post('HeapProfiler.startSampling', { samplingInterval: 16_384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } as never);
    } else {
      await session.post('Profiler.enable');
      await session.post('Profiler.start');
    }
  }
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  const machineBefore = machineBusyMicros();
  const servicesBefore = servicesBusyMicros();
  const before = process.cpuUsage();
  const value = await work();
  const used = process.cpuUsage(before);
  const machineAfter = machineBusyMicros();
  const servicesAfter = servicesBusyMicros();
  loop.disable();
  if (session && profileDir) {
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    await mkdir(profileDir, { recursive: true });
    await writeFile(join(profileDir, `${label.replace(/[^a-z0-9]+/gi, '-')}.cpuprofile`), JSON.stringify(profile));
  } else if (session && heapProfileDir) {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    session.disconnect();
    await mkdir(heapProfileDir, { recursive: true });
    await writeFile(join(heapProfileDir, `${label.replace(/[^a-z0-9]+/gi, '-')}.heapprofile`), JSON.stringify(profile));
  }
  const n = Math.max(1, count(value));
  return {
    value,
    cpu: {
      processMicros: (used.user + used.system) / n,
      machineMicros: machineBefore === null || machineAfter === null ? NaN : (machineAfter - machineBefore) / n,
      natsMicros: perRequest(servicesBefore?.['nats-server'], servicesAfter?.['nats-server'], n),
      postgresMicros: perRequest(servicesBefore?.postgres, servicesAfter?.postgres, n),
      loopDelayP99Ms: loop.percentile(99) / 1e6,
      loopDelayMaxMs: loop.max / 1e6,
    },
  };
}
