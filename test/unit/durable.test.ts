import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Option, Stream } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { makeCrashing } from "../../src/storage/DurableCrash.js"
import { live } from "../../src/storage/Durable.js"
import { tmpDir } from "../support/tmpDir.js"

const bytes = (s: string) => new TextEncoder().encode(s)

describe("Durable (real files)", () => {
  it.scoped("replaceAtomic replaces the whole file and leaves no .tmp", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const f = join(dir, "rec.json")
      yield* live.replaceAtomic(f, bytes("old version\n"))
      yield* live.replaceAtomic(f, bytes("new\n"))
      expect(fs.readFileSync(f, "utf8")).toBe("new\n")
      expect(fs.readdirSync(dir)).toEqual(["rec.json"])
    }))

  it.scoped("openAppend appends, writeSync truncates, truncate cuts, unlink tolerates absence", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const f = join(dir, "log")
      const h = yield* live.openAppend(f)
      yield* h.append(bytes("a\n"))
      yield* h.append(bytes("bb\n"))
      expect(fs.readFileSync(f, "utf8")).toBe("a\nbb\n")
      yield* live.truncate(f, 2)
      yield* h.append(bytes("c\n"))
      expect(fs.readFileSync(f, "utf8")).toBe("a\nc\n")
      const p = join(dir, "pending")
      yield* live.writeSync(p, bytes("long content\n"))
      yield* live.writeSync(p, bytes("x\n"))
      expect(fs.readFileSync(p, "utf8")).toBe("x\n")
      yield* live.unlink(p)
      yield* live.unlink(p)
      yield* live.unlink(p, { syncDir: false })
      expect(fs.existsSync(p)).toBe(false)
      expect(Option.getOrThrow(yield* live.size(f))).toBe(4)
      expect(Option.isNone(yield* live.readFile(p))).toBe(true)
      expect(new TextDecoder().decode(yield* live.readRange(f, 2, 100))).toBe("c\n")
    }))

  it.scoped("write (no fsync), truncateTo, patch: their sub-steps; patch writes at offsets and skips an absent file", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const f = join(dir, "log")
      const probe = makeCrashing()
      const h = yield* probe.service.openAppend(f)
      probe.control.reset()
      yield* h.write(bytes("aaaa\n"))
      yield* h.append(bytes("bb\n"))
      yield* h.truncateTo(5)
      expect(fs.readFileSync(f, "utf8")).toBe("aaaa\n")
      expect(yield* probe.service.patch(f, [{ offset: 1, bytes: bytes("xy") }, { offset: 5, bytes: bytes("c\n") }])).toBe(true)
      expect(fs.readFileSync(f, "utf8")).toBe("axya\nc\n")
      expect(yield* probe.service.patch(join(dir, "absent"), [{ offset: 0, bytes: bytes("z") }])).toBe(false)
      expect(fs.existsSync(join(dir, "absent"))).toBe(false)
      expect(probe.control.steps().map((s) => s.kind)).toEqual([
        "write", // write
        "write", // append
        "fsync",
        "truncate", // truncateTo
        "fsync",
        "write", // patch: open readwrite (not a step) · two pwrites · fsync
        "write",
        "fsync"
      ])
      // A crash at patch's second write: the first is there, the second torn (half of it).
      fs.writeFileSync(f, "0000000000")
      const c = makeCrashing({ crashAt: 2, tornFraction: 0.5 })
      const exit = yield* Effect.exit(c.service.patch(f, [{ offset: 0, bytes: bytes("ab") }, { offset: 6, bytes: bytes("wxyz") }]))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(fs.readFileSync(f, "utf8")).toBe("ab0000wx00")
    }))

  it.scoped("mkdir creates every level with the mode; removeEmptyDir keeps non-empty dirs", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const deep = join(dir, "home", "agents", "x")
      yield* live.mkdir(deep, 0o700)
      for (const d of [join(dir, "home"), join(dir, "home", "agents"), deep]) {
        expect(fs.statSync(d).mode & 0o777).toBe(0o700)
      }
      yield* live.mkdir(deep, 0o700) // existing: fine
      fs.writeFileSync(join(deep, "f"), "x")
      yield* live.removeEmptyDir(deep)
      expect(fs.existsSync(deep)).toBe(true)
      fs.rmSync(join(deep, "f"))
      yield* live.removeEmptyDir(deep)
      expect(fs.existsSync(deep)).toBe(false)
      yield* live.removeTree(join(dir, "home"))
      expect(fs.existsSync(join(dir, "home"))).toBe(false)
    }))

  it.scoped("stream reads a file in chunks up to `end`", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const f = join(dir, "big")
      const content = "0123456789".repeat(1000)
      fs.writeFileSync(f, content)
      const chunks = yield* Stream.runCollect(live.stream(f, { chunkSize: 333, end: 9000 }))
      const text = [...chunks].map((c) => Buffer.from(c).toString()).join("")
      expect(text).toBe(content.slice(0, 9000))
      expect([...chunks].length).toBe(Math.ceil(9000 / 333))
      expect([...(yield* Stream.runCollect(live.stream(join(dir, "absent"))))]).toEqual([])
    }))
})

