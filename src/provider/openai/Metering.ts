// The `openai` provider's metering of one chat call (docs/budgets.md): the meter's reservation
// before the call and its settlement, once, with the usage the call reported.
import { Effect } from "effect"
import { ProviderError } from "../../domain/errors.js"
import { estimateOf } from "../../domain/estimate.js"
import { type RequestUsage, UsageAccumulator } from "../../domain/requestUsage.js"
import type { Hold, ModelMeterShape } from "../ModelMeter.js"
import type { ProviderContext } from "../Provider.js"
import type { ChatAccumulator } from "./ChatClient.js"

/**
 * The meter's view of one chat call: its reservation before it (refused: the turn fails saying
 * why), settled once when the call is over — ended, failed or cut short — with the usage it
 * reported (its cost; null: none reported).
 */
export const meterCall = (meter: ModelMeterShape | null, ctx: ProviderContext, model: string) => {
  let hold: Hold | null = null
  let recorded: { readonly usage: RequestUsage; readonly cost_usd: number } | null = null
  const usageOf = (acc: ChatAccumulator): RequestUsage | null => {
    if (acc.rawUsage === null) return null
    const u = new UsageAccumulator(model)
    u.observe(acc.rawUsage)
    return u.result()
  }
  return {
    reserve: (request: unknown): Effect.Effect<void, ProviderError> =>
      meter === null ? Effect.void : meter.reserve(ctx.session_id, estimateOf(Buffer.from(JSON.stringify(request)))).pipe(
        Effect.map((h) => {
          hold = h
        }),
        Effect.mapError((e) => new ProviderError({ provider: "openai", reason: "turn", message: `openai: substrat: ${e.message}` }))
      ),
    // Suspended: `acc` is read when the call's stream is over, not when the step is built.
    settle: (acc: ChatAccumulator): Effect.Effect<void> =>
      Effect.suspend(() => {
        const r = usageOf(acc)
        if (meter === null) {
          recorded = r === null ? null : { usage: r, cost_usd: acc.usage?.cost_usd ?? 0 }
          return Effect.void
        }
        const h = hold
        hold = null
        if (h === null) return Effect.void
        return Effect.map(meter.settle(h, r), (cost_usd) => {
          recorded = r === null ? null : { usage: r, cost_usd }
        })
      }),
    recorded: () => recorded
  }
}
