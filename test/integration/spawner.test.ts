// requires: bwrap
// The spawner process (src/sandbox/Spawner.ts): every child of spawnScoped is forked by it, not by
// this process, and behaves as a child of this process did: output, exit codes and signals,
// stdin, start failures, group kills, the wall-clock limit. The spawner dies with its parent
// (kill -9 included) and takes every child with it; a spawner that dies reports its children as
// killed and the next spawn starts a new one. Its channel cannot be reached by a command.
import { NodeContext } from "@effect/platform-node"
import { Effect, Either, Exit, Scope, Stream } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { attacks } from "../../scripts/chaos-security/spawner.js"
import { makePaths } from "../../src/config/Paths.js"
import { noLimits } from "../../src/domain/workspace.js"
import { scanLeftovers } from "../../src/sandbox/Cleanup.js"
import { runCollect, spawnScoped, type SpawnOptions } from "../../src/sandbox/spawn.js"
import { spawnerPid } from "../../src/sandbox/Spawner.js"
import { alive, waitFor } from "./sandbox.support.js"

let T = ""
beforeAll(() => {
  T = fs.realpathSync(fs.mkdtempSync(join(tmpdir(), "substrat-spawner-")))
})
afterAll(() => {
  if (T !== "") fs.rmSync(T, { recursive: true, force: true })
})

const env = { PATH: "/usr/bin:/bin" }
const opts = (argv: ReadonlyArray<string>, more: Partial<SpawnOptions> = {}): SpawnOptions => ({ argv, env, limits: noLimits, graceMs: 500, ...more })
const run = (argv: ReadonlyArray<string>, more: Partial<SpawnOptions> = {}) => Effect.runPromise(runCollect(spawnScoped(undefined, opts(argv, more))))
const ppidOf = (pid: number) => Number(fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1])

