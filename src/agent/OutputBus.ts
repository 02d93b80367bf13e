// OutputBus: live output of every agent (turns, text chunks, tool calls, messages to USER) for
// `agent attach` and embedders. A PubSub: subscribers see what happens after they subscribe.
import { Context, Effect, Layer, PubSub, Schema, type Scope, Stream } from "effect"
import { AgentId } from "../domain/ids.js"
import { MessageEnvelope } from "../domain/message.js"

export const AgentOutput = Schema.Union(
  Schema.TaggedStruct("TurnStarted", { agent_id: AgentId, turn_id: Schema.String, prompt: Schema.String }),
  Schema.TaggedStruct("Text", { agent_id: AgentId, turn_id: Schema.String, text: Schema.String }),
  Schema.TaggedStruct("ToolCalled", {
    agent_id: AgentId,
    turn_id: Schema.String,
    tool: Schema.String,
    arguments: Schema.Unknown,
    result: Schema.Unknown,
    is_error: Schema.Boolean
  }),
  Schema.TaggedStruct("TurnCompleted", {
    agent_id: AgentId,
    turn_id: Schema.String,
    response: Schema.String,
    error: Schema.NullOr(Schema.String)
  }),
  Schema.TaggedStruct("MessageToUser", { agent_id: AgentId, message: MessageEnvelope })
)
export type AgentOutput = typeof AgentOutput.Type

export class OutputBus extends Context.Tag("substrat/OutputBus")<OutputBus, {
  readonly publish: (o: AgentOutput) => Effect.Effect<void>
  /** Everything published from now on (all agents). Scoped subscription inside the stream. */
  readonly stream: Stream.Stream<AgentOutput>
  /** Subscribe now (nothing published after this returns is missed); ends with the scope. */
  readonly subscribe: Effect.Effect<Stream.Stream<AgentOutput>, never, Scope.Scope>
}>() {
  static readonly layer: Layer.Layer<OutputBus> = Layer.scoped(
    OutputBus,
    Effect.gen(function*() {
      const hub = yield* Effect.acquireRelease(PubSub.unbounded<AgentOutput>(), PubSub.shutdown)
      return {
        publish: (o) => PubSub.publish(hub, o).pipe(Effect.asVoid),
        stream: Stream.fromPubSub(hub),
        subscribe: PubSub.subscribe(hub).pipe(Effect.map((q) => Stream.fromQueue(q)))
      }
    })
  )
}
