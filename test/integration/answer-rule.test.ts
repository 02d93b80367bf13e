// The answer rule (docs/messaging.md, "When a user's request is answered"): USER's request is
// answered by the text of the agent's turn that ends with none of its own requests outstanding
// (or by an explicit reply); earlier turn texts reach USER as progress. Through the orchestration
// stack (scripted provider, file logs), and across a crash (recovery keeps the request open).
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as fs from "node:fs"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { makePaths } from "../../src/config/Paths.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { Recovery } from "../../src/recovery/Recovery.js"
import { Durable } from "../../src/storage/Durable.js"
import { withTmp } from "../support/tmp.js"
import { tmpDir } from "../support/tmpDir.js"
import { dataOf, eventsOf, stack } from "./orchestration.support.js"
import { readLogEvents, startLife, trackedScripted } from "./recovery.support.js"

/** lead asks a and b (sync) in its first turn; each reply is a turn of its own; children answer at once. */
const team: Scripts = {
  lead: {
    steps: [
      {
        tools: [
          { tool: "spawn_agent", args: { name: "a", instructions: "work" } },
          { tool: "spawn_agent", args: { name: "b", instructions: "work" } },
          { tool: "send_message", args: { recipient: "a", text: "part one?", sync: true } },
          { tool: "send_message", args: { recipient: "b", text: "part two?", sync: true } }
        ],
        text: "asked a and b"
      },
      { text: "one reply in" },
      { text: "final: both answered" }
    ],
    after: "silent"
  },
  a: { steps: [{ text: "a done" }], after: "silent" },
  b: { steps: [{ text: "b done" }], after: "silent" }
}

const toUserOf = (o: Orchestrator, agent: Parameters<Orchestrator["userMessages"]>[0]) =>
  Effect.map(o.userMessages(agent), (ms) => ms.map((m) => ({ text: m.payload, kind: m.kind, reply_to: m.reply_to, progress: m.progress ?? false })))

type LogLine = { readonly event: string; readonly data: Record<string, unknown> }

/**
 * The team's first life on `home` (lead asked "build it", run until idle), then the crash: lead's
 * log is cut from its first line matching `at` (logs are append-only: a crash = a lost suffix).
 * Returns the registry and the ids, and the line before the cut.
 */
const crashedTeam = async (home: string, at: (e: LogLine) => boolean) => {
  const registry = trackedScripted(team, { messages: [] }, () => true)
  const rt = startLife(home, Durable.layer, registry)
  let ids: { lead: string; request: string }
  try {
    ids = await rt.runPromise(Effect.flatMap(Orchestrator, (o) =>
      Effect.gen(function*() {
        const lead = yield* o.createRoot({ name: "lead", instructions: "lead", provider: "scripted" })
        const { message_id } = yield* o.send({ agent: lead.id, text: "build it" })
        yield* o.awaitIdle
        return { lead: lead.session_id as string, request: message_id as string }
      })))
  } finally {
    await rt.dispose()
  }
  const file = makePaths(home).eventsFile(ids.lead)
  const lines = fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0)
  const cut = lines.findIndex((l) => at(JSON.parse(l) as LogLine))
  expect(cut).toBeGreaterThan(0)
  fs.writeFileSync(file, lines.slice(0, cut).map((l) => l + "\n").join(""))
  return { registry, ids, before: JSON.parse(lines[cut - 1]!) as LogLine }
}

/** A new life on `home`: recover, run until idle, and the answer to USER's `request` (its text). */
const recovered = async (home: string, registry: ReturnType<typeof trackedScripted>, request: string) => {
  const rt = startLife(home, Durable.layer, registry)
  try {
    return await rt.runPromise(Effect.gen(function*() {
      yield* Effect.flatMap(Recovery, (r) => r.run())
      const o = yield* Orchestrator
      yield* o.awaitIdle
      return Option.map(yield* o.awaitAnswer(request as never), (m) => m.payload)
    }))
  } finally {
    await rt.dispose()
  }
}

