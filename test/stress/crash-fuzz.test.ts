// Crash-recovery fuzzer (seed 001 "Crash-recovery fuzzer"). Random sequences of lifecycle
// commands (create root, spawn, messages from USER that make roots spawn / ask / tell their
// children, terminate) run against the real orchestrator on a real $SUBSTRAT_HOME through the
// crash-injecting Durable; any command may carry a crash armed a few I/O steps ahead. On a
// crash the life is dropped, recovery runs in a new life (resume on: recovered turns run), and
// the oracle model is checked: everything acknowledged is there (agents, messages, sync
// requests answered or still owed), nothing that was never attempted is, and the disk
// invariants hold. `ci` profile by default; `SUBSTRAT_FUZZ=nightly` for the heavy one.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, ManagedRuntime } from "effect"
import fc from "fast-check"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { agentState } from "../support/agentState.js"
import { Recovery } from "../../src/recovery/Recovery.js"
import type { AgentId } from "../../src/domain/ids.js"
import { makeCrashing } from "../../src/storage/DurableCrash.js"
import type { ScriptInput, ScriptStep, Scripts } from "../../src/provider/scripted/Script.js"
import { fuzzParams, fuzzProfile } from "../support/fuzz.js"
import { withTmp } from "../support/tmp.js"
import { type AckLog, agentsOnDisk, checkOracle, lifeLayer, syncPrimitives, trackedScripted } from "../integration/recovery.support.js"

const NAMES = ["a", "b", "c", "d", "e"] as const

/** Sequences per run in the ci profile (fixed seed: the same ones every run); nightly runs 20× as many, seeded at random. */
const CI_SEQUENCES = 50

/** Every agent: a directive in its prompt (`do:spawn:x`, `do:ask:x`, `do:tell:x`) becomes a tool call. */
const actor = (input: ScriptInput): ScriptStep => {
  const tools: Array<{ tool: string; args: unknown }> = []
  for (const m of input.prompt.matchAll(/do:(spawn|ask|tell):([a-e])/g)) {
    const [, verb, name] = m
    if (verb === "spawn") tools.push({ tool: "spawn_agent", args: { name, instructions: "work" } })
    else tools.push({ tool: "send_message", args: { recipient: name, text: `job for ${name}`, sync: verb === "ask" } })
  }
  return { tools, text: `ok ${input.agent} ${input.turn}` }
}
const scripts: Scripts = { "*": actor }

export type Cmd =
  | { readonly _tag: "root"; readonly name: number }
  | { readonly _tag: "spawn"; readonly parent: number; readonly name: number }
  | { readonly _tag: "user"; readonly root: number; readonly verb: "spawn" | "ask" | "tell" | "none"; readonly name: number; readonly sync: boolean }
  | { readonly _tag: "terminate"; readonly agent: number }

export interface Step {
  readonly cmd: Cmd
  /** Arm a crash this many I/O steps into the command; null: no crash. */
  readonly crash: number | null
}

const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("root" as const), name: fc.nat(4) }) },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("spawn" as const), parent: fc.nat(9), name: fc.nat(4) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constant("user" as const),
      root: fc.nat(4),
      verb: fc.constantFrom("spawn" as const, "ask" as const, "tell" as const, "none" as const),
      name: fc.nat(4),
      sync: fc.boolean()
    })
  },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("terminate" as const), agent: fc.nat(9) }) }
)
const stepArb: fc.Arbitrary<Step> = fc.record({
  cmd: cmdArb,
  crash: fc.option(fc.integer({ min: 1, max: 40 }), { freq: 3 })
})

interface Model {
  /** Acknowledged live agents, in creation order. */
  alive: Array<{ id: AgentId; name: string; parent: AgentId | null }>
  gone: Set<AgentId>
  attempted: Set<string>
  messages: Array<{ id: string; to: AgentId | null }>
  requests: Array<{ id: string; from: AgentId }>
}

