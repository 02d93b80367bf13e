// requires: bwrap
// A sandbox never holds host root, also when the daemon runs as root (as CI does): the command
// runs in a user namespace that maps only an unprivileged host uid, with no capabilities, and
// /proc/sys is read-only — an agent's `echo … > /proc/sys/kernel/…` changes nothing on the host.
// The files it writes in /workspace and its home stay usable by the daemon.
import { NodeContext } from "@effect/platform-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { noLimits } from "../../src/domain/workspace.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { layerBwrap } from "../../src/sandbox/SandboxBwrap.js"

const isRoot = process.getuid?.() === 0
const RATELIMIT = "/proc/sys/kernel/printk_ratelimit"
const CORE_PATTERN = "/proc/sys/kernel/core_pattern"

let T = ""
let home = ""
beforeAll(() => {
  T = fs.realpathSync(fs.mkdtempSync(join(tmpdir(), "substrat-hostroot-")))
  home = fs.realpathSync(fs.mkdtempSync(join(tmpdir(), "substrat-hostroot-home-")))
})
afterAll(() => {
  for (const d of [T, home]) if (d !== "") fs.rmSync(d, { recursive: true, force: true })
})

describe.runIf(isRoot)("as root: the sandbox holds no host root", () => {
  it("uid_map has no host root, CapEff is 0, /proc/sys writes fail and the host values stay", async () => {
    const ratelimit = fs.readFileSync(RATELIMIT, "utf8").trim()
    const corePattern = fs.readFileSync(CORE_PATTERN, "utf8").trim()
    const other = String(Number(ratelimit) + 1)
    // core_pattern: the host's own value is written back (harmless if it lands); the write must fail all the same.
    const script = [
      "cat /proc/self/uid_map",
      "grep -E '^(Uid|CapEff|CapPrm):' /proc/self/status",
      `(echo ${other} > ${RATELIMIT}) 2>/dev/null && echo WROTE-RATELIMIT`,
      `(printf '%s\\n' '${corePattern.replace(/'/g, "'\\''")}' > ${CORE_PATTERN}) 2>/dev/null && echo WROTE-CORE-PATTERN`,
      "(echo 1 > /proc/sysrq-trigger) 2>/dev/null && echo WROTE-SYSRQ",
      "echo agent-bytes > /workspace/made-by-agent.txt && mkdir -p /home/agent/.cfg && echo x > /home/agent/.cfg/f && echo WROTE-OWN"
    ].join("; ")
    const rt = ManagedRuntime.make(layerBwrap().pipe(Layer.provide(NodeContext.layer)))
    try {
      const r = await rt.runPromise(Effect.flatMap(Sandbox, (s) =>
        s.run({
          workspace: { root_path: T, network_access: false, symlinks: [], limits: noLimits },
          command: ["sh", "-c", script],
          extraBinds: [{ host_path: home, sandbox_path: "/home/agent", mode: "rw" }]
        })))
      const lines = r.stdout.split("\n").map((l) => l.trim().replace(/\s+/g, " "))
      const uidMap = lines.filter((l) => /^\d+ \d+ \d+$/.test(l))
      expect(uidMap.length).toBeGreaterThan(0)
      for (const m of uidMap) {
        const [inside, outside, count] = m.split(" ").map(Number) as [number, number, number]
        expect(outside <= 0 && 0 < outside + count, `uid_map line "${m}" maps host root`).toBe(false)
        expect(inside).toBeGreaterThanOrEqual(0)
      }
      expect(lines.find((l) => l.startsWith("CapEff:"))).toBe("CapEff: 0000000000000000")
      expect(lines.find((l) => l.startsWith("CapPrm:"))).toBe("CapPrm: 0000000000000000")
      expect(lines.find((l) => l.startsWith("Uid:"))).not.toMatch(/^Uid: 0\b/)
      expect(lines.filter((l) => l.startsWith("WROTE-") && l !== "WROTE-OWN")).toEqual([])
      expect(lines).toContain("WROTE-OWN")
      // The daemon can read what the agent wrote (and git can commit it: safe.directory=*).
      expect(fs.readFileSync(join(T, "made-by-agent.txt"), "utf8")).toBe("agent-bytes\n")
      expect(fs.readFileSync(join(home, ".cfg", "f"), "utf8")).toBe("x\n")
    } finally {
      await rt.dispose()
      // Whatever happened inside, the host's values are what they were (put back if a write landed).
      const after = fs.readFileSync(RATELIMIT, "utf8").trim()
      if (after !== ratelimit) fs.writeFileSync(RATELIMIT, ratelimit)
      expect(after).toBe(ratelimit)
      expect(fs.readFileSync(CORE_PATTERN, "utf8").trim()).toBe(corePattern)
    }
  })

  it("the agent's files are owned by the unprivileged sandbox uid; the workspace top is handed to it, a link is not followed", async () => {
    const ws = fs.realpathSync(fs.mkdtempSync(join(tmpdir(), "substrat-hostroot-ws-")))
    const rt = ManagedRuntime.make(layerBwrap({ sandboxUser: { uid: 65534, gid: 65534 } }).pipe(Layer.provide(NodeContext.layer)))
    try {
      const r = await rt.runPromise(Effect.flatMap(Sandbox, (s) =>
        s.run({
          workspace: { root_path: ws, network_access: false, symlinks: [], limits: noLimits },
          command: ["sh", "-c", "id -u; echo hi > /workspace/f"]
        })))
      expect(r.stdout.trim().split("\n")[0]).toBe("65534")
      expect(fs.statSync(ws).uid).toBe(65534)
      expect(fs.statSync(join(ws, "f")).uid).toBe(65534)
    } finally {
      await rt.dispose()
      fs.rmSync(ws, { recursive: true, force: true })
    }
  })
})