describe("spawner", () => {
  it("forks every child: the child's parent is the spawner, not this process", async () => {
    const r = await run(["sh", "-c", "echo $PPID"])
    const spawner = spawnerPid()
    expect(spawner).toBeDefined()
    expect(Number(r.stdout.trim())).toBe(spawner)
    expect(spawner).not.toBe(process.pid)
    expect(ppidOf(spawner!)).toBe(process.pid)
  })

  it("keeps stdout, stderr, exit codes, signals, stdin and start failures as they were", async () => {
    const a = await run(["sh", "-c", "echo out; echo err >&2; exit 7"])
    expect(a).toEqual({ exit: { code: 7, signal: null }, stdout: "out\n", stderr: "err\n" })
    const b = await run(["sh", "-c", "kill -TERM $$"])
    expect(b.exit.signal).toBe("SIGTERM")
    const big = await run(["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x; printf end"])
    expect(big.stdout.length).toBe(3_000_003)
    expect(big.stdout.endsWith("xend")).toBe(true)
    const c = await run(["cat"], { stdin: Stream.make(new TextEncoder().encode("in"), new TextEncoder().encode("put")) })
    expect(c.stdout).toBe("input")
    const cwd = await run(["pwd"], { cwd: T })
    expect(cwd.stdout.trim()).toBe(T)
    const envOut = await run(["sh", "-c", "echo $ONLY"], { env: { ...env, ONLY: "this" } })
    expect(envOut.stdout).toBe("this\n")
    const missing = await Effect.runPromise(Effect.either(runCollect(spawnScoped(undefined, opts(["substrat-no-such-program"])))))
    expect(Either.isLeft(missing) && missing.left._tag === "SandboxProcessError" && missing.left.reason).toBe("spawn")
    expect(Either.isLeft(missing) && missing.left.message).toContain("ENOENT")
    const badCwd = await Effect.runPromise(Effect.either(runCollect(spawnScoped(undefined, opts(["true"], { cwd: join(T, "absent") })))))
    expect(Either.isLeft(badCwd) && badCwd.left._tag === "SandboxProcessError" && badCwd.left.reason).toBe("spawn")
    const many = await Effect.runPromise(Effect.all(
      Array.from({ length: 24 }, (_, i) => runCollect(spawnScoped(undefined, opts(["sh", "-c", `echo ${i}; echo e${i} >&2`])))),
      { concurrency: 24 }
    ))
    expect(many.map((r) => r.stdout + r.stderr)).toEqual(Array.from({ length: 24 }, (_, i) => `${i}\ne${i}\n`))
  })

  it("closing the scope kills the child's whole process group; the wall-clock limit still kills", async () => {
    const pids = join(T, "group.pids")
    const scope = await Effect.runPromise(Scope.make())
    const p = await Effect.runPromise(Scope.extend(spawnScoped(undefined, opts(["sh", "-c", `sleep 300 & echo $! > ${pids}; sleep 300 & echo $! >> ${pids}; wait`])), scope))
    expect(await waitFor(() => fs.existsSync(pids) && fs.readFileSync(pids, "utf8").trim().split("\n").length === 2, 20_000)).toBe(true)
    const sleeps = fs.readFileSync(pids, "utf8").trim().split("\n").map(Number)
    expect(sleeps.every((x) => alive(x, "sleep"))).toBe(true)
    await Effect.runPromise(Scope.close(scope, Exit.void))
    expect(await waitFor(() => !alive(p.pid, "sleep") && sleeps.every((x) => !alive(x, "sleep")), 20_000)).toBe(true)
    const wall = await Effect.runPromise(Effect.either(runCollect(spawnScoped(undefined, opts(["sleep", "300"], { limits: { ...noLimits, wall_clock_seconds: 0.5 } })))))
    expect(Either.isLeft(wall) && wall.left._tag === "LimitExceededError" && wall.left.limit).toBe("wall-clock")
  })

  it("a spawner that dies: its children are killed and reported SIGKILLed, the next spawn starts a new one", async () => {
    const scope = await Effect.runPromise(Scope.make())
    const p = await Effect.runPromise(Scope.extend(spawnScoped(undefined, opts(["sleep", "300"])), scope))
    const first = spawnerPid()!
    process.kill(first, "SIGKILL")
    const exit = await Effect.runPromise(Effect.either(p.exit))
    expect(exit).toEqual(Either.right({ code: null, signal: "SIGKILL" }))
    expect(await waitFor(() => !alive(p.pid, "sleep"), 20_000)).toBe(true)
    await Effect.runPromise(Scope.close(scope, Exit.void))
    const r = await run(["sh", "-c", "echo $PPID"])
    expect(Number(r.stdout.trim())).toBe(spawnerPid())
    expect(spawnerPid()).not.toBe(first)
  })

  it("dies with its parent (kill -9), and every child started through it with it (bwrap or not)", async () => {
    const out = join(T, "host.out")
    const script = [
      `const S = await import(${JSON.stringify(new URL("../../src/sandbox/Spawner.ts", import.meta.url).href)})`,
      `const { writeFileSync } = await import("node:fs")`,
      `S.launch({ program: "bwrap", args: ["--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "sleep", "300"], env: { PATH: "/usr/bin:/bin" }, stdin: false, onExit: () => {} }, (r) => {`,
      `  S.launch({ program: "sleep", args: ["301"], env: { PATH: "/usr/bin:/bin" }, stdin: false, onExit: () => {} }, (u) => {`,
      `    writeFileSync(${JSON.stringify(out)}, JSON.stringify({ spawner: S.spawnerPid(), bwrap: r._tag === "started" ? r.child.pid : r.message, plain: u._tag === "started" ? u.child.pid : u.message }))`,
      `  })`,
      `})`,
      `setInterval(() => {}, 1000)`
    ].join("\n")
    const host = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { stdio: ["ignore", "ignore", "ignore"], cwd: process.cwd() })
    try {
      expect(await waitFor(() => fs.existsSync(out), 60_000)).toBe(true)
      const { spawner, bwrap, plain } = JSON.parse(fs.readFileSync(out, "utf8")) as { spawner: number; bwrap: number; plain: number }
      expect(typeof bwrap).toBe("number")
      expect(typeof plain).toBe("number")
      expect(ppidOf(bwrap)).toBe(spawner)
      expect(alive(spawner, "node") && alive(bwrap, "bwrap") && alive(plain, "301")).toBe(true)
      host.kill("SIGKILL")
      // The unsandboxed child too: the spawner kills its children's groups when the channel closes.
      expect(await waitFor(() => !alive(spawner, "node") && !alive(bwrap, "bwrap") && !alive(plain, "301"), 20_000)).toBe(true)
    } finally {
      host.kill("SIGKILL")
    }
  }, 90_000)

  it("cleanup counts a live daemon's sandboxes, forked by its spawner, as its own (not orphans)", async () => {
    const home = join(T, "home")
    const root = join(home, "workspaces", "w1")
    fs.mkdirSync(root, { recursive: true })
    const marker = `3000.${process.pid}`
    const scope = await Effect.runPromise(Scope.make())
    try {
      const p = await Effect.runPromise(Scope.extend(spawnScoped(undefined, opts([
        "bwrap", "--die-with-parent", "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64", "--bind", root, "/workspace", "--", "sleep", marker
      ])), scope))
      expect(await waitFor(() => alive(p.pid, marker), 20_000)).toBe(true)
      const scan = (daemonPid: number | null) =>
        Effect.runPromise(scanLeftovers({ paths: makePaths(home), daemonPid }).pipe(Effect.provide(NodeContext.layer)))
          .then((r) => r.items.filter((i) => i.kind === "orphan-sandbox-process").map((i) => i.pid))
      // This process stands for the live daemon: its spawner's bwrap is not an orphan.
      expect(await scan(process.pid)).toEqual([])
      // Control: for another (live) daemon, or none, the same bwrap is one.
      expect(await scan(ppidOf(process.pid))).toEqual([p.pid])
      expect(await scan(null)).toEqual([p.pid])
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }, 60_000)

  for (const a of attacks) {
    it(a.name, async () => {
      // The unsandboxed command holds no socket beyond its stdio; nor does the sandboxed one.
      const r = await a.run()
      expect(r.breached, r.detail).toBe(false)
      expect(r.detail).toContain("forged spawn ran: false")
    }, 60_000)
  }
})
