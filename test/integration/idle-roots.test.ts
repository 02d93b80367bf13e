// Idle roots hold no file descriptor (issue 26 item 8): the orchestration stack on the file
// layers (a temp $SUBSTRAT_HOME, scripted provider), 300 roots created (the count per root is what is checked: 2,000 pass the same, in minutes) and each run one turn;
// once they have been idle past the event log's idle close, this process holds no fd under the
// home — counted in /proc/self/fd — and its fd count is within a small constant of where it was
// before the roots existed; nor does the event log keep a root's per-session lock (its state is
// dropped when idle: counted in a heap snapshot of this process). The next turn of an idle root
// reopens its log and every line reads back.
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as fs from "node:fs"
import { getHeapSnapshot } from "node:v8"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { tmpDir } from "../support/tmpDir.js"
import { eventsOf, names, stack } from "./orchestration.support.js"

/** This process's open fds: all of them, and those whose target lies under `dir`. */
const fds = (dir: string): { readonly all: number; readonly under: number } => {
  let all = 0
  let under = 0
  for (const fd of fs.readdirSync("/proc/self/fd")) {
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${fd}`)
      all++
      if (target.startsWith(dir)) under++
    } catch {} // the fd of the readdir itself, closed meanwhile
  }
  return { all, under }
}

/** `fds(dir)` once none is under `dir` (closes run on the libuv pool: polled, bounded), else the last count. */
const settled = (dir: string) =>
  Effect.promise(async () => {
    let n = fds(dir)
    for (let i = 0; i < 500 && n.under > 0; i++) {
      await new Promise((r) => setTimeout(r, 10))
      n = fds(dir)
    }
    return n
  })

/** How many objects of class `name` this process's heap holds (a heap snapshot: garbage collected first). */
const instances = (name: string) =>
  Effect.promise(async () => {
    const chunks: Array<string> = []
    for await (const chunk of getHeapSnapshot()) chunks.push(String(chunk))
    const snap = JSON.parse(chunks.join("")) as {
      snapshot: { meta: { node_fields: Array<string>; node_types: [Array<string>] } }
      nodes: Array<number>
      strings: Array<string>
    }
    const { node_fields: fields, node_types: [types] } = snap.snapshot.meta
    const [ti, ni] = [fields.indexOf("type"), fields.indexOf("name")]
    let n = 0
    for (let i = 0; i < snap.nodes.length; i += fields.length) {
      if (types[snap.nodes[i + ti]!] === "object" && snap.strings[snap.nodes[i + ni]!] === name) n++
    }
    return n
  })

const ROOTS = 300

describe("idle roots", () => {
  it.scoped(`${ROOTS} idle roots hold no fd of their logs; a later turn reopens one`, () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const before = fds(home)
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const roots = yield* Effect.forEach(
          Array.from({ length: ROOTS }, (_, i) => i),
          (i) => o.createRoot({ name: `r${i}`, instructions: "", provider: "scripted" }),
          { concurrency: 64 }
        )
        yield* Effect.forEach(roots, (r) => o.runTurn(r.id, "hello"), { concurrency: 64, discard: true })
        // While they were working their logs were open; idle past the close delay, none is.
        yield* TestClock.adjust("5 seconds")
        const idle = yield* settled(home)
        expect(idle.under).toBe(0)
        // Not one fd per root anywhere else either (sockets, watchers): a constant few at most.
        expect(idle.all - before.all).toBeLessThan(20)
        // The event log's per-session state (lock, paths, handle) is dropped once idle: a busy few
        // at most, never one per root (the class is the log's session lock, eventLogFile.ts).
        expect(yield* instances("Mutex")).toBeLessThan(10)

        const first = roots[0]!
        yield* o.runTurn(first.id, "again")
        // Its log reopened (and closed again once idle): both turns are in it, whole.
        const log = names(yield* eventsOf(first.session_id))
        expect(log.filter((e) => e === "turn.start").length).toBe(2)
        expect(log.filter((e) => e === "turn.complete").length).toBe(2)
        yield* TestClock.adjust("5 seconds")
        expect((yield* settled(home)).under).toBe(0)
      }).pipe(Effect.provide(stack({ home, scripts: { "*": { steps: [], after: "echo" } } })))
    }), 120_000)
})
