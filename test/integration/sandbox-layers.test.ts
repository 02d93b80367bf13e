// requires: bwrap
// Sandbox layers beyond isolation: unusable bwrap → typed error with a fix, streaming stdin/stdout,
// path checks, and the explicit unsafe layer (one warning per process, kill escalation).
import { NodeContext } from "@effect/platform-node"
import { Chunk, Effect, Either, Exit, Layer, Logger, ManagedRuntime, Scope, Stream } from "effect"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { noLimits, ResourceLimits } from "../../src/domain/workspace.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { classifyBwrapFailure, layerBwrap } from "../../src/sandbox/SandboxBwrap.js"
import { layerUnsafeNoSandbox, unsafeWarning } from "../../src/sandbox/SandboxUnsafe.js"
import { alive, findExact, sh, waitFor } from "./sandbox.support.js"

let T = ""
beforeAll(() => {
  T = fs.mkdtempSync(join(tmpdir(), "substrat-layers-"))
})
afterAll(() => {
  if (T !== "") fs.rmSync(T, { recursive: true, force: true })
})
const ws = () => ({ root_path: fs.realpathSync(T), network_access: false, symlinks: [], limits: noLimits })

describe("bwrap layer", () => {
  it("bwrap missing → SandboxUnavailableError naming the fix", async () => {
    const rt = ManagedRuntime.make(layerBwrap({ bwrap: "/nonexistent/bwrap" }).pipe(Layer.provide(NodeContext.layer)))
    const r = await rt.runPromise(Effect.either(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws(), command: ["true"] }))))
    await rt.dispose()
    expect(Either.isLeft(r) && r.left._tag).toBe("SandboxUnavailableError")
    if (Either.isLeft(r) && r.left._tag === "SandboxUnavailableError") {
      expect(r.left.reason).toBe("bwrap-missing")
      expect(r.left.fix).toContain("apt-get install bubblewrap")
    }
  })

  it("namespace failures are classified as userns-denied with the sysctl fix", () => {
    const e = classifyBwrapFailure("bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.")
    expect(e.reason).toBe("userns-denied")
    expect(e.fix).toContain("kernel.unprivileged_userns_clone=1")
    expect(e.fix).toContain("user.max_user_namespaces")
    expect(classifyBwrapFailure("bwrap: something else").reason).toBe("bwrap-broken")
  })

  it("streams: stdin in, stdout lines out while running; missing paths are typed errors", async () => {
    const rt = ManagedRuntime.make(layerBwrap().pipe(Layer.provide(NodeContext.layer)))
    const lines = await rt.runPromise(Effect.scoped(Effect.gen(function*() {
      const sb = yield* Sandbox
      const p = yield* sb.start({
        workspace: ws(),
        command: sh("while read l; do echo \"got $l\"; done; echo done >&2"),
        stdin: Stream.make("a\n", "b\n").pipe(Stream.encodeText)
      })
      const out = yield* p.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runCollect)
      yield* p.stderr.pipe(Stream.runDrain)
      const exit = yield* p.exit
      return { out: Chunk.toArray(out), exit }
    })))
    expect(lines).toEqual({ out: ["got a", "got b"], exit: { code: 0, signal: null } })
    const missing = await rt.runPromise(Effect.either(Effect.flatMap(Sandbox, (s) =>
      s.run({ workspace: { ...ws(), root_path: join(T, "nope") }, command: ["true"] }))))
    expect(Either.isLeft(missing) && missing.left._tag === "SandboxPathError" && missing.left.reason).toBe("missing")
    await rt.dispose()
  })
})

describe("unsafe layer", () => {
  it("runs on the host in the workspace root, warns exactly once per process, still applies limits and kills on release", async () => {
    const warnings: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) => {
      if (logLevel._tag === "Warning") warnings.push(String(Array.isArray(message) ? message.join(" ") : message))
    })
    const rt = ManagedRuntime.make(
      Layer.mergeAll(layerUnsafeNoSandbox.pipe(Layer.provide(NodeContext.layer)), Logger.replace(Logger.defaultLogger, logger))
    )
    const hostFile = join(T, "host-visible.txt")
    fs.writeFileSync(hostFile, "host\n")
    const r1 = await rt.runPromise(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws(), command: sh(`pwd; cat ${hostFile}`) })))
    expect(r1.stdout).toBe(`${fs.realpathSync(T)}\nhost\n`) // no isolation: it really is the host
    await rt.runPromise(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws(), command: ["true"] })))
    expect(warnings).toEqual([unsafeWarning])
    const cpu = await rt.runPromise(Effect.either(Effect.flatMap(Sandbox, (s) =>
      s.run({ workspace: ws(), command: sh("while :; do :; done"), limits: new ResourceLimits({ ...noLimits, cpu_seconds: 1 }) }))))
    expect(Either.isLeft(cpu) && cpu.left._tag === "LimitExceededError" && cpu.left.limit).toBe("cpu")
    // A child that ignores SIGTERM is SIGKILLed after the grace period when the scope closes.
    const marker = `55.${Math.floor(Math.random() * 1e9)}`
    const scope = await rt.runPromise(Scope.make())
    await rt.runPromise(Effect.flatMap(Sandbox, (s) =>
      s.start({ workspace: ws(), command: sh(`trap '' TERM; sleep ${marker}; sleep ${marker}`) })).pipe(Scope.extend(scope)))
    expect(await waitFor(() => findExact(["sleep", marker]).length > 0)).toBe(true)
    const pid = findExact(["sleep", marker])[0]!
    await rt.runPromise(Scope.close(scope, Exit.void))
    expect(await waitFor(() => !alive(pid, marker))).toBe(true)
    await rt.dispose()
  })
})
