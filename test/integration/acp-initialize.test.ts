// requires: bwrap
// An ACP agent whose process runs but never answers `initialize` (codex-acp does this when its
// codex app-server exits at start) fails the start within the limit, naming it and the process'
// stderr, and the process is killed with the start's scope: it no longer holds the turn forever.
import { NodeContext } from "@effect/platform-node"
import { Effect, Exit, Layer, ManagedRuntime, Scope } from "effect"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { noLimits } from "../../src/domain/workspace.js"
import * as AcpProcess from "../../src/provider/acp/AcpProcess.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { layerBwrap } from "../../src/sandbox/SandboxBwrap.js"
import { findProcs, waitFor } from "./sandbox.support.js"

const T = fs.mkdtempSync(join(tmpdir(), "acp-init-"))
afterAll(() => fs.rmSync(T, { recursive: true, force: true }))

const refuse = () => Promise.reject(new Error("not used"))
const handlers: AcpProcess.ClientHandlers = {
  update: () => undefined,
  permission: refuse,
  readTextFile: refuse,
  writeTextFile: refuse,
  createTerminal: refuse,
  terminalOutput: refuse,
  waitForTerminalExit: refuse,
  killTerminal: refuse,
  releaseTerminal: refuse
}

describe("ACP initialize", () => {
  it("an agent that never answers initialize: the start fails within the limit with its stderr, and the process is killed", async () => {
    const rt = ManagedRuntime.make(layerBwrap().pipe(Layer.provide(NodeContext.layer)))
    const marker = `acp-init-silent-${process.pid}`
    const run = Effect.gen(function*() {
      const sandbox = yield* Sandbox
      const scope = yield* Scope.make()
      const started = yield* AcpProcess.start("acp:silent", sandbox, {
        workspace: { root_path: fs.realpathSync(T), network_access: false, symlinks: [], limits: noLimits },
        // Reads stdin (the initialize request) and answers nothing.
        command: ["/bin/sh", "-c", `echo app-server exited with code 1 >&2; sleep 600; : ${marker}`]
      }, handlers, { fs: false, terminal: false }, { initializeTimeout: "2 seconds" }).pipe(Scope.extend(scope), Effect.exit)
      const running = findProcs(marker).length
      yield* Scope.close(scope, Exit.void)
      return { started, running }
    })
    const { started, running } = await rt.runPromise(run)
    expect(Exit.isFailure(started)).toBe(true)
    const message = Exit.isFailure(started) ? JSON.stringify(started.cause) : ""
    expect(message).toContain("ACP initialize failed: no answer within 2s (the process is running); stderr: app-server exited with code 1")
    // Still running when the start gave up; gone once its scope closed.
    expect(running).toBeGreaterThan(0)
    expect(await waitFor(() => findProcs(marker).length === 0)).toBe(true)
    await rt.dispose()
  }, 60_000)
})
