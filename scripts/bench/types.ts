// The shape every benchmark module in scripts/bench/*.ts follows (see scripts/bench.ts).
//   export const name = "eventlog"
//   export const run = async (opts: BenchOptions): Promise<BenchResult> => …
// Ratios are computed against a baseline measured in the same run, on the same machine.

export interface BenchOptions {
  /** `--quick`: fewer iterations (smoke run); figures are noisier. */
  readonly quick: boolean
}

export interface BenchResult {
  /** One row per measurement; printed as a table (columns = union of keys, in first-seen order). */
  readonly rows: Array<Record<string, string | number>>
  /** The figures worth keeping (ratios, throughputs); merged into the final JSON under the module name. */
  readonly summary: Record<string, number | string>
}

export interface BenchModule {
  readonly name: string
  readonly run: (opts: BenchOptions) => Promise<BenchResult>
}
