import type pg from 'pg';

/** How often a held lease checks that its session is still there. */
export const LEASE_HEARTBEAT_MS = 5000;

export class ProjectorLeaseLostError extends Error {
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`the projectors lease was lost: ${reason}`, options);
    this.name = 'ProjectorLeaseLostError';
  }
}

export interface ProjectorLeaseOptions {
  /**
   * Makes the lease's own connection (not connected yet). Never one of the pool's: the lock
   * lives exactly as long as this session, and a pool would hand the session to other work.
   */
  readonly connect: () => pg.Client;
  /** What the lock stands for; one name per deployment, see {@link projectorLeaseName}. */
  readonly name: string;
  /** How often a held lease checks its session (default {@link LEASE_HEARTBEAT_MS}). */
  readonly heartbeatMs?: number;
}

/**
 * The lease name of the projectors of one deployment: its schema holds the read models and
 * its stream the events, so two deployments on one Postgres (every test file is one) never
 * wait for each other.
 */
export function projectorLeaseName(schema: string, stream: string): string {
  return `adsagent projectors ${schema} ${stream}`;
}

/**
 * Which copy of the projectors role applies events: a Postgres session-level advisory lock,
 * held on a connection of its own. Copies of the role that share one durable consumer hand it
 * back and forth and fall behind while events flow; with the lease one copy projects and the
 * others stand by. Postgres releases the lock when the session ends — the process exits, is
 * killed, or loses its connection — so a standby takes it at its next try, and no lease
 * outlives a dead copy (no expiry to wait for, no clock to trust).
 *
 * The lease is an optimization, not the guarantee: a copy that lost it may finish the batch in
 * hand while the next one starts, which is safe because each projection's checkpoint row is
 * locked in the transaction that applies a batch (nothing is applied twice or skipped).
 *
 * @example
 * const lease = new ProjectorLease({ connect: () => new pg.Client({ connectionString }), name: projectorLeaseName(schema, stream) });
 * if (await lease.tryTake()) {
 *   await projector.start();
 *   lease.lost().then(() => projector.stop());
 * }
 */
export class ProjectorLease {
  private readonly options: ProjectorLeaseOptions;
  private client: pg.Client | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private held = false;
  private loss: { promise: Promise<ProjectorLeaseLostError>; resolve: (error: ProjectorLeaseLostError) => void } | undefined;

  constructor(options: ProjectorLeaseOptions) {
    this.options = options;
  }

  get isHeld(): boolean {
    return this.held;
  }

  /**
   * Takes the lease if no other session holds it. True: held from now until {@link lost}
   * settles or {@link release}. @throws when Postgres cannot be reached (try again later)
   */
  async tryTake(): Promise<boolean> {
    if (this.held) return true;
    const client = await this.connection();
    let taken: boolean;
    try {
      // Within a heartbeat: a connection gone half-open would hold a standby in this query for many minutes.
      const { rows } = await queryWithin<{ taken: boolean }>(client, this.heartbeatMs, 'select pg_try_advisory_lock(hashtextextended($1, 0)) as taken', [this.options.name]);
      taken = rows[0]?.taken === true;
    } catch (error) {
      await this.dropConnection();
      throw error;
    }
    if (taken) this.hold(client);
    return taken;
  }

  /**
   * Settles once the lease is lost: its session ended or stopped answering. The holder must
   * stop projecting; {@link tryTake} may take it again later. Never settles for a release.
   * @throws when the lease was never taken (or was released)
   */
  lost(): Promise<ProjectorLeaseLostError> {
    if (!this.loss) throw new Error('the projectors lease is not held');
    return this.loss.promise;
  }

  /** Gives the lease up (ending the session releases the lock) and closes the connection. */
  async release(): Promise<void> {
    this.held = false;
    this.loss = undefined;
    await this.dropConnection();
  }

  private get heartbeatMs(): number {
    return this.options.heartbeatMs ?? LEASE_HEARTBEAT_MS;
  }

  private async connection(): Promise<pg.Client> {
    if (this.client) return this.client;
    const client = this.options.connect();
    // A session that dies emits 'error'; unheard, that ends the process. Only the current
    // connection speaks for the lease: an old one ending late (a half-open socket closed
    // minutes after it was given up) must not take down the session that holds it now.
    client.on('error', (error) => {
      if (this.client === client) this.lose(`its connection failed (${error.message})`, error);
    });
    client.on('end', () => {
      if (this.client === client) this.lose('its connection ended');
    });
    try {
      await client.connect();
      // Postgres keeps the session of a host that died or was cut off (and its lock) until TCP
      // gives up, hours on Linux's defaults. The holder's heartbeat keeps its session busy every
      // heartbeatMs, a standby's tries every second or so: a session idle for three heartbeats
      // belongs to a copy that is gone, and Postgres ends it, which releases the lease.
      // idle_session_timeout is Postgres 14 or later; an older server keeps the TCP behaviour.
      await client.query(`set idle_session_timeout = ${Math.ceil(this.heartbeatMs * 3)}`).catch(() => undefined);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    this.client = client;
    return client;
  }

  private hold(client: pg.Client): void {
    this.held = true;
    let resolve!: (error: ProjectorLeaseLostError) => void;
    const promise = new Promise<ProjectorLeaseLostError>((settle) => (resolve = settle));
    this.loss = { promise, resolve };
    const every = this.heartbeatMs;
    // A connection can die without a word (a half-open TCP connection after a network fault):
    // a query that does not come back within the interval counts as a lost session.
    this.heartbeat = setInterval(() => {
      queryWithin(client, every, 'select 1').catch((error: unknown) => {
        if (this.client === client) this.lose(`its session did not answer within ${every} ms`, error);
      });
    }, every);
    this.heartbeat.unref();
  }

  private lose(reason: string, cause?: unknown): void {
    const wasHeld = this.held;
    this.held = false;
    void this.dropConnection();
    // The settled loss stays readable until the next take or a release: the holder may ask after the fact.
    if (wasHeld) this.loss?.resolve(new ProjectorLeaseLostError(reason, { cause }));
  }

  private async dropConnection(): Promise<void> {
    clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}

/** A query that fails when its answer does not come within `ms` (pg's own per-query read timeout, which its types leave out). */
function queryWithin<R extends pg.QueryResultRow = pg.QueryResultRow>(client: pg.Client, ms: number, text: string, values: unknown[] = []): Promise<pg.QueryResult<R>> {
  return client.query<R>({ text, values, query_timeout: ms } as pg.QueryConfig);
}
