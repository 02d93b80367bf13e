// Lifecycle fuzzer (seed 001, model-based): random sequences of create_root, spawn_child,
// run_turn, send (USER → agent), message (agent → agent, one-hop or not) and terminate_leaf
// against a shadow model, with 3 slots and a 5-name alphabet; invariants after every step.
// ci: derandomised (test/support/fuzz.ts); nightly: SUBSTRAT_FUZZ=nightly.
import { describe, expect, it } from "vitest"
import { Effect, Either, ManagedRuntime, Option } from "effect"
import fc from "fast-check"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { agentState, type AgentStateServices } from "../support/agentState.js"
import { ToolHandler } from "../../src/agent/ToolHandler.js"
import type { AgentId } from "../../src/domain/ids.js"
import { Multiplexer } from "../../src/session/Multiplexer.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { stack } from "../integration/orchestration.support.js"
import { fuzzParams } from "../support/fuzz.js"

const NAMES = ["ada", "bo", "cy", "di", "ed"] as const
const SLOTS = 3

interface ShadowAgent {
  readonly id: AgentId
  readonly name: string
  readonly parent: AgentId | null
}
interface Model {
  agents: Array<ShadowAgent>
  dead: Array<AgentId>
}
const makeRuntime = () =>
  ManagedRuntime.make(stack({ slots: SLOTS, scripts: { "*": { steps: [], after: "echo" } } }))
type Rt = ReturnType<typeof makeRuntime>
interface Real {
  readonly rt: Rt
}

const pick = <A>(xs: ReadonlyArray<A>, i: number): A | undefined => xs.length === 0 ? undefined : xs[i % xs.length]
const oneHop = (_m: Model, from: ShadowAgent, to: ShadowAgent) =>
  from.id !== to.id && (
    from.parent === to.id || to.parent === from.id || (from.parent !== null && from.parent === to.parent)
  )

const run = <A, E>(r: Real, eff: Effect.Effect<A, E, Orchestrator | AgentStateServices | ToolHandler | Multiplexer | SessionStore>) =>
  r.rt.runPromise(eff)

/** The invariants, checked after every command (all turns settled first). */
const invariants = (m: Model, r: Real) =>
  run(r, Effect.gen(function*() {
    const o = yield* Orchestrator
    yield* o.awaitIdle
    const s = yield* agentState
    const mux = yield* Multiplexer
    const store = yield* SessionStore
    // tree matches the shadow
    const real = (yield* o.list).map((n) => `${n.id}|${n.name}|${n.parent_id}`).sort()
    const shadow = m.agents.map((a) => `${a.id}|${a.name}|${a.parent}`).sort()
    expect(real).toEqual(shadow)
    // parent/child consistency
    for (const n of s.tree.nodes.values()) {
      if (n.parent_id === null) expect(s.tree.roots().map((x) => x.id)).toContain(n.id)
      else {
        expect(s.tree.has(n.parent_id)).toBe(true)
        expect(s.tree.children(n.parent_id).map((x) => x.id)).toContain(n.id)
      }
      for (const c of s.tree.children(n.id)) expect(c.parent_id).toBe(n.id)
    }
    // registries in sync with the tree
    const ids = [...s.tree.nodes.keys()].sort()
    expect([...s.inboxes.keys()].sort()).toEqual(ids)
    for (const k of s.usage.keys()) expect(s.tree.has(k)).toBe(true)
    for (const k of s.activity.keys()) expect(s.tree.has(k)).toBe(true)
    expect(s.unborn.size).toBe(0)
    expect(s.terminating.size).toBe(0)
    for (const [k, t] of s.triggers) expect({ k, n: t.length }).toEqual({ k, n: 0 })
    // nobody stuck busy; slots bounded and all idle
    expect(s.turns.size).toBe(0)
    for (const n of yield* o.list) expect(n.state).toBe("idle")
    const slots = yield* mux.info
    expect(slots.length).toBeLessThanOrEqual(SLOTS)
    for (const sl of slots) expect(sl.busy).toBe(false)
    for (const sl of slots) expect(ids.map((i) => s.tree.get(i)!.session_id)).toContain(sl.session_id)
    // every sync request answered, or pending in a live inbox
    for (const req of s.requests.values()) {
      expect(s.tree.has(req.to)).toBe(true)
      expect((s.inboxes.get(req.to) ?? []).map((e) => e.id)).toContain(req.id)
    }
    // session records: live agents' are not terminated, dead agents' are
    for (const a of m.agents) {
      expect((yield* store.load(s.tree.get(a.id)!.session_id)).state).not.toBe("terminated")
    }
    expect(yield* Effect.succeed(m.dead.every((d) => !s.tree.has(d)))).toBe(true)
  }))

type Cmd = fc.AsyncCommand<Model, Real>

