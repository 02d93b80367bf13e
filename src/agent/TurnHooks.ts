// TurnHooks: called after every completed or failed turn (e.g. the sandbox's per-turn workspace
// diff). Default: no-op. A hook's failure is logged by the caller and never breaks the turn.
import { Context, Effect, Layer } from "effect"
import type { AgentNode } from "../domain/agent.js"
import type { TurnOutcome } from "./Turn.js"

export class TurnHooks extends Context.Tag("substrat/TurnHooks")<TurnHooks, {
  readonly afterTurn: (agent: AgentNode, outcome: TurnOutcome) => Effect.Effect<void, unknown>
}>() {
  static readonly noop: Layer.Layer<TurnHooks> = Layer.succeed(TurnHooks, { afterTurn: () => Effect.void })
}
