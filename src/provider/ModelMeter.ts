// ModelMeter (port): where a provider's model requests are metered and admitted. The daemon
// provides it from the Meter (src/meter/Meter.ts); without it nothing is metered. A CLI provider's
// sandbox then reaches the model through a forwarder of its own (`agents/<sid>/llm-<api>.sock`,
// src/provider/cli/ModelForwarder.ts): the socket is the agent's identity. The openai provider
// (its calls leave from the daemon) calls the port around each request itself.
import { Context, type Effect } from "effect"
import type { SessionId } from "../domain/ids.js"
import type { RequestUsage } from "../meter/RequestUsage.js"

export interface ModelMeterShape {
  /** Null: the session may send its next model request; else why not (a spent budget). */
  readonly admit: (session: SessionId) => Effect.Effect<string | null>
  /** One model request's usage (durable before it returns: a `usage` event in the session's log); its cost in USD. */
  readonly record: (session: SessionId, usage: RequestUsage) => Effect.Effect<number>
}

export class ModelMeter extends Context.Tag("substrat/provider/ModelMeter")<ModelMeter, ModelMeterShape>() {}