describe("the answer rule", () => {
  it.scoped("a root that asks two children answers after both replies; the texts before are progress", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const lead = yield* o.createRoot({ name: "lead", instructions: "lead", provider: "scripted" })
        const { message_id } = yield* o.send({ agent: lead.id, text: "build it" })
        const answer = yield* o.awaitAnswer(message_id)
        expect(Option.map(answer, (m) => [m.payload, m.kind, m.reply_to])).toEqual(Option.some(["final: both answered", "response", message_id]))
        yield* o.awaitIdle
        expect(yield* toUserOf(o, lead.id)).toEqual([
          { text: "asked a and b", kind: "notification", reply_to: null, progress: true },
          { text: "one reply in", kind: "notification", reply_to: null, progress: true },
          { text: "final: both answered", kind: "response", reply_to: message_id, progress: false }
        ])
        // Every message to USER is in the root's own log (what the transcript and attach show).
        const logged = dataOf(yield* eventsOf(lead.session_id), "message.enqueued").filter((e) => e.recipient === "USER")
        expect(logged.map((e) => e.payload)).toEqual(["asked a and b", "one reply in", "final: both answered"])
        // Asked again later: already answered, at once.
        expect(Option.map(yield* o.awaitAnswer(message_id), (m) => m.payload)).toEqual(Option.some("final: both answered"))
        expect((yield* o.inspect(lead.id)).waiting_for_replies).toBe(0)
      }).pipe(Effect.provide(stack({ home, scripts: team })))
    }))

  it.scoped("a root that delegates nothing answers with its first turn", () =>
    Effect.gen(function*() {
      const o = yield* Orchestrator
      const solo = yield* o.createRoot({ name: "solo", instructions: "x", provider: "scripted" })
      const { message_id } = yield* o.send({ agent: solo.id, text: "hello there" })
      expect(Option.map(yield* o.awaitAnswer(message_id), (m) => m.payload)).toEqual(Option.some("hi back"))
      yield* o.awaitIdle
      expect((yield* toUserOf(o, solo.id)).map((m) => m.kind)).toEqual(["response"])
    }).pipe(Effect.provide(stack({ scripts: { solo: { steps: [{ text: "hi back" }], after: "silent" } } }))))

  it.scoped("an explicit reply to USER answers at once; later turns say nothing more to USER", () =>
    Effect.gen(function*() {
      const scripts: Scripts = {
        lead: {
          steps: [
            {
              tools: [
                { tool: "spawn_agent", args: { name: "a", instructions: "work" } },
                { tool: "send_message", args: { recipient: "a", text: "go", sync: true } },
                { tool: "send_message", args: { recipient: "USER", text: "started; here is my answer", reply_to: "{{last_message_id}}" } }
              ],
              text: "first turn over"
            },
            { text: "a replied" }
          ],
          after: "silent"
        },
        a: { steps: [{ text: "a done" }], after: "silent" }
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const lead = yield* o.createRoot({ name: "lead", instructions: "lead", provider: "scripted" })
        const { message_id } = yield* o.send({ agent: lead.id, text: "go" })
        yield* o.awaitIdle
        expect(Option.map(yield* o.awaitAnswer(message_id), (m) => m.payload)).toEqual(Option.some("started; here is my answer"))
        expect(yield* toUserOf(o, lead.id)).toEqual([
          { text: "started; here is my answer", kind: "response", reply_to: message_id, progress: false }
        ])
      }).pipe(Effect.provide(stack({ scripts })))
    }))

  it.scopedLive("a second request while the first is open: both are answered by the turn that ends with nothing outstanding", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const scripts: Scripts = {
        lead: {
          steps: [
            {
              tools: [
                { tool: "spawn_agent", args: { name: "a", instructions: "work" } },
                { tool: "send_message", args: { recipient: "a", text: "slow one", sync: true } }
              ],
              text: "asked a"
            },
            { text: "noted your second message" },
            { text: "all done" }
          ],
          after: "silent"
        },
        a: { steps: [{ text: "a done", delay_ms: 300 }], after: "silent" }
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const lead = yield* o.createRoot({ name: "lead", instructions: "lead", provider: "scripted" })
        const first = yield* o.send({ agent: lead.id, text: "one" })
        const second = yield* o.send({ agent: lead.id, text: "two" })
        yield* o.awaitIdle
        const answers = (yield* toUserOf(o, lead.id)).filter((m) => m.kind === "response")
        expect(answers).toEqual([
          { text: "all done", kind: "response", reply_to: first.message_id, progress: false },
          { text: "all done", kind: "response", reply_to: second.message_id, progress: false }
        ])
      }).pipe(Effect.provide(stack({ home, scripts })))
    }))

  it("after a crash between the replies, the request stays open: answered once, by the final turn", async () => {
    await withTmp(async (home) => {
      // The crash: lead's log ends right after its first turn (its progress to USER included);
      // the children's replies (logged in lead's log) and everything after are lost.
      const { registry, ids } = await crashedTeam(home, (e) =>
        e.event === "message.enqueued" && e.data["kind"] === "response" && e.data["recipient"] !== "USER"
      )

      expect(await recovered(home, registry, ids.request)).toEqual(Option.some("final: both answered"))
      const toUser = readLogEvents(home, ids.lead).filter((e) => e.event === "message.enqueued" && e.data["recipient"] === "USER")
      // One answer, never the progress text; the progress logged before the crash stays progress.
      expect(toUser.filter((e) => e.data["kind"] === "response").map((e) => [e.data["payload"], e.data["reply_to"]])).toEqual([
        ["final: both answered", ids.request]
      ])
      expect(toUser.filter((e) => e.data["progress"] === true).map((e) => e.data["payload"])[0]).toBe("asked a and b")
    })
  }, 60_000)

  it("after a crash between a turn's end and its progress line, recovery sends the progress line once", async () => {
    await withTmp(async (home) => {
      // The crash: lead's log ends after its first turn's `turn.complete`, before that turn's
      // progress line to USER ("asked a and b") was logged.
      const { registry, ids, before } = await crashedTeam(home, (e) =>
        e.event === "message.enqueued" && e.data["recipient"] === "USER" && e.data["progress"] === true
      )
      expect(before.event).toBe("turn.complete")

      expect(await recovered(home, registry, ids.request)).toEqual(Option.some("final: both answered"))
      // A second start finds the line logged: nothing sent again.
      expect(await recovered(home, registry, ids.request)).toEqual(Option.some("final: both answered"))
      const toUser = readLogEvents(home, ids.lead).filter((e) => e.event === "message.enqueued" && e.data["recipient"] === "USER")
      expect(toUser.map((e) => [e.data["payload"], e.data["progress"] === true, e.data["recovered"] === true])).toEqual([
        ["asked a and b", true, true],
        ["one reply in", true, false],
        ["final: both answered", false, false]
      ])
    })
  }, 60_000)
})
