// Workspace history on the request path, through the real daemon (bundled, over its socket):
//   - `agent.create` of a root with a workspace of its own (the history repository is made) vs
//     one in an existing, shared workspace (no history work) — goal: own ≤ 100 ms and ≤ 2× shared;
//   - send → answer of an echo agent (`agent.send` with `wait`) vs the turn itself (turn.start to
//     turn.complete in its event log: turn.complete's `duration_ms`, µs, where the daemon logs
//     it, else the entries' whole-ms timestamps) — goal ≤ 2×; after each turn the daemon records
//     the workspace's changes (none here) in its history.
// SUBSTRAT_BENCH_BEFORE=<another checkout, built> runs that checkout's daemon in the same run,
// interleaved with this one (before/after figures from one run). Ratios are medians of per-round
// ratios, so both sides of a ratio were measured at the same load.
import { readFileSync } from "node:fs"
import { loadavg } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { oneCall, startSubject, stopSubject, type Subject } from "./daemon.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "workspace"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

interface Node {
  readonly name: string
  readonly session_id: string
  readonly workspace_id: string | null
}

let seq = 0
const call = async (s: Subject, method: string, params: unknown): Promise<{ readonly ms: number; readonly result: unknown }> => {
  const t = performance.now()
  const r = await oneCall(s.socket, JSON.stringify({ jsonrpc: "2.0", id: ++seq, method, params }) + "\n") as { result?: unknown; error?: unknown }
  const ms = performance.now() - t
  if (r.result === undefined) throw new Error(`${method}: ${JSON.stringify(r.error)}`)
  return { ms, result: r.result }
}

/**
 * The last turn's duration in `session`'s event log, ms: `ts` from the entries' timestamps
 * (turn.start → turn.complete, whole ms), `fine` from turn.complete's `duration_ms` (the same
 * span on the daemon's monotonic clock, µs; undefined for a daemon that does not log it).
 */
