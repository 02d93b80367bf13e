// ModelMeter (port): where a provider's model requests are metered and admitted. The daemon
// provides it from the Meter (src/meter/Meter.ts); without it nothing is metered. A CLI provider's
// sandbox then reaches the model through a forwarder of its own (`agents/<sid>/llm-<api>.sock`,
// src/provider/cli/ModelForwarder.ts): the socket is the agent's identity. The openai provider
// (its calls leave from the daemon) calls the port around each request itself.
//
// Each model request is reserved before it leaves and settled when its response is over
// (docs/budgets.md, "Reservations"): the reservation holds the request's most expensive outcome
// against every budget on the agent's path (durable: `usage.reserved` in its log), so requests in
// flight count, and a crash mid-request is charged at the reservation.
import { Context, type Effect } from "effect"
import type { BudgetExceeded, EventLogError } from "../domain/errors.js"
import type { SessionId } from "../domain/ids.js"
import type { RequestEstimate } from "../domain/estimate.js"
import type { RequestUsage } from "../domain/requestUsage.js"

/** One admitted model request's reservation (settle it exactly once). */
export interface Hold {
  readonly id: string
  readonly session: SessionId
  /** USD and tokens held. */
  readonly cost_usd: number
  readonly tokens: number
}

export interface ModelMeterShape {
  /**
   * Reserve `estimate` for the session's next model request: waits while the requests in flight
   * fill what a budget on its path has left; fails with BudgetExceeded once a budget is spent
   * (nothing is held then), or when the reservation cannot be logged.
   */
  readonly reserve: (session: SessionId, estimate: RequestEstimate) => Effect.Effect<Hold, BudgetExceeded | EventLogError>
  /** The request is over: charge `usage` (null: nothing was billed) and release the hold; its cost in USD. */
  readonly settle: (hold: Hold, usage: RequestUsage | null) => Effect.Effect<number>
  /** A request the session's forwarder refused at the door (not a model endpoint): logged, rate-limited. */
  readonly refused: (session: SessionId, request: { readonly method: string; readonly path: string; readonly reason: string }) => Effect.Effect<void>
}

export class ModelMeter extends Context.Tag("substrat/provider/ModelMeter")<ModelMeter, ModelMeterShape>() {}
