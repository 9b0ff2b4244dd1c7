/**
 * A seeded pseudo-random source in [0, 1) for fuzz and simulation tests: mulberry32, small,
 * fast, and the same sequence on every machine for a seed, so a failure a seed found is found
 * again by running that seed.
 *
 * @example
 * const random = seededRandom(Number(process.env.FUZZ_SEED ?? 42));
 * const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The draws the fuzz tests make, over {@link seededRandom}: each draw takes one number of the
 * sequence (`sample` and `shuffle` one per element), so a seed replays the same cases.
 *
 * @example
 * const random = new SeededRandom(Number(process.env.FUZZ_SEED ?? 42));
 * random.pick(['a', 'b']); random.int(1, 6); random.chance(0.25);
 */
export class SeededRandom {
  private readonly next: () => number;

  constructor(seed: number) {
    this.next = seededRandom(seed);
  }

  /** In [0, 1). */
  float(): number {
    return this.next();
  }

  /** An integer from `min` to `max`, both included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** Up to `n` distinct elements, in the order drawn. */
  sample<T>(items: readonly T[], n: number): T[] {
    const pool = [...items];
    const out: T[] = [];
    while (out.length < n && pool.length > 0) out.push(pool.splice(Math.floor(this.next() * pool.length), 1)[0]!);
    return out;
  }

  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }
}
