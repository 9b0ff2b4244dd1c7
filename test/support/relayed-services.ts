import type { Config } from '../../src/config/config.ts';
import type { Logger } from '../../src/log/logger.ts';
import { createLogger } from '../../src/log/logger.ts';
import { startService, type RunningService } from '../../src/runtime/service.ts';
import { dropIsolated, isolatedConfig } from './isolation.ts';
import { LostAckRelay } from './lost-ack-relay.ts';
import { PrivateNats } from './private-nats.ts';

/** What a JetStream request of process A waits for its answer: a lost answer is known lost sooner than the default 5 s. */
export const RELAYED_REQUEST_TIMEOUT_MS = 1500;

/**
 * Two service processes sharing a private nats-server and one database: B reaches NATS
 * directly, with the roles asked for; A runs the http role only and reaches NATS through a
 * {@link LostAckRelay}, so a publish of A can be stored while its acknowledgement is lost.
 *
 * @example
 * const pair = await RelayedServices.start('lostack', { ROLES: 'http,projectors' });
 * pair.relay.arm(['ActionApproved']);
 * await fetch(`${pair.url.A}/api/v1/...`, ...); // 503 after RELAYED_REQUEST_TIMEOUT_MS
 * await pair.stop();
 */
export class RelayedServices {
  /** Connection statuses of A's NATS client (disconnect, reconnect, ...), with when they came. */
  readonly statusesOfA: { readonly at: number; readonly type: string }[] = [];
  readonly url: { readonly A: string; readonly B: string };
  readonly nats: PrivateNats;
  readonly relay: LostAckRelay;
  readonly config: Config;
  readonly a: RunningService;
  readonly b: RunningService;

  private constructor(nats: PrivateNats, relay: LostAckRelay, config: Config, a: RunningService, b: RunningService) {
    this.nats = nats;
    this.relay = relay;
    this.config = config;
    this.a = a;
    this.b = b;
    this.url = { A: a.http!.url, B: b.http!.url };
    void (async () => {
      for await (const status of a.infrastructure.nc.status()) this.statusesOfA.push({ at: performance.now(), type: status.type });
    })().catch(() => undefined);
  }

  /**
   * @param env configuration of both (ROLES is B's; A runs http only)
   * @param loggerOfA where A logs (silent by default)
   */
  static async start(label: string, env: Record<string, string>, loggerOfA: Logger = createLogger('silent')): Promise<RelayedServices> {
    const nats = await PrivateNats.start();
    const relay = new LostAckRelay(nats.port);
    await relay.listen();
    const config = isolatedConfig(label, { ...env, NATS_URL: nats.url });
    let b: RunningService | undefined;
    try {
      b = await startService(config, createLogger('silent'));
      const a = await startService({ ...config, natsUrl: relay.url, roles: ['http'], natsRequestTimeoutMs: RELAYED_REQUEST_TIMEOUT_MS }, loggerOfA);
      return new RelayedServices(nats, relay, config, a, b);
    } catch (error) {
      await b?.stop().catch(() => undefined);
      await relay.close().catch(() => undefined);
      await nats.dispose().catch(() => undefined);
      throw error;
    }
  }

  async stop(): Promise<void> {
    await this.a.stop().catch(() => undefined);
    await this.b.stop().catch(() => undefined);
    await this.relay.close().catch(() => undefined);
    await dropIsolated(this.config).catch(() => undefined);
    await this.nats.dispose().catch(() => undefined);
  }
}