class CreateRoot implements Cmd {
  constructor(readonly name: string) {}
  check = () => true
  async run(m: Model, r: Real) {
    const taken = m.agents.some((a) => a.parent === null && a.name === this.name)
    const res = await run(r, Effect.either(Effect.flatMap(Orchestrator, (o) =>
      o.createRoot({ name: this.name, instructions: "root", provider: "scripted" }))))
    expect(Either.isLeft(res)).toBe(taken)
    if (Either.isRight(res)) m.agents.push({ id: res.right.id, name: this.name, parent: null })
    await invariants(m, r)
  }
  toString = () => `create_root(${this.name})`
}

class SpawnChild implements Cmd {
  constructor(readonly parent: number, readonly name: string) {}
  check = (m: Readonly<Model>) => m.agents.length > 0
  async run(m: Model, r: Real) {
    const p = pick(m.agents, this.parent)!
    const taken = m.agents.some((a) => a.parent === p.id && a.name === this.name)
    const res = await run(r, Effect.either(Effect.flatMap(Orchestrator, (o) =>
      o.spawn(p.id, { name: this.name, instructions: "child" }))))
    expect(Either.isLeft(res)).toBe(taken)
    if (Either.isRight(res)) m.agents.push({ id: res.right.id, name: this.name, parent: p.id })
    await invariants(m, r)
  }
  toString = () => `spawn_child(${this.parent}, ${this.name})`
}

class RunTurn implements Cmd {
  constructor(readonly agent: number) {}
  check = (m: Readonly<Model>) => m.agents.length > 0
  async run(m: Model, r: Real) {
    const a = pick(m.agents, this.agent)!
    const out = await run(r, Effect.flatMap(Orchestrator, (o) => o.runTurn(a.id, `turn for ${a.name}`)))
    expect(Option.isSome(out)).toBe(true)
    if (Option.isSome(out)) {
      expect(out.value.error).toBeNull()
      expect(out.value.prompt.endsWith(`turn for ${a.name}`)).toBe(true)
    }
    await invariants(m, r)
  }
  toString = () => `run_turn(${this.agent})`
}

class Send implements Cmd {
  constructor(readonly agent: number, readonly sync: boolean) {}
  check = (m: Readonly<Model>) => m.agents.length > 0
  async run(m: Model, r: Real) {
    const a = pick(m.agents, this.agent)!
    const replied = await run(r, Effect.gen(function*(this: Send) {
      const o = yield* Orchestrator
      const { message_id } = yield* o.send({ agent: a.id, text: "hello from USER", sync: this.sync })
      yield* o.awaitIdle
      return (yield* o.userMessages(a.id)).some((x) => x.reply_to === message_id)
    }.bind(this)))
    expect(replied).toBe(this.sync)
    await invariants(m, r)
  }
  toString = () => `send(${this.agent}, sync=${this.sync})`
}

class Message implements Cmd {
  constructor(readonly from: number, readonly to: string, readonly sync: boolean) {}
  check = (m: Readonly<Model>) => m.agents.length > 0
  async run(m: Model, r: Real) {
    const from = pick(m.agents, this.from)!
    const hops = m.agents.filter((x) => x.name === this.to && oneHop(m, from, x))
    const res = await run(r, Effect.flatMap(ToolHandler, (t) =>
      t.forAgent(from.id).invoke("send_message", { recipient: this.to, text: "ping", sync: this.sync })))
    expect(res.is_error).toBe(hops.length !== 1)
    await invariants(m, r)
  }
  toString = () => `message(${this.from} → ${this.to}, sync=${this.sync})`
}

class TerminateLeaf implements Cmd {
  constructor(readonly agent: number) {}
  check = (m: Readonly<Model>) => m.agents.some((a) => !m.agents.some((c) => c.parent === a.id))
  async run(m: Model, r: Real) {
    const leaves = m.agents.filter((a) => !m.agents.some((c) => c.parent === a.id))
    const a = pick(leaves, this.agent)!
    const ids = await run(r, Effect.flatMap(Orchestrator, (o) => o.terminate(a.id)))
    expect(ids).toEqual([a.id])
    m.agents = m.agents.filter((x) => x.id !== a.id)
    m.dead.push(a.id)
    await invariants(m, r)
  }
  toString = () => `terminate_leaf(${this.agent})`
}

const name = fc.constantFrom(...NAMES)
const idx = fc.nat({ max: 50 })
const commands = fc.commands(
  [
    name.map((n) => new CreateRoot(n)),
    fc.tuple(idx, name).map(([p, n]) => new SpawnChild(p, n)),
    idx.map((a) => new RunTurn(a)),
    fc.tuple(idx, fc.boolean()).map(([a, s]) => new Send(a, s)),
    fc.tuple(idx, name, fc.boolean()).map(([a, n, s]) => new Message(a, n, s)),
    idx.map((a) => new TerminateLeaf(a))
  ],
  { maxCommands: 30 }
)

describe("lifecycle fuzzer", () => {
  it("keeps the tree, registries and slots consistent under random lifecycles", async () => {
    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        const rt = makeRuntime()
        try {
          await fc.asyncModelRun(() => ({ model: { agents: [], dead: [] }, real: { rt } }), cmds)
        } finally {
          await rt.dispose()
        }
      }),
      fuzzParams(50)
    )
  })
})
