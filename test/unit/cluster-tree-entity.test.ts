// The `Tree` entity's requests on the runner that holds (or held) the tree (handlers/Trees.ts
// `serveHere`, docs/cluster.md "Handover and drain"): a request the engine delivered to the old
// owner while the tree is being handed over — the tree unloaded before the request ran, or while it
// ran (its agent then not found) — is refused as retryable (`Unavailable`, `tree-elsewhere`, exit 5),
// never as an unknown agent (exit 4). A tree that is gone (no row) or an agent that is not in a
// loaded tree is still not found.
import { Effect, Exit, Fiber, Option } from "effect"
import { describe, expect, it } from "vitest"
import { AgentId } from "../../src/domain/ids.js"
import { NotFound, type RpcError } from "../../src/protocol/AdminRpcs.js"
import { serveHere } from "../../src/daemon/handlers/Trees.js"
import { callRemote } from "../../src/daemon/ClusterTrees.js"
import { fromRpcError } from "../../src/cli/Client.js"
import { ExitCode, exitCodeOf } from "../../src/cli/Exit.js"

const self = "127.0.0.1:7401"
const root = AgentId.make("0b62cbd7-91d5-4f04-bfbe-50f97a53f93a")
const agentGone = new NotFound({ kind: "agent", id: "lead", message: "no agent named lead" })

/** A runner whose tree `loaded` says is here, whose row (if any) names `runner`. */
const runner = (state: { loaded: boolean; runner: string | null }) => ({
  self,
  ensure: () => Effect.void,
  find: () => Effect.succeed(state.runner === null ? Option.none() : Option.some({ name: "lead", runner: state.runner })),
  loaded: () => state.loaded
})

const run = <A>(deps: ReturnType<typeof runner>, e: Effect.Effect<A, RpcError>) => Effect.runPromiseExit(serveHere(deps, root, e))

const failure = (exit: Exit.Exit<unknown, RpcError>) => {
  if (Exit.isSuccess(exit)) throw new Error("succeeded")
  const e = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  if (e === undefined) throw new Error(`not a failure: ${exit.cause._tag}`)
  return e
}

describe("the Tree entity during a handover", () => {
  it("the tree leaves while the request runs (its agent not found): tree-elsewhere, exit 5", async () => {
    const state = { loaded: true, runner: self as string | null }
    // As Orchestrator.send does for a send that arrives while the tree leaves: it waits until the
    // tree has left, then finds no such agent.
    const exit = await run(runner(state), Effect.suspend(() => {
      state.loaded = false
      return Effect.fail(agentGone)
    }))
    const e = failure(exit)
    expect(e._tag).toBe("Unavailable")
    expect(exitCodeOf(fromRpcError(e).kind)).toBe(ExitCode.unavailable)
    expect(e._tag === "Unavailable" ? e.reason : undefined).toBe("tree-elsewhere")
    expect(e.message).toContain("retry")
  })

  it("the tree left before the request ran, its row still naming this runner: tree-elsewhere, nothing run", async () => {
    let ran = false
    const exit = await run(runner({ loaded: false, runner: self }), Effect.sync(() => (ran = true)).pipe(Effect.zipRight(Effect.fail(agentGone))))
    const e = failure(exit)
    expect(e._tag).toBe("Unavailable")
    expect(e._tag === "Unavailable" ? e.reason : undefined).toBe("tree-elsewhere")
    expect(ran).toBe(false)
  })

  it("the row marked as on no runner, or naming another one: tree-elsewhere", async () => {
    for (const r of ["", "127.0.0.1:7402"]) {
      const e = failure(await run(runner({ loaded: false, runner: r }), Effect.fail(agentGone)))
      expect(e._tag, r).toBe("Unavailable")
      expect(e._tag === "Unavailable" ? e.reason : undefined, r).toBe("tree-elsewhere")
      expect(e.message, r).not.toContain("on runner  ")
    }
  })

  it("still not found: a tree that is gone (no row), and an agent not in a tree that stays loaded", async () => {
    const gone = failure(await run(runner({ loaded: false, runner: null }), Effect.fail(agentGone)))
    expect(exitCodeOf(fromRpcError(gone).kind)).toBe(ExitCode.notFound)
    expect(failure(await run(runner({ loaded: true, runner: self }), Effect.fail(agentGone)))._tag).toBe("NotFound")
    const ok = await run(runner({ loaded: true, runner: self }), Effect.succeed(42))
    expect(Exit.isSuccess(ok) && ok.value).toBe(42)
  })
})

// A call to another runner (`callRemote`): the engine can end it with an interruption (the entity
// stopped while its shard moves); the client must get exit 5, not a raw interrupt Cause.
describe("a call to the runner holding a tree", () => {
  it("an interruption the call returns is Unavailable (exit 5); the request's own interruption still interrupts it", async () => {
    const remote = await Effect.runPromiseExit(callRemote(Effect.interrupt))
    const e = failure(remote)
    expect(e._tag).toBe("Unavailable")
    expect(exitCodeOf(fromRpcError(e).kind)).toBe(ExitCode.unavailable)

    const own = await Effect.runPromise(Effect.gen(function*() {
      const fiber = yield* Effect.fork(callRemote(Effect.never))
      yield* Effect.yieldNow()
      return yield* Fiber.interrupt(fiber)
    }))
    expect(Exit.isInterrupted(own)).toBe(true)

    const far = await Effect.runPromiseExit(callRemote(Effect.fail(new NotFound({ kind: "agent", id: "x", message: "no agent named x" }))))
    expect(failure(far)._tag).toBe("NotFound")
  })
})
