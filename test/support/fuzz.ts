// Shared fast-check profiles. `ci` (default, part of `npm test`): derandomised — a fixed seed,
// moderate run counts, reproducible. `nightly` (`SUBSTRAT_FUZZ=nightly`): random seed, many
// runs. Use `fuzzParams(n)` to scale a suite's own base run count.
import type fc from "fast-check"

export type FuzzProfileName = "ci" | "nightly"

export interface FuzzProfile {
  readonly name: FuzzProfileName
  /** Multiplier applied to a suite's base `numRuns`. */
  readonly scale: number
  /** Base fast-check parameters (seed fixed in ci). */
  readonly params: fc.Parameters<unknown>
}

export const fuzzProfile: FuzzProfile = process.env["SUBSTRAT_FUZZ"] === "nightly"
  ? { name: "nightly", scale: 20, params: { numRuns: 2000, endOnFailure: true } }
  : { name: "ci", scale: 1, params: { numRuns: 100, seed: 0x5eed, endOnFailure: true } }

/** fast-check parameters for a property whose ci run count is `ciRuns` (nightly: × scale). */
export const fuzzParams = <T = unknown>(ciRuns: number, extra: fc.Parameters<T> = {}): fc.Parameters<T> => ({
  ...(fuzzProfile.params as fc.Parameters<T>),
  numRuns: Math.max(1, Math.round(ciRuns * fuzzProfile.scale)),
  ...extra
})

/** Small seeded PRNG (mulberry32) for real-process stress tests that are not fast-check properties. */
export const prng = (seed: number) => () => {
  seed |= 0
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
