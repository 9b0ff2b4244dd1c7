import type { NatsConnection, Subscription } from '@nats-io/nats-core';

/** Connection events after which a message on a subscription may have been lost. */
const MAY_HAVE_LOST_MESSAGES: ReadonlySet<string> = new Set(['disconnect', 'reconnecting', 'reconnect', 'staleConnection', 'forceReconnect', 'slowConsumer', 'error', 'close']);

/** Something that can say whether its subjects may have changed since it last looked. */
export interface ChangeTracker {
  /**
   * True when an event may have been stored on a tracked subject since the previous call
   * (always true on the first call, and after the connection dropped, when messages can be
   * missed). Look at the state *after* this call: a change during that read shows next time.
   */
  changedSinceLastLook(): boolean;
  /**
   * The caller itself stored `count` events on `subject` since its last look (it holds the state
   * they made, e.g. from its own append): hearing them is no change. Heard later than the next
   * look, they show as one then, which costs a read and misses nothing.
   */
  storedItself(subject: string, count: number): void;
  /** Stops tracking (the feed forgets the subjects no tracker needs any more). */
  release(): void;
}

/**
 * Which subjects of the event log changed, heard for free: JetStream stores a message
 * published on a subject the stream captures, and every core NATS subscriber of that subject
 * hears the same message. So a process that subscribes to a few subject filters can tell
 * "nothing was stored there since I read it" without asking the server — what lets an agent
 * worker skip re-reading a run's key and account before every tool call when neither moved.
 *
 * Only a hint that nothing changed is trusted when nothing was missed: the feed counts a
 * version per tracked subject, and an epoch that moves whenever the connection drops or
 * comes back (messages in between are lost); a tracker that saw another epoch says changed.
 *
 * @example
 * ```ts
 * const feed = await SubjectChangeFeed.start(nc, [subjects.filter('*', '*', 'account')]);
 * const tracker = feed.track([accountSubject]);
 * if (tracker.changedSinceLastLook()) state = await load(accountSubject);
 * tracker.release();
 * ```
 */
export class SubjectChangeFeed {
  private readonly versions = new Map<string, { version: number; trackers: number }>();
  private readonly subscriptions: Subscription[] = [];
  private epoch = 0;
  private stopped = false;

  private constructor() {}

  /** Subscribes to `filters` and resolves once the server has registered the interest. */
  static async start(nc: NatsConnection, filters: readonly string[]): Promise<SubjectChangeFeed> {
    const feed = new SubjectChangeFeed();
    for (const filter of filters) {
      feed.subscriptions.push(
        nc.subscribe(filter, {
          callback: (_error, message) => {
            const entry = feed.versions.get(message.subject);
            if (entry) entry.version++;
          },
        }),
      );
    }
    void (async () => {
      for await (const status of nc.status()) {
        if (feed.stopped) return;
        if (MAY_HAVE_LOST_MESSAGES.has(status.type)) feed.epoch++;
      }
    })().catch(() => undefined);
    // Until the server has the subscriptions, a change could go unheard: a look before then must not trust them.
    await nc.flush();
    return feed;
  }

  track(subjects: readonly string[]): ChangeTracker {
    for (const subject of subjects) {
      const entry = this.versions.get(subject);
      if (entry) entry.trackers++;
      else this.versions.set(subject, { version: 0, trackers: 1 });
    }
    /** The epoch and each subject's version at the last look (none before the first). */
    let seen: { epoch: number; versions: number[] } | undefined;
    let released = false;
    return {
      changedSinceLastLook: () => {
        if (this.stopped || released) return true;
        const now = { epoch: this.epoch, versions: subjects.map((subject) => this.versions.get(subject)!.version) };
        const changed = seen === undefined || now.epoch !== seen.epoch || now.versions.some((version, i) => version !== seen!.versions[i]);
        seen = now;
        return changed;
      },
      storedItself: (subject, count) => {
        const i = subjects.indexOf(subject);
        if (seen && i >= 0) seen.versions[i]! += count;
      },
      release: () => {
        if (released) return;
        released = true;
        for (const subject of subjects) {
          const entry = this.versions.get(subject)!;
          if (--entry.trackers === 0) this.versions.delete(subject);
        }
      },
    };
  }

  stop(): void {
    this.stopped = true;
    for (const subscription of this.subscriptions) subscription.unsubscribe();
  }
}
