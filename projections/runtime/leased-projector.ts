import type { Logger } from '../../src/log/logger.ts';
import type { Projector, ProjectorStatus } from './projector.ts';
import type { ProjectorLease } from './projector-lease.ts';

/** Where a copy of the projectors role stands. */
export const CopyRole = {
  /** Holds the lease and runs the projectors. */
  Active: 'active',
  /** Another copy holds the lease; this one tries to take it every poll. */
  Standby: 'standby',
  Stopped: 'stopped',
} as const;
export type CopyRole = (typeof CopyRole)[keyof typeof CopyRole];

/** How often a standby tries to take the lease: the most a takeover waits after the active copy died. */
export const STANDBY_POLL_MS = 1000;

export interface LeasedProjectorOptions {
  readonly lease: ProjectorLease;
  /** A projector for each time this copy becomes active (a stopped one cannot start again). */
  readonly projector: () => Projector;
  readonly logger: Logger;
  readonly pollMs?: number;
}

/**
 * One copy of the projectors role: it runs its projectors only while it holds the lease
 * (projector-lease.ts), and stands by otherwise, so any number of copies can run for
 * availability while one applies. When the active copy dies its session ends, Postgres
 * releases the lock, and a standby takes over within {@link STANDBY_POLL_MS}, from the
 * checkpoints in Postgres. A copy that loses the lease (its connection to Postgres failed)
 * stops projecting and stands by.
 *
 * @example
 * const copy = new LeasedProjector({ lease, projector: () => new Projector(options), logger });
 * await copy.start(); // active at once when no other copy holds the lease
 * copy.role; // 'active' | 'standby'
 */
export class LeasedProjector {
  private readonly options: LeasedProjectorOptions;
  private current: Projector | undefined;
  private state: CopyRole = CopyRole.Stopped;
  private running = false;
  private supervising: Promise<void> | undefined;
  private starting: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private takeoverCount = 0;

  constructor(options: LeasedProjectorOptions) {
    this.options = options;
  }

  get role(): CopyRole {
    return this.state;
  }

  /** The projector this copy runs while active. */
  get projector(): Projector | undefined {
    return this.current;
  }

  /** Times this copy became active after standing by. */
  get takeovers(): number {
    return this.takeoverCount;
  }

  /** What this copy's projectors report; none while it stands by. */
  statuses(): ProjectorStatus[] {
    return this.current?.statuses() ?? [];
  }

  /**
   * Takes the lease when it is free and starts projecting before it returns (a start that fails
   * gives the lease back and throws, as a projector's own would); otherwise returns at once as a
   * standby. @throws when Postgres cannot be reached
   */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.starting = this.takeOrStandBy();
    try {
      await this.starting;
    } catch (error) {
      this.running = false;
      await this.options.lease.release();
      throw error;
    }
    this.supervising = this.supervise();
  }

  /** Stops projecting (the batch in hand is finished) and gives the lease up. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.wake?.();
    // A stop during start() waits for it: the projector it may be starting is stopped below.
    await this.starting?.catch(() => undefined);
    await this.supervising;
    await this.stopProjector();
    await this.options.lease.release();
    this.state = CopyRole.Stopped;
  }

  private async takeOrStandBy(): Promise<void> {
    if (await this.options.lease.tryTake()) {
      await this.activate();
    } else {
      this.state = CopyRole.Standby;
      this.options.logger.info({}, 'another copy of the projectors role holds the lease; this one stands by');
    }
  }

  /** Stops the projector this copy runs, if any; a failing stop is logged, never the end of the copy. */
  private async stopProjector(): Promise<void> {
    const projector = this.current;
    this.current = undefined;
    try {
      await projector?.stop();
    } catch (error) {
      this.options.logger.error({ err: error instanceof Error ? error.message : String(error) }, 'the projectors of this copy did not stop cleanly');
    }
  }

  private async activate(): Promise<void> {
    const projector = this.options.projector();
    await projector.start();
    this.current = projector;
    this.state = CopyRole.Active;
  }

  private async supervise(): Promise<void> {
    const { lease, logger } = this.options;
    while (this.running) {
      if (this.state === CopyRole.Active) {
        const lost = await Promise.race([lease.lost(), this.untilWoken()]);
        if (!this.running || lost === undefined) continue;
        logger.error({ err: lost.message }, 'this copy lost the projectors lease; it stops projecting and stands by');
        this.state = CopyRole.Standby;
        await this.stopProjector();
        continue;
      }
      await Promise.race([sleep(this.options.pollMs ?? STANDBY_POLL_MS), this.untilWoken()]);
      if (!this.running) break;
      try {
        if (!(await lease.tryTake())) continue;
      } catch (error) {
        logger.warn({ err: error instanceof Error ? error.message : String(error) }, 'a standby copy of the projectors role could not reach Postgres to take the lease; it tries again');
        continue;
      }
      try {
        await this.activate();
      } catch (error) {
        logger.error({ err: error instanceof Error ? error.message : String(error) }, 'this copy took the projectors lease but its projectors did not start; it gives the lease back and tries again');
        await lease.release();
        continue;
      }
      this.takeoverCount++;
      logger.warn({ takeovers: this.takeoverCount }, 'this copy took over the projectors lease; it projects from the checkpoints');
    }
  }

  private untilWoken(): Promise<undefined> {
    return new Promise((resolve) => {
      this.wake = () => resolve(undefined);
    });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
