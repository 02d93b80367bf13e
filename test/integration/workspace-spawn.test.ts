// requires: git
// spawn_agent(..., workspace_subdir): the daemon's wiring (Runtime.ts: ChildWorkspacesLive,
// WorkspaceInUse, WorkspaceTurnHook) on real files — the child gets the child workspace rooted at
// that subdirectory of its parent's (created once, then reused), bad subdirs are refused as tool
// errors, the child's turns are recorded in its own (scoped) view of the history, and a workspace
// a child uses cannot be deleted. In-process: the scripted provider's book is the test's own.
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import { Tree } from "../../src/agent/Tree.js"
import { SubstratPaths } from "../../src/config/Paths.js"
import * as ChildWorkspacesLive from "../../src/daemon/ChildWorkspacesLive.js"
import * as WorkspaceInUse from "../../src/daemon/WorkspaceInUse.js"
import * as WorkspaceTurnHook from "../../src/daemon/WorkspaceTurnHook.js"
import type { LogEntry } from "../../src/domain/events.js"
import { type AgentId, type SessionId, WorkspaceId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import * as ScriptedProvider from "../../src/provider/scripted/ScriptedProvider.js"
import { WorkspaceHistory } from "../../src/sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { dataOf, eventsOf, names, stack } from "./orchestration.support.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { SessionStore } from "../../src/storage/SessionStore.js"

const spawn = (name: string, workspace_subdir?: string | null) => ({
  tool: "spawn_agent",
  args: { name, instructions: `You are ${name}.`, ...(workspace_subdir === undefined ? {} : { workspace_subdir }) }
})

const scripts: Scripts = {
  lead: {
    steps: [{
      tools: [
        spawn("front", "team/front"),
        spawn("back", "team/back/"),
        spawn("again", "team/front"),
        spawn("plain"),
        spawn("nulled", null),
        spawn("escape", "../outside"),
        spawn("absolute", "/etc"),
        spawn("dotted", "team/./x")
      ],
      text: "spawned"
    }],
    after: "echo"
  },
  loner: { steps: [{ tools: [spawn("kid", "sub")], text: "tried" }], after: "echo" },
  "*": { steps: [], after: "echo" }
}

/** The daemon's composition (src/daemon/Runtime.ts) over a scripted provider with our book. */
const runtimeFor = (home: string) => {
  const base = Layer.mergeAll(Durable.layer, SubstratPaths.layer(home))
  const storage = Layer.mergeAll(EventLog.layerFile, SessionStore.layerFile).pipe(Layer.provideMerge(base))
  const store = WorkspaceStore.Default.pipe(Layer.provide(Layer.mergeAll(WorkspaceInUse.layer, NodeContext.layer)))
  const workspaces = Layer.mergeAll(WorkspaceTurnHook.layer, ChildWorkspacesLive.layer()).pipe(
    Layer.provideMerge(WorkspaceHistory.Default),
    Layer.provideMerge(store),
    Layer.provide(NodeContext.layer)
  )
  const orchestration = Orchestration.layerWithTree(Layer.effect(Tree, Tree)).pipe(
    Layer.provideMerge(Layer.mergeAll(ScriptedProvider.layer({ scripts }), MultiplexerConfig.layer(2)))
  )
  return ManagedRuntime.make(
    orchestration.pipe(
      Layer.provideMerge(workspaces),
      Layer.provideMerge(Tree.Default),
      Layer.provideMerge(storage),
      Layer.orDie
    )
  )
}

const dir = makeTmpDir("substrat-wsspawn-")
let rt: ReturnType<typeof runtimeFor>
beforeAll(() => {
  rt = runtimeFor(join(dir, "home"))
})
afterAll(async () => {
  await rt.dispose()
  removeDir(dir)
})

const toolErrors = (entries: ReadonlyArray<LogEntry>) =>
  dataOf(entries, "tool_call.result").filter((r) => r.is_error).map((r) => r.result as { error: { type: string; field?: string; message: string } })

describe("spawn_agent(workspace_subdir) in the daemon's wiring", () => {
  it("gives children a child workspace at that subdirectory (reused), refuses bad subdirs, records their turns", async () => {
    const out = await rt.runPromise(Effect.gen(function*() {
      const store = yield* WorkspaceStore
      const o = yield* Orchestration.Orchestrator
      const top = yield* store.create({ name: "top" })
      const lead = yield* o.createRoot({ name: "lead", instructions: "", provider: "scripted", workspace_id: top.id })
      yield* o.runTurn(lead.id, "go")
      yield* o.awaitIdle
      const agents = yield* o.list
      const leadLog = yield* eventsOf(lead.session_id)
      return { top, lead, agents, leadLog, specs: yield* store.list() }
    }))
    const byName = (n: string) => out.agents.find((a) => a.name === n)!
    const front = byName("front")
    const back = byName("back")
    expect(out.agents.map((a) => a.name).sort()).toEqual(["again", "back", "front", "lead", "nulled", "plain"])
    const wsFront = out.specs.find((s) => s.id === front.workspace_id)!
    const wsBack = out.specs.find((s) => s.id === back.workspace_id)!
    expect(wsFront.parent_id).toBe(out.top.id)
    expect(wsFront.root_path).toBe(join(out.top.root_path, "team/front"))
    expect(wsBack.root_path).toBe(join(out.top.root_path, "team/back"))
    expect(fs.statSync(wsFront.root_path).isDirectory()).toBe(true)
    // The same subdir twice: one workspace, shared.
    expect(byName("again").workspace_id).toBe(front.workspace_id)
    expect(out.specs.filter((s) => s.parent_id === out.top.id)).toHaveLength(2)
    // No subdir (or null): the parent's workspace.
    expect(byName("plain").workspace_id).toBe(out.top.id)
    expect(byName("nulled").workspace_id).toBe(out.top.id)
    // `..`, absolute and non-normalised paths are tool errors; nothing is created for them.
    const errors = toolErrors(out.leadLog)
    expect(errors.map((e) => [e.error.type, e.error.field])).toEqual([
      ["invalid_arguments", "workspace_subdir"],
      ["invalid_arguments", "workspace_subdir"],
      ["invalid_arguments", "workspace_subdir"]
    ])
    expect(errors[0]!.error.message).toMatch(/\.\./)
    expect(fs.existsSync(join(out.top.root_path, "..", "outside"))).toBe(false)
    expect(fs.existsSync(join(out.top.root_path, "team", "x"))).toBe(false)

    // The child's agent.created names its workspace (recovery rebuilds the same tree from it).
    const frontLog = await rt.runPromise(eventsOf(front.session_id as SessionId))
    expect(dataOf(frontLog, "agent.created")[0]?.workspace).toBe(front.workspace_id)

    // A turn of the child records its own subtree, paths relative to its root.
    fs.writeFileSync(join(wsFront.root_path, "x.txt"), "front\n")
    fs.writeFileSync(join(out.top.root_path, "lead-only.txt"), "lead\n")
    const frontDiffs = await rt.runPromise(Effect.gen(function*() {
      const o = yield* Orchestration.Orchestrator
      yield* o.runTurn(front.id as AgentId, "work")
      return dataOf(yield* eventsOf(front.session_id as SessionId), "workspace.diff")
    }))
    expect(frontDiffs).toHaveLength(1)
    expect(frontDiffs[0]!.workspace_id).toBe(front.workspace_id)
    expect(frontDiffs[0]!.paths).toEqual([{ path: "x.txt", change: "added" }])
    // The parent's next turn records what is left in its tree (not the child's, already recorded).
    const leadDiffs = await rt.runPromise(Effect.gen(function*() {
      const o = yield* Orchestration.Orchestrator
      yield* o.runTurn(out.lead.id, "again")
      return dataOf(yield* eventsOf(out.lead.session_id), "workspace.diff")
    }))
    expect(leadDiffs.at(-1)!.paths).toEqual([{ path: "lead-only.txt", change: "added" }])

    // In use: a child workspace its agents use cannot be deleted; once they are gone, it can.
    const tag = (r: { _tag: string; left?: { _tag: string; reason?: string } }) => r._tag === "Left" ? `${r.left!._tag}:${r.left!.reason}` : "ok"
    const busy = await rt.runPromise(Effect.either(Effect.flatMap(WorkspaceStore, (s) => s.delete(wsFront.id))))
    expect(tag(busy)).toBe("WorkspaceError:in-use")
    await rt.runPromise(Effect.gen(function*() {
      const o = yield* Orchestration.Orchestrator
      yield* o.terminate(front.id as AgentId)
      yield* o.terminate(byName("again").id)
    }))
    const freed = await rt.runPromise(Effect.either(Effect.flatMap(WorkspaceStore, (s) => s.delete(wsFront.id))))
    expect(tag(freed)).toBe("ok")
  })

  it("a root whose workspace is not on this daemon (gone from under it): its turns end and record nothing, turn after turn", async () => {
    const out = await rt.runPromise(Effect.gen(function*() {
      const store = yield* WorkspaceStore
      const o = yield* Orchestration.Orchestrator
      const gone = yield* store.create({ name: "gone" })
      const nomad = yield* o.createRoot({ name: "nomad", instructions: "", provider: "scripted", workspace_id: gone.id })
      // Its spec and history vanish before its first turn (a tree moved here without its workspace).
      fs.rmSync(join(dir, "home", "workspaces", gone.id), { recursive: true, force: true })
      yield* o.runTurn(nomad.id, "one")
      yield* o.runTurn(nomad.id, "two")
      yield* o.awaitIdle
      return yield* eventsOf(nomad.session_id)
    }))
    expect(dataOf(out, "turn.complete").map((t) => t.response)).toEqual(["echo: one", "echo: two"])
    expect(names(out)).not.toContain("workspace.diff")
    expect(names(out)).not.toContain("provider.error")
  })

  it("a parent without a workspace cannot ask for a subdir", async () => {
    const log = await rt.runPromise(Effect.gen(function*() {
      const o = yield* Orchestration.Orchestrator
      // (Explicitly none: without `workspace_id` the daemon's wiring gives a root its own.)
      const loner = yield* o.createRoot({ name: "loner", instructions: "", provider: "scripted", workspace_id: null })
      yield* o.runTurn(loner.id, "go")
      expect((yield* o.list).some((a) => a.name === "kid")).toBe(false)
      return yield* eventsOf(loner.session_id)
    }))
    expect(toolErrors(log).map((e) => e.error.message)).toEqual(["workspace_subdir needs a workspace, and you have none"])
  })

  it("without the ChildWorkspaces port (library stack), workspace_subdir is refused, not ignored", async () => {
    const home = join(dir, "bare")
    const bare = ManagedRuntime.make(stack({ home, scripts: { "*": { steps: [{ tools: [spawn("kid", "sub")], text: "" }] } } }))
    try {
      const log = await bare.runPromise(Effect.gen(function*() {
        const o = yield* Orchestration.Orchestrator
        const root = yield* o.createRoot({ name: "r", instructions: "", provider: "scripted", workspace_id: WorkspaceId.make("11111111-2222-4333-8444-555555555555") })
        yield* o.runTurn(root.id, "go")
        return yield* eventsOf(root.session_id)
      }))
      expect(toolErrors(log).map((e) => e.error.message)).toEqual(["workspaces are not available here"])
    } finally {
      await bare.dispose()
    }
  })
})