describe("Durable crash layer", () => {
  it.scoped("counts the sub-steps of replaceAtomic: open, write, fsync, rename, dirsync", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const { control, service } = makeCrashing()
      yield* service.replaceAtomic(join(dir, "r"), bytes("v1\n"))
      expect(control.steps().map((s) => s.kind)).toEqual(["open", "write", "fsync", "rename", "dirsync"])
      expect(control.crashed()).toBe(false)
      control.reset()
      yield* service.unlink(join(dir, "r"))
      expect(control.steps().map((s) => s.kind)).toEqual(["unlink", "dirsync"])
    }))

  it.scoped("a crash at a write lands a torn prefix, fails, and refuses all further I/O", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const f = join(dir, "r")
      fs.writeFileSync(f, "old\n")
      const { control, service } = makeCrashing({ crashAt: 2 })
      const exit = yield* Effect.exit(service.replaceAtomic(f, bytes("0123456789")))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(control.crashed()).toBe(true)
      expect(control.crashedAt()?.kind).toBe("write")
      expect(fs.readFileSync(`${f}.tmp`, "utf8")).toBe("01234") // torn
      expect(fs.readFileSync(f, "utf8")).toBe("old\n") // target untouched
      const later = yield* Effect.exit(service.writeSync(join(dir, "other"), bytes("x")))
      expect(Exit.isFailure(later)).toBe(true)
      expect(fs.existsSync(join(dir, "other"))).toBe(false)
      const read = yield* Effect.exit(service.readFile(f))
      expect(Exit.isFailure(read)).toBe(true)
      expect(control.stepCount()).toBe(2)
      control.reset()
      yield* service.writeSync(join(dir, "other"), bytes("x"))
      expect(fs.readFileSync(join(dir, "other"), "utf8")).toBe("x")
    }))

  it.scoped("crashing at a rename leaves the old record and the full .tmp", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const f = join(dir, "r")
      fs.writeFileSync(f, "old\n")
      const { control, service } = makeCrashing({ crashAt: 4 })
      const exit = yield* Effect.exit(service.replaceAtomic(f, bytes("new\n")))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(control.crashedAt()?.kind).toBe("rename")
      expect(fs.readFileSync(f, "utf8")).toBe("old\n")
      expect(fs.readFileSync(`${f}.tmp`, "utf8")).toBe("new\n")
    }))
})

describe("Durable crash layer, power-loss mode", () => {
  it.scoped("at the crash: unsynced bytes are lost (or a torn prefix of the tail kept), unsynced entries undone, synced ones kept", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      fs.writeFileSync(join(dir, "old"), "on disk before\n")
      const { control, service } = makeCrashing({ powerLoss: true, tornFraction: 0 })
      // Durable: a record (replaceAtomic fsyncs the file and the directory), two fsync'd appends.
      yield* service.replaceAtomic(join(dir, "rec"), bytes("v1\n"))
      yield* Effect.scoped(Effect.gen(function*() {
        const h = yield* service.openAppend(join(dir, "log"))
        yield* h.append(bytes("a\n"))
        yield* h.append(bytes("b\n"))
      }))
      // Not durable: a file never fsync'd and a directory whose entry was never fsync'd, an
      // unlink without a directory fsync, a rename that the crash interrupts before the dirsync.
      yield* service.mkdir(join(dir, "sub", "deeper"))
      fs.mkdirSync(join(dir, "ghost"))
      yield* service.unlink(join(dir, "old"), { syncDir: false })
      control.reset(4) // open, write, fsync, rename of the next replaceAtomic: crash at its rename
      const exit = yield* Effect.exit(service.replaceAtomic(join(dir, "rec"), bytes("v2\n")))
      expect(Exit.isFailure(exit)).toBe(true)
      expect(control.crashedAt()?.kind).toBe("rename")
      expect(fs.readFileSync(join(dir, "rec"), "utf8")).toBe("v1\n")
      expect(fs.readFileSync(join(dir, "log"), "utf8")).toBe("a\nb\n")
      expect(fs.readFileSync(join(dir, "old"), "utf8")).toBe("on disk before\n") // the unlink is undone
      expect(fs.existsSync(join(dir, "sub", "deeper"))).toBe(true) // mkdir fsyncs its parents
      expect(fs.existsSync(join(dir, "ghost"))).toBe(false) // never fsync'd into its directory
      expect(fs.existsSync(join(dir, "rec.tmp"))).toBe(false) // its entry was never fsync'd
    }))

  it.scoped("a missing directory fsync after creating a file loses the file, whatever its own fsyncs", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const { control, service } = makeCrashing({ powerLoss: true, tornFraction: 0.5 })
      const h = yield* service.openAppend(join(dir, "log")) // creating it fsyncs the directory
      yield* h.append(bytes("kept\n"))
      yield* service.writeSync(join(dir, "pending"), bytes("0123456789")) // fsync'd, its entry not
      yield* h.append(bytes("x".repeat(8)))
      control.reset(2) // the next append: its write lands, its fsync crashes
      expect(Exit.isFailure(yield* Effect.exit(h.append(bytes("0123456789"))))).toBe(true)
      expect(fs.existsSync(join(dir, "pending"))).toBe(false)
      // The log: its synced bytes, then half of the unsynced tail (torn).
      expect(fs.readFileSync(join(dir, "log"), "utf8")).toBe("kept\nxxxxxxxx01234")
    }))
})
