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
