// `agent.attach` and `agent.logs`: what an agent says and hears, live (its OutputBus and the
// messages the event tap sees reach it), and its transcript line by line.
import { Effect, Option, Stream } from "effect"
import { Orchestrator } from "../../agent/Orchestrator.js"
import type { AgentOutput } from "../../agent/OutputBus.js"
import { forPeople } from "../../agent/Prompt.js"
import type { AgentNode } from "../../domain/agent.js"
import { EventTap } from "../../storage/EventTap.js"
import { Meter } from "../../meter/Meter.js"
import type { Resolver } from "../Resolver.js"
import type { OutputEvent } from "../../protocol/AdminRpcs.js"
import { Transcript } from "../Transcript.js"
import { clip, nameOf, shortJson } from "./Shared.js"

export const makeOutputHandlers = (resolver: Resolver) => Effect.gen(function*() {
  const orchestrator = yield* Orchestrator
  const tap = yield* EventTap
  const meter = yield* Meter
  const transcript = yield* Transcript
  yield* transcript.learn(yield* orchestrator.list)

  const outputEvent = (node: AgentNode) => (o: AgentOutput): Effect.Effect<Option.Option<OutputEvent>> =>
    Effect.gen(function*() {
      const base = { ts: new Date().toISOString(), agent_id: node.id }
      switch (o._tag) {
        case "TurnStarted":
          return Option.some({ ...base, kind: "turn.start" as const, from: node.name, text: clip(forPeople(o.prompt)) })
        case "Text":
          return Option.some({ ...base, kind: "text" as const, from: node.name, text: o.text })
        case "ToolCalled":
          return Option.some({
            ...base,
            kind: "tool" as const,
            text: `${o.tool}(${shortJson(o.arguments)}) → ${o.is_error ? "error: " : ""}${shortJson(o.result)}`
          })
        case "TurnCompleted":
          return Option.some(
            o.error === null
              ? { ...base, kind: "turn.complete" as const, text: o.response }
              : { ...base, kind: "error" as const, text: o.error }
          )
        case "MessageToUser": {
          // Shown to the human by attach: out of the inbox (best effort).
          yield* Effect.ignore(meter.markRead([o.message.id]))
          const tree = yield* orchestrator.list
          return Option.some({ ...base, kind: "message" as const, from: nameOf(o.message.sender, tree), to: "USER", text: o.message.payload })
        }
      }
    })

  /** What the agent hears (messages from other agents) and its end (`end`: its termination), from the event tap. */
  const heard = (node: AgentNode): Stream.Stream<{ readonly event: OutputEvent; readonly end: boolean }> =>
    Stream.unwrapScoped(Effect.map(tap.subscribe, (q) =>
      Stream.fromQueue(q).pipe(
        Stream.filter((e) => e.session_id === node.session_id),
        Stream.mapEffect((e): Effect.Effect<Option.Option<{ readonly event: OutputEvent; readonly end: boolean }>> =>
          Effect.gen(function*() {
            if (e.event === "agent.terminated" && e.data.agent_id === node.id) {
              return Option.some({ event: { ts: e.ts, agent_id: node.id, kind: "state" as const, text: `${node.name} terminated` }, end: true })
            }
            if (e.event === "message.enqueued" && e.data.recipient === node.id && e.data.sender !== "USER") {
              const tree = yield* orchestrator.list
              const event: OutputEvent = {
                ts: e.ts,
                agent_id: node.id,
                kind: "message",
                from: e.data.sender === "SYSTEM" ? "SYSTEM" : nameOf(e.data.sender, tree),
                to: node.name,
                text: e.data.payload
              }
              return Option.some({ event, end: false })
            }
            return Option.none()
          })),
        Stream.filterMap((x) => x)
      )))

  return {
    "agent.attach": (p: { readonly agent: string }) =>
      Stream.unwrap(Effect.map(resolver.liveAgent(p.agent), (node) =>
        Stream.merge(
          orchestrator.output(node.id).pipe(
            Stream.mapEffect(outputEvent(node)),
            Stream.filterMap((x) => Option.map(x, (event) => ({ event, end: false })))
          ),
          heard(node)
        ).pipe(Stream.takeUntil((x) => x.end), Stream.map((x) => x.event)))),

    "agent.logs": (p: { readonly agent: string; readonly follow?: boolean | undefined }) =>
      Stream.unwrap(Effect.map(
        resolver.agent(p.agent, { terminated: true }),
        (a) => transcript.lines(a.node.session_id, p.follow ?? false)
      ))
  }
})
