// The provider-state attacks of the `security` chaos experiment (scripts/chaos-security/cluster.ts):
// a state restored on the runner a tree moves to may not write outside the agent's directory
// (`..`, absolute paths, paths outside home/, links planted on the way or at the target), nor
// be larger than the limit; packing never follows a link, never opens a FIFO, refuses past the
// limit. Plus a state that round-trips.
import { Effect, Option } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { attacks } from "../../scripts/chaos-security/cluster.js"
import { packState, statePathRefusal, unpackState } from "../../src/daemon/ClusterCarry.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const dir = makeTmpDir("substrat-carry-")
afterAll(() => removeDir(dir))

describe("cluster provider state", () => {
  for (const a of attacks) {
    it(a.name, async () => {
      const r = await a.run()
      expect(r.breached, r.detail).toBe(false)
    })
  }

  it("only cli-resume.json and plain paths under home/", () => {
    expect(statePathRefusal("cli-resume.json")).toBeNull()
    expect(statePathRefusal("home/.claude/projects/x.jsonl")).toBeNull()
    for (const bad of ["home", "home/", "session.json", "events.jsonl", "/home/x", "home/../x", "home/./x", "home//x", "home/a\0b"]) {
      expect(statePathRefusal(bad), bad).not.toBeNull()
    }
  })

  it("a packed state unpacks to the same files elsewhere", async () => {
    const from = join(dir, "from")
    fs.mkdirSync(join(from, "home", ".codex", "sessions"), { recursive: true })
    fs.writeFileSync(join(from, "home", ".codex", "sessions", "t.jsonl"), "line\n")
    fs.writeFileSync(join(from, "cli-resume.json"), "{\"resume_id\":\"t\"}")
    fs.writeFileSync(join(from, "events.jsonl"), "not provider state")
    const packed = await Effect.runPromise(packState(from))
    expect(Option.isSome(packed)).toBe(true)
    const to = join(dir, "to")
    expect(await Effect.runPromise(unpackState(to, Option.getOrThrow(packed)))).toBe(2)
    expect(fs.readFileSync(join(to, "home", ".codex", "sessions", "t.jsonl"), "utf8")).toBe("line\n")
    expect(fs.readFileSync(join(to, "cli-resume.json"), "utf8")).toBe("{\"resume_id\":\"t\"}")
    expect(fs.existsSync(join(to, "events.jsonl"))).toBe(false)
    expect(Option.isNone(await Effect.runPromise(packState(join(dir, "none"))))).toBe(true)
  })
})
