// The live transcript writer names agents: what start-up recovery logs (before the daemon has
// told the writer the agents' names) still shows names, not agent ids.
import { describe, expect, it } from "@effect/vitest"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import { makePaths, SubstratPaths } from "../../src/config/Paths.js"
import * as EventTap from "../../src/storage/EventTap.js"
import { Transcript } from "../../src/daemon/Transcript.js"
import { makeEvent } from "../../src/domain/events.js"
import { AgentId, MessageId, newSessionId } from "../../src/domain/ids.js"
import { MessageEnvelope } from "../../src/domain/message.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventIndex } from "../../src/storage/EventIndex.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { withTmp } from "../support/tmp.js"

const layerFor = (home: string) =>
  Transcript.Default.pipe(
    Layer.provideMerge(EventTap.layer.pipe(
      Layer.provide(Layer.mergeAll(EventLog.layerFile, EventIndex.layerFile.pipe(Layer.provide(NodeContext.layer))))
    )),
    Layer.provideMerge(Layer.mergeAll(Durable.layer, SubstratPaths.layer(home))),
    Layer.orDie
  )

describe("transcript names", () => {
  it("a message logged before the names are learned (start-up recovery's) shows the recipient's name", async () => {
    await withTmp(async (home) => {
      const session = newSessionId()
      const agent = AgentId.make("a816afb1-0000-4000-8000-000000000001")
      fs.mkdirSync(makePaths(home).sessionDir(session), { recursive: true })
      const rt = ManagedRuntime.make(layerFor(home))
      try {
        await rt.runPromise(Effect.gen(function*() {
          const log = yield* EventLog
          const transcript = yield* Transcript
          // Recovery's error reply, logged in the requester's log before the daemon calls `learn`.
          yield* log.append(session, makeEvent("message.enqueued", new MessageEnvelope({
            id: MessageId.make("5e3f0c1a-0000-5000-8000-000000000002"),
            timestamp: new Date().toISOString(),
            sender: "SYSTEM",
            recipient: agent,
            reply_to: MessageId.make("5e3f0c1a-0000-4000-8000-000000000003"),
            kind: "response",
            payload: "[error] your request will not be answered",
            sender_name: "SYSTEM",
            recovered: true
          })))
          // Let the writer run (with the names unknown, it must not write yet).
          for (let i = 0; i < 20; i++) yield* Effect.yieldNow()
          yield* Effect.sleep("50 millis")
          yield* transcript.learn([{ id: agent, name: "boss", session_id: session }])
        }))
      } finally {
        await rt.dispose()
      }
      const lines = fs.readFileSync(makePaths(home).transcriptFile(session), "utf8").trimEnd().split("\n")
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\] SYSTEM → boss: \[error\] your request will not be answered$/)
    })
  })
})
