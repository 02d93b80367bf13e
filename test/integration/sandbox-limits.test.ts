// requires: bwrap, git
// Resource limits through the real bwrap layer: each runaway is stopped and reported as a
// LimitExceededError naming the right limit. Runs under every identity (sandbox.support.ts).
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { noLimits, ResourceLimits, type WorkspaceSpec } from "../../src/domain/workspace.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { defaultSandboxLimits } from "../../src/sandbox/Limits.js"
import { findExact, identities, makeRuntime, openTraversal, type Runtime, sh, waitFor } from "./sandbox.support.js"

const MB = 1024 * 1024

for (const idc of identities) {
  describe(`limits — ${idc.label}`, () => {
    let T = ""
    let rt: Runtime
    let ws: WorkspaceSpec

    beforeAll(async () => {
      T = fs.mkdtempSync(join(tmpdir(), "substrat-limits-"))
      const home = join(T, "home")
      rt = makeRuntime(home, idc.identity)
      ws = await rt.runPromise(Effect.flatMap(WorkspaceStore, (s) => s.create({ ...(idc.owner ? { owner: idc.owner } : {}) })))
      if (idc.needsTraversal) {
        for (const d of [home, join(home, "workspaces"), join(home, "workspaces", ws.id)]) fs.chmodSync(d, 0o755)
        openTraversal(T)
      }
    })
    afterAll(async () => {
      await rt?.dispose()
      if (T !== "") fs.rmSync(T, { recursive: true, force: true })
    })

    const run = (script: string, limits: Partial<ResourceLimits>) =>
      rt.runPromise(
        Effect.flatMap(Sandbox, (s) =>
          s.run({ workspace: ws, command: sh(script), limits: new ResourceLimits({ ...noLimits, wall_clock_seconds: 120, ...limits }) })
        ).pipe(Effect.either)
      )
    const limitOf = (r: Awaited<ReturnType<typeof run>>) => {
      if (Either.isRight(r)) throw new Error(`expected a limit error, got exit ${JSON.stringify(r.right.exit)}; stderr: ${r.right.stderr}`)
      if (r.left._tag !== "LimitExceededError") throw new Error(`expected LimitExceededError, got ${r.left._tag}: ${r.left.message}`)
      return r.left
    }

    it("memory hog (python bytearray) → memory", async () => {
      const e = limitOf(await run("python3 -c 'x = bytearray(1 << 30); print(len(x))'", { memory_bytes: 256 * MB }))
      expect(e.limit).toBe("memory")
      console.log(`[limits ${idc.label}] python memory hog → ${e.limit} (${e.certainty}): ${e.message}`)
    })

    it("memory hog (shell string) → memory", async () => {
      const e = limitOf(await run("x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo ${#x}", { memory_bytes: 64 * MB }))
      expect(e.limit).toBe("memory")
      console.log(`[limits ${idc.label}] sh memory hog → ${e.limit} (${e.certainty}), signal ${e.signal}`)
    })

    it.skipIf(!idc.nprocEnforced)("bounded fork bomb → processes", async () => {
      const marker = `31.${Math.floor(Math.random() * 1e9)}`
      const e = limitOf(await run(`i=0; while [ $i -lt 200 ]; do sleep ${marker} & i=$((i+1)); done; wait`, { max_processes: 20 }))
      expect(e.limit).toBe("processes")
      console.log(`[limits ${idc.label}] fork bomb → ${e.limit} (${e.certainty}): ${e.message}`)
      expect(await waitFor(() => findExact(["sleep", marker]).length === 0)).toBe(true)
    })

    it.runIf(!idc.nprocEnforced)("root as-is: max_processes is NOT enforced (kernel exempts kuid 0) — documented limitation", async () => {
      const r = await run("i=0; while [ $i -lt 40 ]; do sleep 1 & i=$((i+1)); done; wait; echo forked-all", { max_processes: 5 })
      if (Either.isLeft(r)) throw new Error(r.left.message)
      expect(r.right.stdout).toContain("forked-all")
    })

    it("CPU spinner → cpu (SIGXCPU)", async () => {
      const e = limitOf(await run("while :; do :; done", { cpu_seconds: 1 }))
      expect(e).toMatchObject({ limit: "cpu", certainty: "certain", signal: "SIGXCPU" })
    })

    it("huge file → file-size (SIGXFSZ), nothing beyond the limit on disk", async () => {
      const e = limitOf(await run("head -c 10000000 /dev/zero > /workspace/big.bin", { max_file_bytes: MB }))
      expect(e).toMatchObject({ limit: "file-size", certainty: "certain", signal: "SIGXFSZ" })
      expect(fs.statSync(join(ws.root_path, "big.bin")).size).toBeLessThanOrEqual(MB)
      fs.rmSync(join(ws.root_path, "big.bin"))
    })

    it("wall clock → wall-clock, and the process is gone", async () => {
      const marker = `77.${Math.floor(Math.random() * 1e9)}`
      const e = limitOf(await run(`sleep ${marker}`, { wall_clock_seconds: 1 }))
      expect(e).toMatchObject({ limit: "wall-clock", certainty: "certain" })
      expect(await waitFor(() => findExact(["sleep", marker]).length === 0)).toBe(true)
    })

    it("defaults: a command without limits of its own gets the default rlimits and a bounded /tmp", async () => {
      const r = await rt.runPromise(
        Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws, command: sh("cat /proc/self/limits; grep ' /tmp ' /proc/mounts") }))
      )
      const limit = (name: string) => r.stdout.split("\n").find((l) => l.startsWith(name))?.split(/\s{2,}/).slice(1, 3)
      const d = defaultSandboxLimits
      expect(limit("Max processes")).toEqual([String(d.max_processes), String(d.max_processes)])
      expect(limit("Max address space")).toEqual([String(d.memory_bytes), String(d.memory_bytes)])
      // The default largest file is capped by the workspace growth budget (256 MiB < 1 GiB).
      expect(limit("Max file size")).toEqual([String(d.workspace_growth_bytes), String(d.workspace_growth_bytes)])
      expect(limit("Max cpu time")).toEqual([String(d.cpu_seconds), String(d.cpu_seconds + 1)])
      expect(r.stdout).toMatch(new RegExp(` /tmp tmpfs \\S*size=${d.tmp_bytes / 1024}k`))
    })

    it("configured defaults: a fork bomb and a /tmp filler with no limits of their own are stopped, each named", async () => {
      const home2 = join(T, "home-defaults")
      const rt2 = makeRuntime(home2, idc.identity, undefined, { defaultLimits: { max_processes: 20, tmp_bytes: 8 * MB } })
      try {
        const run2 = (script: string) =>
          rt2.runPromise(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws, command: sh(script) })).pipe(Effect.either))
        const marker = `32.${Math.floor(Math.random() * 1e9)}`
        const bomb = limitOf(await run2(`i=0; while [ $i -lt 200 ]; do sleep ${marker} & i=$((i+1)); done; wait`))
        expect(bomb).toMatchObject({ limit: "processes", value: 20 })
        expect(await waitFor(() => findExact(["sleep", marker]).length === 0)).toBe(true)
        const tmp = limitOf(await run2("head -c 20000000 /dev/zero > /tmp/fill"))
        expect(tmp).toMatchObject({ limit: "tmp-size", value: 8 * MB })
        expect(tmp.message).toMatch(/ENOSPC/)
      } finally {
        await rt2.dispose()
      }
    })

    it("workspace growth: many files, each under the file-size limit, past the per-command budget → workspace-growth; the next command works", async () => {
      const home3 = join(T, "home-growth")
      const rt3 = makeRuntime(home3, idc.identity, undefined, {
        defaultLimits: { workspace_growth_bytes: 8 * MB },
        growthPollMs: 100,
        growthHint: "raise it with the-test-key"
      })
      try {
        const run3 = (script: string) =>
          rt3.runPromise(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws, command: sh(script) })).pipe(Effect.either))
        // Already in the workspace before the command: not counted against its budget.
        fs.writeFileSync(join(ws.root_path, "before.bin"), Buffer.alloc(12 * MB, 1))
        const e = limitOf(await run3("mkdir -p /workspace/grow; i=0; while :; do head -c 1000000 /dev/zero > /workspace/grow/f$i; i=$((i+1)); done"))
        expect(e).toMatchObject({ limit: "workspace-growth", certainty: "certain", value: 8 * MB, signal: "SIGKILL" })
        expect(e.message).toMatch(/grew \/workspace by \d+ bytes and was killed; raise it with the-test-key/)
        expect(fs.readdirSync(join(ws.root_path, "grow")).length).toBeGreaterThan(8)
        // Stopped: nothing writes any more.
        const n = fs.readdirSync(join(ws.root_path, "grow")).length
        await new Promise((r) => setTimeout(r, 300))
        expect(fs.readdirSync(join(ws.root_path, "grow")).length).toBe(n)
        // The next command starts from the new size: small writes succeed.
        const ok = await run3("head -c 1000000 /dev/zero > /workspace/after.bin; echo ok")
        if (Either.isLeft(ok)) throw new Error(ok.left.message)
        expect(ok.right.stdout).toBe("ok\n")
      } finally {
        await rt3.dispose()
        for (const f of ["grow", "before.bin", "after.bin"]) fs.rmSync(join(ws.root_path, f), { recursive: true, force: true })
      }
    })

    it("workspace growth: commands that follow each other before the tree is re-measured share one budget (an attacker splitting its writes gains nothing); past it, the next is measured afresh", async () => {
      const home4 = join(T, "home-growth-shared")
      // Quiet for an hour before a re-measure: every command below starts from the first size.
      const rt4 = makeRuntime(home4, idc.identity, undefined, {
        defaultLimits: { workspace_growth_bytes: 8 * MB },
        growthPollMs: 100,
        growthIdleMs: 3_600_000
      })
      try {
        const runIn = (r: Runtime, script: string) =>
          r.runPromise(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws, command: sh(script) })).pipe(Effect.either))
        // 5 MB each: every command alone is within the 8 MB budget; the first two together are not.
        const write = (name: string) => `mkdir -p /workspace/split; head -c 5000000 /dev/urandom > /workspace/split/${name}; sleep 1; echo ok`
        const first = await runIn(rt4, write("a"))
        if (Either.isLeft(first)) throw new Error(first.left.message)
        const second = limitOf(await runIn(rt4, write("b")))
        expect(second).toMatchObject({ limit: "workspace-growth", value: 8 * MB, signal: "SIGKILL" })
        // Past the budget, the next command measures the tree first: it is not blamed for the others' bytes.
        const third = await runIn(rt4, "head -c 1000000 /dev/urandom > /workspace/split/c; sleep 1; echo ok")
        if (Either.isLeft(third)) throw new Error(third.left.message)
        expect(third.right.stdout).toBe("ok\n")
      } finally {
        await rt4.dispose()
        fs.rmSync(join(ws.root_path, "split"), { recursive: true, force: true })
      }
    })

    it("within limits: ordinary exits are results, not limit errors", async () => {
      const all = { memory_bytes: 512 * MB, cpu_seconds: 10, max_processes: 50, max_file_bytes: MB, wall_clock_seconds: 60 }
      const ok = await run("echo fine; head -c 1000 /dev/zero > /tmp/small; exit 3", all)
      if (Either.isLeft(ok)) throw new Error(ok.left.message)
      expect(ok.right.exit).toEqual({ code: 3, signal: null })
      expect(ok.right.stdout).toBe("fine\n")
    })
  })
}