const lastTurnMs = (s: Subject, session: string): { readonly ts: number; readonly fine: number | undefined } => {
  const lines = readFileSync(join(s.env["SUBSTRAT_HOME"]!, "agents", session, "events.jsonl"), "utf8").trim().split("\n")
  let start = NaN
  let end = NaN
  let fine: number | undefined
  for (const l of lines) {
    const e = JSON.parse(l) as { ts: string; event: string; data: { duration_ms?: number } }
    if (e.event === "turn.start") start = Date.parse(e.ts)
    if (e.event === "turn.complete") {
      end = Date.parse(e.ts)
      fine = e.data.duration_ms
    }
  }
  return { ts: end - start, fine }
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const rounds = opts.quick ? 3 : 8
  const perRound = opts.quick ? 3 : 5
  const beforeRoot = process.env["SUBSTRAT_BENCH_BEFORE"]
  const subjects: Array<Subject> = [startSubject("after", join(root, "scripts", "substrat.cjs"))]
  const rows: Array<Record<string, string | number>> = []
  const summary: Record<string, number | string> = {}
  try {
    if (beforeRoot !== undefined && beforeRoot !== "") subjects.push(startSubject("before", join(beforeRoot, "scripts", "substrat.cjs")))
    const echo = new Map<string, Node>()
    const shared = new Map<string, string>()
    for (const s of subjects) {
      const a = (await call(s, "agent.create", { name: "echo", provider: "scripted" })).result as Node
      echo.set(s.label, a)
      shared.set(s.label, a.workspace_id!)
      // Warm-up: both kinds of create and a turn.
      await call(s, "agent.create", { name: "warm-own" })
      await call(s, "agent.create", { name: "warm-shared", workspace_id: a.workspace_id })
      await call(s, "agent.send", { agent: "echo", text: "warm", sync: true, wait: true })
    }
    const own = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
    const inShared = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
    const answer = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
    const turn = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
    const turnFine = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
    const createRatio = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
    const answerRatio = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
    const load0 = loadavg()
    let n = 0
    for (let r = 0; r < rounds; r++) {
      const ro = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
      const rs = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
      const ra = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
      const rt = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
      const rf = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
      for (let i = 0; i < perRound; i++) {
        for (const s of r % 2 === 0 ? subjects : [...subjects].reverse()) {
          n++
          ro.get(s.label)!.push((await call(s, "agent.create", { name: `own-${n}` })).ms)
          rs.get(s.label)!.push((await call(s, "agent.create", { name: `shared-${n}`, workspace_id: shared.get(s.label) })).ms)
          ra.get(s.label)!.push((await call(s, "agent.send", { agent: "echo", text: `ping ${n}`, sync: true, wait: true })).ms)
          const t = lastTurnMs(s, echo.get(s.label)!.session_id)
          rt.get(s.label)!.push(t.ts)
          if (t.fine !== undefined) rf.get(s.label)!.push(t.fine)
        }
      }
      for (const s of subjects) {
        own.get(s.label)!.push(...ro.get(s.label)!)
        inShared.get(s.label)!.push(...rs.get(s.label)!)
        answer.get(s.label)!.push(...ra.get(s.label)!)
        turn.get(s.label)!.push(...rt.get(s.label)!)
        createRatio.get(s.label)!.push(median(ro.get(s.label)!) / median(rs.get(s.label)!))
        turnFine.get(s.label)!.push(...rf.get(s.label)!)
        // The turn from `duration_ms` where the daemon logs it, else from the whole-ms timestamps.
        const fine = rf.get(s.label)!
        answerRatio.get(s.label)!.push(median(ra.get(s.label)!) / (fine.length > 0 ? median(fine) : Math.max(1, median(rt.get(s.label)!))))
      }
    }
    const load1 = loadavg()
    const f = (x: number) => Number(x.toFixed(2))
    for (const s of subjects) {
      const l = s.label
      rows.push({ daemon: l, measure: "agent.create, own workspace", n: own.get(l)!.length, median_ms: median(own.get(l)!) })
      rows.push({ daemon: l, measure: "agent.create, shared workspace", n: inShared.get(l)!.length, median_ms: median(inShared.get(l)!) })
      rows.push({ daemon: l, measure: "own / shared (median of rounds)", n: rounds, median_ms: f(median(createRatio.get(l)!)) })
      rows.push({ daemon: l, measure: "echo: send → answer", n: answer.get(l)!.length, median_ms: median(answer.get(l)!) })
      rows.push({ daemon: l, measure: "echo: the turn (log timestamps, whole ms)", n: turn.get(l)!.length, median_ms: median(turn.get(l)!) })
      const fine = turnFine.get(l)!
      if (fine.length > 0) rows.push({ daemon: l, measure: "echo: the turn (turn.complete duration_ms)", n: fine.length, median_ms: f(median(fine)) })
      rows.push({
        daemon: l,
        measure: `answer / turn (median of rounds; turn from ${fine.length > 0 ? "duration_ms" : "timestamps"})`,
        n: rounds,
        median_ms: f(median(answerRatio.get(l)!))
      })
      summary[`create_own_ms_${l}`] = f(median(own.get(l)!))
      summary[`create_shared_ms_${l}`] = f(median(inShared.get(l)!))
      summary[`create_own_vs_shared_${l}`] = f(median(createRatio.get(l)!))
      summary[`send_answer_ms_${l}`] = f(median(answer.get(l)!))
      summary[`turn_ms_${l}`] = f(fine.length > 0 ? median(fine) : median(turn.get(l)!))
      summary[`answer_vs_turn_${l}`] = f(median(answerRatio.get(l)!))
    }
    rows.push({ daemon: "", measure: `load average before: ${load0.map(f).join(" ")}, after: ${load1.map(f).join(" ")}`, n: 0 })
    summary["loadavg_1m"] = f(load0[0]!)
    summary["goal_create_own_ms"] = 100
    summary["goal_create_own_vs_shared"] = 2
    summary["goal_answer_vs_turn"] = 2
    return { rows, summary }
  } finally {
    for (const s of subjects) stopSubject(s)
  }
}
