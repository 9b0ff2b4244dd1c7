/**
 * A small seeded pseudo-random generator (mulberry32). Sandbox accounts must be
 * reproducible from their seed alone, so generation never touches Math.random.
 */
export class SeededRandom {
  private state: number;

  /** @param seed any integer; only its low 32 bits matter. */
  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    // mulberry32: tiny, fast and well distributed enough for synthetic data.
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** A float in [min, max). */
  float(min: number, max: number): number {
    return min + (max - min) * this.next();
  }

  /** An integer in [min, max], both inclusive. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[Math.floor(this.next() * items.length)] as T;
  }

  /** A shuffled copy (Fisher–Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const copy = [...items];
    for (let i = copy.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1));
      [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
    }
    return copy;
  }

  /** `count` distinct elements, in random order. */
  sample<T>(items: readonly T[], count: number): T[] {
    return this.shuffle(items).slice(0, count);
  }

  /**
   * Successes in `trials` Bernoulli trials of probability `p`: exact for small counts,
   * a rounded normal approximation for large ones (keeps generation fast).
   */
  binomial(trials: number, p: number): number {
    if (trials <= 0 || p <= 0) return 0;
    if (p >= 1) return trials;
    if (trials < 60) {
      let successes = 0;
      for (let i = 0; i < trials; i++) if (this.next() < p) successes++;
      return successes;
    }
    const mean = trials * p;
    const sd = Math.sqrt(mean * (1 - p));
    return Math.min(trials, Math.max(0, Math.round(mean + sd * this.gaussian())));
  }

  /** A standard normal sample (Box–Muller). */
  gaussian(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** An independent generator for a named part, so adding draws in one part does not reshuffle another. */
  fork(label: string): SeededRandom {
    let hash = this.state ^ 0x9e3779b9;
    for (const char of label) hash = Math.imul(hash ^ char.charCodeAt(0), 16777619) >>> 0;
    return new SeededRandom(hash);
  }
}
