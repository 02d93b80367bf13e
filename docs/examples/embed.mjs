// A lead agent that spawns a helper, both scripted (no model, no network, no sandbox), run by
// Substrat's orchestrator inside this program, with durable event logs in a temporary home.
// Run it with plain node in a project that installed substrat: `node embed.mjs`.
import { Effect, Layer, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Durable, EventLog, MultiplexerConfig, Orchestration, Orchestrator, ScriptedProvider, SessionStore, SubstratPaths } from "substrat"

const home = mkdtempSync(join(tmpdir(), "substrat-embed-"))

// What each agent does, by name: one step per turn (tool calls, then the final text).
const scripts = {
  lead: {
    steps: [{
      tools: [{ tool: "spawn_agent", args: { name: "helper", instructions: "Count the files.", role: "worker" } }],
      text: "I asked a helper to count the files."
    }]
  },
  helper: { steps: [{ text: "There are 3 files." }] }
}

// Durable storage under `home` (EventLog.layerMemory/SessionStore.layerMemory keep it in memory).
const storage = Layer.mergeAll(EventLog.layerFile, SessionStore.layerFile).pipe(
  Layer.provide(Layer.mergeAll(Durable.layer, SubstratPaths.layer(home))),
  Layer.orDie
)

const substrat = Orchestration.layer.pipe(
  Layer.provideMerge(Layer.mergeAll(ScriptedProvider.layer({ scripts }), MultiplexerConfig.layer(2), storage))
)

const program = Effect.gen(function*() {
  const orchestrator = yield* Orchestrator
  const lead = yield* orchestrator.createRoot({ name: "lead", instructions: "Lead the team.", provider: "scripted" })
  yield* orchestrator.send({ agent: lead.id, text: "How many files are there?" })
  yield* orchestrator.awaitIdle
  for (const agent of yield* orchestrator.list) console.log(`agent ${agent.name} (${agent.role}): ${agent.state}`)
  for (const reply of yield* orchestrator.userMessages(lead.id)) console.log(`lead → you: ${reply.payload}`)
  const log = yield* EventLog
  const events = yield* Stream.runCollect(log.read(lead.session_id))
  console.log(`lead's event log: ${[...events].map((e) => e.event).join(", ")}`)
})

await Effect.runPromise(program.pipe(Effect.provide(substrat))).finally(() => rmSync(home, { recursive: true, force: true }))
