// The no-follow file helper (src/sandbox/NoFollow.ts): the daemon's reads, writes, chowns and
// removals inside agent-writable trees never go through a link — as the last component, as a
// parent directory, or swapped in while the operation runs.
import { describe, expect, it } from "@effect/vitest"
import { execFileSync, spawn } from "node:child_process"
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as NoFollow from "../../src/sandbox/NoFollow.js"

const scratch = () => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "substrat-nofollow-"))
  const tree = Path.join(dir, "tree") // what the agent can write
  const host = Path.join(dir, "host") // what it must never reach
  Fs.mkdirSync(tree)
  Fs.mkdirSync(host)
  Fs.writeFileSync(Path.join(host, "secret.json"), "host bytes")
  return { dir, tree, host, cleanup: () => Fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 }) }
}

const run = <A>(e: Effect.Effect<A, NoFollow.NoFollowError>) => Effect.runSync(Effect.either(e))

describe("NoFollow", () => {
  it("writes a file, making its parents, with the mode asked", () => {
    const s = scratch()
    try {
      expect(Either.isRight(run(NoFollow.writeFile(s.tree, ".codex/catalog.json", "{}", { mode: 0o640 })))).toBe(true)
      const file = Path.join(s.tree, ".codex", "catalog.json")
      expect(Fs.readFileSync(file, "utf8")).toBe("{}")
      expect(Fs.statSync(file).mode & 0o777).toBe(0o640)
      expect(Fs.readdirSync(Path.join(s.tree, ".codex"))).toEqual(["catalog.json"])
      expect(new TextDecoder().decode(Either.getOrThrow(run(NoFollow.readFile(s.tree, ".codex/catalog.json"))))).toBe("{}")
    } finally {
      s.cleanup()
    }
  })

  it("a link as the last component is replaced, its target untouched", () => {
    const s = scratch()
    try {
      Fs.mkdirSync(Path.join(s.tree, ".codex"))
      const planted = Path.join(s.tree, ".codex", "catalog.json")
      Fs.symlinkSync(Path.join(s.host, "secret.json"), planted)
      expect(Either.isRight(run(NoFollow.writeFile(s.tree, ".codex/catalog.json", "daemon bytes")))).toBe(true)
      expect(Fs.readFileSync(Path.join(s.host, "secret.json"), "utf8")).toBe("host bytes")
      expect(Fs.lstatSync(planted).isSymbolicLink()).toBe(false)
      expect(Fs.readFileSync(planted, "utf8")).toBe("daemon bytes")
      // Reading through a link is refused.
      Fs.rmSync(planted)
      Fs.symlinkSync(Path.join(s.host, "secret.json"), planted)
      const read = run(NoFollow.readFile(s.tree, ".codex/catalog.json"))
      expect(Either.isLeft(read) && read.left.reason).toBe("link")
    } finally {
      s.cleanup()
    }
  })

  it("a link as a parent directory is refused: nothing written or read beyond it", () => {
    const s = scratch()
    try {
      Fs.symlinkSync(s.host, Path.join(s.tree, ".codex"))
      const w = run(NoFollow.writeFile(s.tree, ".codex/secret.json", "daemon bytes"))
      expect(Either.isLeft(w) && w.left.reason).toBe("link")
      expect(Fs.readdirSync(s.host)).toEqual(["secret.json"])
      expect(Fs.readFileSync(Path.join(s.host, "secret.json"), "utf8")).toBe("host bytes")
      const r = run(NoFollow.readFile(s.tree, ".codex/secret.json"))
      expect(Either.isLeft(r) && r.left.reason).toBe("link")
      const mk = run(NoFollow.makeDirectory(s.tree, ".codex/sub"))
      expect(Either.isLeft(mk) && mk.left.reason).toBe("link")
      expect(Fs.readdirSync(s.host)).toEqual(["secret.json"])
      const ls = run(NoFollow.readDirectory(s.tree, ".codex"))
      expect(Either.isLeft(ls) && ls.left.reason).toBe("link")
      expect(Either.getOrThrow(run(NoFollow.entryType(s.tree, ".codex")))).toBe("link")
      expect(Either.getOrThrow(run(NoFollow.readDirectory(s.tree, "")))).toEqual([{ name: ".codex", type: "link", size: expect.any(Number) }])
    } finally {
      s.cleanup()
    }
  })

  it("a FIFO, a directory or an oversized file is refused without blocking", () => {
    const s = scratch()
    try {
      execFileSync("mkfifo", [Path.join(s.tree, "pipe")])
      const r = run(NoFollow.readFile(s.tree, "pipe"))
      expect(Either.isLeft(r) && r.left.reason).toBe("not-a-file")
      Fs.mkdirSync(Path.join(s.tree, "d"))
      const d = run(NoFollow.readFile(s.tree, "d"))
      expect(Either.isLeft(d) && d.left.reason).toBe("not-a-file")
      Fs.writeFileSync(Path.join(s.tree, "big"), "x".repeat(100))
      const b = run(NoFollow.readFile(s.tree, "big", 10))
      expect(Either.isLeft(b) && b.left.reason).toBe("too-large")
    } finally {
      s.cleanup()
    }
  })

  it("refuses paths that leave the root by spelling", () => {
    const s = scratch()
    try {
      for (const bad of ["../host/secret.json", "/etc/passwd", "a//b", "./a", "a/../../host"]) {
        const r = run(NoFollow.writeFile(s.tree, bad, "x"))
        expect(Either.isLeft(r) && r.left.reason).toBe("path")
      }
      expect(Fs.readFileSync(Path.join(s.host, "secret.json"), "utf8")).toBe("host bytes")
    } finally {
      s.cleanup()
    }
  })

  it("removeTree unlinks links and never enters them", () => {
    const s = scratch()
    try {
      const ws = Path.join(s.tree, "ws")
      Fs.mkdirSync(Path.join(ws, "a", "b"), { recursive: true })
      Fs.writeFileSync(Path.join(ws, "a", "b", "f"), "x")
      Fs.symlinkSync(s.host, Path.join(ws, "a", "escape"))
      Fs.symlinkSync(Path.join(s.host, "secret.json"), Path.join(ws, "file-link"))
      expect(Either.isRight(run(NoFollow.removeTree(s.tree, "ws")))).toBe(true)
      expect(Fs.existsSync(ws)).toBe(false)
      expect(Fs.readdirSync(s.host)).toEqual(["secret.json"])
      // The tree named itself a link: the link goes, its target stays.
      Fs.symlinkSync(s.host, Path.join(s.tree, "ws"))
      expect(Either.isRight(run(NoFollow.removeTree(s.tree, "ws")))).toBe(true)
      expect(Fs.readdirSync(s.host)).toEqual(["secret.json"])
      expect(Either.isRight(run(NoFollow.removeTree(s.tree, "absent")))).toBe(true)
    } finally {
      s.cleanup()
    }
  })

  it.runIf(process.getuid?.() === 0)("chown changes the entry, never a link's target (root)", () => {
    const s = scratch()
    try {
      Fs.symlinkSync(Path.join(s.host, "secret.json"), Path.join(s.tree, "link"))
      expect(Either.isRight(run(NoFollow.chown(s.tree, "link", { uid: 65534, gid: 65534 })))).toBe(true)
      expect(Fs.statSync(Path.join(s.host, "secret.json")).uid).toBe(0)
      expect(Fs.lstatSync(Path.join(s.tree, "link")).uid).toBe(65534)
      expect(Either.isRight(run(NoFollow.chown(s.tree, "", { uid: 65534, gid: 65534 })))).toBe(true)
      expect(Fs.statSync(s.tree).uid).toBe(65534)
      const w = run(NoFollow.writeFile(s.tree, "d/f", "x", { owner: { uid: 65534, gid: 65534 } }))
      expect(Either.isRight(w)).toBe(true)
      expect(Fs.statSync(Path.join(s.tree, "d")).uid).toBe(65534)
      expect(Fs.statSync(Path.join(s.tree, "d", "f")).uid).toBe(65534)
    } finally {
      s.cleanup()
    }
  })

  // An attacker process swaps a directory for a link to the host directory and back as fast as it
  // can while the daemon writes, reads and removes through it: no operation may ever land outside.
  it("a link swapped in while operations run never lets one through", async () => {
    const s = scratch()
    try {
      Fs.mkdirSync(Path.join(s.tree, "real"))
      Fs.mkdirSync(Path.join(s.tree, "d"))
      // d is a directory, then for a moment a link to the host directory, then a directory again.
      // -T / -n: the attacker's own mv and ln never act *through* a link d (that would be the
      // attacker writing into the host directory, not the daemon), also when the daemon made d anew.
      const script = `cd ${JSON.stringify(s.tree)} || exit 1; i=0; while [ $i -lt 100000 ]; do ` +
        `mv -T d saved; ln -sn ${JSON.stringify(s.host)} d; rm -f d; mv -T saved d; i=$((i+1)); done`
      // Its own process group: the kill below ends the shell and the mv/ln/rm it is running at that moment.
      const attacker = spawn("sh", ["-c", script], { stdio: "ignore", detached: true })
      try {
        for (let i = 0; i < 1500; i++) {
          run(NoFollow.writeFile(s.tree, "d/secret.json", `daemon ${i}`))
          run(NoFollow.readFile(s.tree, "d/secret.json"))
          run(NoFollow.removeTree(s.tree, "d/secret.json"))
          run(NoFollow.makeDirectory(s.tree, "d/made"))
        }
      } finally {
        // Wait for it to be gone: a dying attacker still renaming in the tree fails the cleanup's rmdir.
        // The whole group: killing only the shell leaves its current mv running as an orphan.
        const gone = attacker.exitCode !== null || attacker.signalCode !== null ? Promise.resolve() : new Promise((r) => attacker.once("exit", r))
        if (attacker.pid !== undefined) {
          try {
            process.kill(-attacker.pid, "SIGKILL")
          } catch {
            // already gone
          }
        }
        await gone
      }
      expect(Fs.readdirSync(s.host).sort()).toEqual(["secret.json"])
      expect(Fs.readFileSync(Path.join(s.host, "secret.json"), "utf8")).toBe("host bytes")
    } finally {
      s.cleanup()
    }
  })
})