/** Run one sequence; returns oracle failures (empty = pass) and how many crashes happened. */
export const runSequence = async (steps: ReadonlyArray<Step>): Promise<{ failures: Array<string>; crashes: number }> =>
  withTmp(async (home) => {
    const model: Model = { alive: [], gone: new Set(), attempted: new Set(), messages: [], requests: [] }
    const failures: Array<string> = []
    let crashes = 0
    let crashing = makeCrashing({}, syncPrimitives)
    let acks: AckLog = { messages: [] }
    const start = () => {
      const c = crashing
      acks = { messages: [] }
      return ManagedRuntime.make(lifeLayer(home, c.layer, trackedScripted(scripts, acks, () => !c.control.crashed()), 3))
    }
    let life = start()
    const syncModel = async () => {
      const s = await life.runPromise(agentState)
      const names = new Map<string, AgentId>()
      for (const n of s.tree.nodes.values()) {
        model.attempted.add(n.id)
        names.set(`${n.parent_id ?? ""}/${n.name}`, n.id)
      }
      return { s, names }
    }
    const recordAcks = (names: ReadonlyMap<string, AgentId>, tree: ReadonlyMap<AgentId, { name: string; parent_id: AgentId | null }>) => {
      const byName = (name: string) => [...tree.entries()].filter(([, n]) => n.name === name).map(([id]) => id)
      for (const m of acks.messages) {
        const from = byName(m.from)[0]
        const toCandidates = byName(m.to)
        if (!m.held) model.messages.push({ id: m.id, to: toCandidates.length === 1 ? toCandidates[0]! : null })
        if (m.sync && from) model.requests.push({ id: m.id, from })
      }
      acks.messages.length = 0
      void names
    }
    try {
      await life.runPromise(Effect.flatMap(Recovery, (r) => r.run()))
      for (const step of steps) {
        const o = await life.runPromise(Orchestrator)
        if (step.crash !== null) crashing.control.reset(crashing.control.stepCount() + step.crash)
        const inFlightTerminate = new Set<AgentId>()
        const alive = () => !crashing.control.crashed()
        const pick = (i: number) => model.alive.length === 0 ? undefined : model.alive[i % model.alive.length]
        const roots = model.alive.filter((a) => a.parent === null)
        const cmd = step.cmd
        const run: Effect.Effect<unknown, unknown> = (() => {
          switch (cmd._tag) {
            case "root":
              return o.createRoot({ name: NAMES[cmd.name]!, instructions: "lead", provider: "scripted" })
            case "spawn": {
              const p = pick(cmd.parent)
              return p ? o.spawn(p.id, { name: NAMES[cmd.name]!, instructions: "work" }) : Effect.void
            }
            case "user": {
              const r = roots.length === 0 ? undefined : roots[cmd.root % roots.length]
              if (!r) return Effect.void
              const text = cmd.verb === "none" ? "status?" : `do:${cmd.verb}:${NAMES[cmd.name]}`
              return o.send({ agent: r.id, text, sync: cmd.sync }).pipe(Effect.tap((res) =>
                Effect.sync(() => {
                  if (alive()) model.messages.push({ id: res.message_id, to: r.id })
                })
              ))
            }
            case "terminate": {
              const a = pick(cmd.agent)
              if (!a) return Effect.void
              for (const n of model.alive) {
                let p: AgentId | null = n.id
                while (p !== null) {
                  if (p === a.id) inFlightTerminate.add(n.id)
                  p = model.alive.find((x) => x.id === p)?.parent ?? null
                }
              }
              return o.terminate(a.id).pipe(Effect.tap((ids) =>
                Effect.sync(() => {
                  if (alive()) for (const id of ids) model.gone.add(id)
                })
              ))
            }
          }
        })()
        await life.runPromise(Effect.either(run).pipe(
          Effect.zipLeft(o.awaitIdle),
          Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => new Error("command hung") })
        ))
        const { s, names } = await syncModel()
        recordAcks(names, s.tree.nodes)
        if (alive()) {
          // Acknowledged: the tree as it stands.
          model.alive = [...s.tree.nodes.values()].map((n) => ({ id: n.id, name: n.name, parent: n.parent_id }))
          if (step.crash !== null) crashing.control.reset(undefined)
          continue
        }
        // Crash: drop the life, recover in a new one, check the oracle.
        crashes++
        await life.dispose()
        for (const id of agentsOnDisk(home)) model.attempted.add(id)
        // First a recovery that only rebuilds (resume off) — the oracle is checked on exactly
        // what recovery produced — then the real restart (a second recovery, resume on).
        const probe = ManagedRuntime.make(lifeLayer(home, makeCrashing({}, syncPrimitives).layer, trackedScripted(scripts, { messages: [] }, () => true), 3))
        const recovered = await probe.runPromise(Effect.either(Effect.flatMap(Recovery, (r) => r.run({ resume: false }))))
        if (Either.isLeft(recovered)) {
          failures.push(`recovery failed: ${String(recovered.left)}`)
          await probe.dispose()
          break
        }
        const bad = await checkOracle({
          home,
          life: probe,
          ackedMessages: model.messages,
          ackedRequests: model.requests,
          mustLive: model.alive.map((a) => a.id).filter((id) => !model.gone.has(id) && !inFlightTerminate.has(id)),
          mustBeGone: [...model.gone],
          mayExist: model.attempted
        })
        await probe.dispose()
        failures.push(...bad.map((b) => `after crash ${crashes} (${JSON.stringify(cmd)}): ${b}`))
        if (bad.length > 0) break
        crashing = makeCrashing({}, syncPrimitives)
        life = start()
        const restarted = await life.runPromise(Effect.either(Effect.flatMap(Recovery, (r) => r.run())))
        if (Either.isLeft(restarted)) {
          failures.push(`second recovery failed: ${String(restarted.left)}`)
          break
        }
        await life.runPromise(Effect.flatMap(Orchestrator, (o2) => o2.awaitIdle))
        const after = await syncModel()
        model.alive = [...after.s.tree.nodes.values()].map((n) => ({ id: n.id, name: n.name, parent: n.parent_id }))
      }
    } finally {
      await life.dispose()
    }
    return { failures, crashes }
  }, "substrat-crashfuzz-")

describe(`crash-recovery fuzzer (${fuzzProfile.name})`, () => {
  it("recovered state ⊆ what was attempted, ⊇ everything acknowledged", async () => {
    let totalCrashes = 0
    let runs = 0
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { minLength: 3, maxLength: 14 }), async (steps) => {
        const r = await runSequence(steps)
        runs++
        totalCrashes += r.crashes
        if (r.failures.length > 0) throw new Error(r.failures.join("\n"))
      }),
      // Shrink failures (the shared profile ends on the first one): minimal repros become regressions.
      fuzzParams(CI_SEQUENCES, { endOnFailure: false })
    )
    console.log(`crash fuzzer (${fuzzProfile.name}): ${runs} sequences, ${totalCrashes} crash+recover cycles`)
    expect(runs).toBeGreaterThanOrEqual(CI_SEQUENCES)
    expect(totalCrashes).toBeGreaterThan(0)
  }, fuzzProfile.name === "nightly" ? 6 * 3600_000 : 300_000)
})
