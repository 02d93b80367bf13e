// Fault injection at the seven crash points of seed 001 × every I/O sub-step. One scenario
// passes through all seven (create root → record → agent.created; spawn (deferred birth);
// send/response; reply delivery; enqueue/delivery; terminate). A probe run enumerates its I/O
// steps and labels each with the seed point whose operation was in flight; then for every step
// n: run with a crash at n, discard the runtime, recover with the real file layers on the same
// directory, check the oracle, recover again and check the state and the disk did not change.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { agentState } from "../support/agentState.js"
import { SubstratPaths } from "../../src/config/Paths.js"
import type { LogEvent } from "../../src/domain/events.js"
import type { AgentId } from "../../src/domain/ids.js"
import { makeCrashing, type Step } from "../../src/storage/DurableCrash.js"
import type { Primitives } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import * as fs from "node:fs"
import { makePaths } from "../../src/config/Paths.js"
import { withTmp } from "../support/tmp.js"
import {
  type AckLog,
  agentsOnDisk,
  checkOracle,
  type Life,
  lifeLayerWith,
  readLogEvents,
  recoverLife,
  snapshotDisk,
  syncPrimitives,
  trackedScripted
} from "./recovery.support.js"
import { ManagedRuntime } from "effect"

export const POINTS = {
  P1: "after create, before the session record",
  P2: "after the record, before agent.created",
  P3: "after agent.created, before spawn success",
  P4: "after send(), before logging the response",
  P5: "after logging the response, before delivering the reply",
  P6: "after enqueue, before delivery logged",
  P7: "after agent.terminated, before tree removal",
  P8: "deferred birth at the end of the parent's turn (child record, agent.created, held messages), before turn.complete"
} as const
export type Point = keyof typeof POINTS | "other"

const pointOfEvent = (ev: LogEvent): Point => {
  switch (ev.event) {
    case "session.created":
    case "agent.created":
      return "P2"
    case "message.enqueued":
      return ev.data.kind === "response" ? "P5" : "P6"
    case "message.delivered":
      return "P6"
    case "agent.terminated":
      return "P7"
    default:
      return "P4"
  }
}

/** Per session: the operation in flight (set by the EventLog/SessionStore proxies). */
class Labeller {
  readonly current = new Map<string, { point: Point; event: string }>()
  /** The session of the latest operation: the journal's steps (one file for the home) are its. */
  latest: string | null = null
  readonly labels: Array<{ point: Point; kind: string; session: string | null }> = []
  /** `turn.complete` appends: session and the index of the next step. */
  readonly turnEnds: Array<{ session: string; at: number }> = []
  set(session: string, point: Point, event: string) {
    this.current.set(session, { point, event })
    this.latest = session
    if (event === "turn.complete") this.turnEnds.push({ session, at: this.labels.length })
  }
  record(kind: string, path: string) {
    const m = /agents\/([0-9a-f-]{36})/.exec(path)
    const session = m ? m[1]! : path.endsWith("events.journal") ? this.latest : null
    const op = session !== null ? this.current.get(session) : undefined
    let point: Point = op?.point ?? "other"
    // The entry is durable once the journal is fsync'd; the log write that follows is after it.
    const durable = kind === "write" && path.endsWith("events.jsonl")
    if (op && durable && op.event === "agent.created") point = "P3"
    if (op && durable && op.event === "turn.complete") point = "P5"
    this.labels.push({ point, kind, session })
  }
  /**
   * After the probe: a child's steps from its first one to its parent's next `turn.complete`
   * are its deferred birth (P8) — made durable before the parent's turn ends.
   */
  labelBirths(home: string) {
    for (const d of fs.readdirSync(makePaths(home).agentsDir)) {
      const created = readLogEvents(home, d).find((e) => e.event === "agent.created")
      const parent = created?.data["parent_session_id"]
      if (typeof parent !== "string") continue
      const first = this.labels.findIndex((x) => x.session === d)
      const end = this.turnEnds.find((t) => t.session === parent && t.at > first)
      if (first < 0 || end === undefined) continue
      for (let i = first; i < end.at; i++) if (this.labels[i]!.session === d) this.labels[i]!.point = "P8"
    }
  }
}

/** Primitives that record a label for every counted step (same counting as DurableCrash). */
const labelling = (base: Primitives, l: Labeller): Primitives => ({
  ...base,
  open: (path, mode) => Effect.zipRight(Effect.sync(() => mode !== "readwrite" && l.record("open", path)), base.open(path, mode)),
  write: (fd, path, b) => Effect.zipRight(Effect.sync(() => l.record("write", path)), base.write(fd, path, b)),
  fsync: (fd, path) => Effect.zipRight(Effect.sync(() => l.record("fsync", path)), base.fsync(fd, path)),
  ftruncate: (fd, path, n) => Effect.zipRight(Effect.sync(() => l.record("truncate", path)), base.ftruncate(fd, path, n)),
  rename: (a, b) => Effect.zipRight(Effect.sync(() => l.record("rename", b)), base.rename(a, b)),
  unlink: (path) => Effect.zipRight(Effect.sync(() => l.record("unlink", path)), base.unlink(path)),
  fsyncDir: (path) => Effect.zipRight(Effect.sync(() => l.record("dirsync", path)), base.fsyncDir(path)),
  mkdir: (path, mode) => Effect.zipRight(Effect.sync(() => l.record("mkdir", path)), base.mkdir(path, mode)),
  rmTree: (path) => Effect.zipRight(Effect.sync(() => l.record("remove", path)), base.rmTree(path)),
  rmdir: (path) => Effect.zipRight(Effect.sync(() => l.record("remove", path)), base.rmdir(path))
})

/** File storage over `durable`, with proxies that tell the labeller which operation runs. */
const storage = (home: string, durable: Layer.Layer<import("../../src/storage/Durable.js").Durable>, l: Labeller | null) => {
  const base = Layer.mergeAll(durable, SubstratPaths.layer(home))
  const files = Layer.mergeAll(EventLog.layerFile, SessionStore.layerFile).pipe(Layer.provide(base), Layer.orDie)
  if (l === null) return Layer.merge(files, base)
  const proxies = Layer.mergeAll(
    Layer.effect(
      EventLog,
      Effect.map(EventLog, (log) =>
        EventLog.of({
          ...log,
          append: (sid, ev) => Effect.suspend(() => (l.set(sid, pointOfEvent(ev), ev.event), log.append(sid, ev))),
          // A batch (a turn's usage and end) is labelled by its last event.
          appendAll: (sid, evs, after) =>
            Effect.suspend(() => {
              const last = evs[evs.length - 1]
              if (last !== undefined) l.set(sid, pointOfEvent(last), last.event)
              return log.appendAll(sid, evs, after)
            })
        }))
    ),
    Layer.effect(
      SessionStore,
      Effect.map(SessionStore, (st) =>
        SessionStore.of({
          ...st,
          save: (rec) =>
            Effect.suspend(() => {
              l.set(rec.id, rec.state === "created" ? "P1" : rec.state === "terminated" ? "P7" : "P4", `record.${rec.state}`)
              return st.save(rec)
            })
        }))
    )
  ).pipe(Layer.provide(files))
  return Layer.merge(proxies, base)
}

const scripts: Scripts = {
  boss: {
    steps: [
      {
        tools: [
          { tool: "spawn_agent", args: { name: "w1", instructions: "work" } },
          // Held for the unborn child, logged in its log by its birth before this turn ends.
          { tool: "send_message", args: { recipient: "w1", text: "welcome", sync: false } }
        ],
        text: "spawned"
      },
      {
        tools: [
          { tool: "send_message", args: { recipient: "w1", text: "fyi", sync: false } },
          { tool: "send_message", args: { recipient: "w1", text: "do it", sync: true } }
        ],
        text: "asked"
      },
      { text: "thanks" }
    ],
    after: "silent"
  },
  w1: { steps: [{ text: "done" }], after: "silent" }
}

interface RunOutcome {
  readonly steps: ReadonlyArray<Step>
  readonly crashed: boolean
  readonly acks: AckLog
  readonly userAcks: Array<{ id: string; to: AgentId }>
  readonly mustLive: Set<AgentId>
  readonly mustBeGone: Set<AgentId>
  /** Agents whose termination was in flight (either outcome is fine). */
  readonly mayBeGone: Set<AgentId>
  readonly mayExist: Set<string>
  readonly names: Map<string, AgentId>
}

/** Run the scenario with a crash at `crashAt` (undefined: none); stop at the first crash. */
const runScenario = async (
  home: string,
  crashAt: number | undefined,
  l: Labeller | null,
  expose?: (control: { crashed: () => boolean; steps: () => ReadonlyArray<Step> }) => void
): Promise<RunOutcome> => {
  const base = l === null ? syncPrimitives : labelling(syncPrimitives, l)
  const crashing = makeCrashing({ crashAt }, base)
  expose?.(crashing.control)
  const alive = () => !crashing.control.crashed()
  const acks: AckLog = { messages: [] }
  const registry = trackedScripted(scripts, acks, alive)
  const life: Life = ManagedRuntime.make(lifeLayerWith(storage(home, crashing.layer, l), registry))
  const out: RunOutcome = {
    steps: [],
    crashed: false,
    acks,
    userAcks: [],
    mustLive: new Set(),
    mustBeGone: new Set(),
    mayBeGone: new Set(),
    mayExist: new Set(),
    names: new Map()
  }
  const observe = () =>
    life.runPromise(Effect.map(agentState, (s) => {
      for (const n of s.tree.nodes.values()) {
        out.mayExist.add(n.id)
        out.names.set(n.name, n.id)
      }
      return s
    }))
  const boundary = async () => {
    const s = await observe()
    if (!alive()) return false
    out.mustLive.clear()
    for (const n of s.tree.nodes.values()) out.mustLive.add(n.id)
    return true
  }
  try {
    const o = await life.runPromise(Orchestrator).catch(() => null)
    if (o === null) return { ...out, steps: crashing.control.steps(), crashed: crashing.control.crashed() }
    const step = async (eff: Effect.Effect<unknown, unknown>) => {
      const r = await life.runPromise(Effect.either(eff).pipe(
        Effect.zipLeft(o.awaitIdle),
        Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("scenario step hung") })
      ))
      if (Either.isLeft(r)) { /* a failed op: the crash */ }
      return boundary()
    }
    const boss = await life.runPromise(Effect.either(o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })))
    if (Either.isRight(boss)) out.mayExist.add(boss.right.id)
    if (!(await boundary()) || Either.isLeft(boss)) return { ...out, steps: crashing.control.steps(), crashed: !alive() }
    const bossId = boss.right.id
    const send = (text: string) =>
      o.send({ agent: bossId, text }).pipe(Effect.tap((r) =>
        Effect.sync(() => {
          if (alive()) out.userAcks.push({ id: r.message_id, to: bossId })
        })
      ))
    if (!(await step(send("spawn")))) return { ...out, steps: crashing.control.steps(), crashed: true }
    if (!(await step(send("ask")))) return { ...out, steps: crashing.control.steps(), crashed: true }
    const w1 = out.names.get("w1")
    if (w1 !== undefined) {
      out.mayBeGone.add(w1)
      const ok = await step(o.terminate(w1).pipe(Effect.tap(() =>
        Effect.sync(() => {
          if (alive()) out.mustBeGone.add(w1)
        })
      )))
      if (!ok) return { ...out, steps: crashing.control.steps(), crashed: true }
    }
    return { ...out, steps: crashing.control.steps(), crashed: !alive() }
  } finally {
    await life.dispose()
  }
}

/**
 * `runScenario`, with the steps of the runtime's release counted in: the file log's close-time
 * checkpoint (the logs' fsyncs, the journal emptied) writes, so a crash can happen there too.
 */
const runScenarioClosed = async (home: string, crashAt: number | undefined, l: Labeller | null): Promise<RunOutcome> => {
  let control: { crashed: () => boolean; steps: () => ReadonlyArray<Step> } | undefined
  const r = await runScenario(home, crashAt, l, (c) => (control = c))
  return control === undefined ? r : { ...r, steps: [...control.steps()], crashed: control.crashed() }
}

const verify = async (home: string, run: RunOutcome) => {
  for (const id of agentsOnDisk(home)) run.mayExist.add(id)
  const registry = trackedScripted(scripts, { messages: [] }, () => true)
  const first = await recoverLife(home, registry)
  const ackedMessages = [
    ...run.userAcks,
    ...run.acks.messages.filter((m) => !m.held).map((m) => ({ id: m.id, to: run.names.get(m.to) ?? null }))
  ]
  const ackedRequests = run.acks.messages.filter((m) => m.sync).flatMap((m) => {
    const from = run.names.get(m.from)
    return from ? [{ id: m.id, from }] : []
  })
  const bad = await checkOracle({
    home,
    life: first.life,
    ackedMessages,
    ackedRequests,
    mustLive: [...run.mustLive].filter((a) => !run.mustBeGone.has(a) && !run.mayBeGone.has(a)),
    mustBeGone: [...run.mustBeGone],
    mayExist: run.mayExist
  })
  await first.life.dispose()
  // Idempotence: a second recovery changes nothing, on disk or in memory.
  const disk1 = snapshotDisk(home)
  const second = await recoverLife(home, registry)
  await second.life.dispose()
  const disk2 = snapshotDisk(home)
  const same = JSON.stringify(first.state) === JSON.stringify(second.state)
  return { bad, report: first.report, same, states: same ? "" : `${JSON.stringify(first.state)}\n  vs ${JSON.stringify(second.state)}`, disk1, disk2 }
}

describe("recovery: fault injection at the seven seed points × every I/O sub-step", () => {
  it("the scenario is deterministic and covers all seven points", async () => {
    await withTmp(async (home) => {
      const l = new Labeller()
      const probe = await runScenarioClosed(home, undefined, l)
      l.labelBirths(home)
      expect(probe.crashed).toBe(false)
      expect(l.labels.length).toBe(probe.steps.length)
      const points = new Set(l.labels.map((x) => x.point))
      for (const p of Object.keys(POINTS)) expect(points.has(p as Point), p).toBe(true)
      await withTmp(async (home2) => {
        const again = await runScenarioClosed(home2, undefined, null)
        expect(again.steps.map((s) => s.kind)).toEqual(probe.steps.map((s) => s.kind))
      })
    })
  })

  it("crash at every step, recover, oracle holds; recovering again changes nothing", { timeout: 600_000 }, async () => {
    const l = new Labeller()
    const total = await withTmp(async (home) => {
      const probe = await runScenarioClosed(home, undefined, l)
      l.labelBirths(home)
      return probe.steps.length
    })
    const cases = new Map<string, number>()
    const failures: Array<string> = []
    for (let n = 1; n <= total; n++) {
      const label = l.labels[n - 1]!
      const key = `${label.point} × ${label.kind}`
      cases.set(key, (cases.get(key) ?? 0) + 1)
      await withTmp(async (home) => {
        const run = await runScenarioClosed(home, n, null)
        if (!run.crashed) failures.push(`step ${n}: no crash happened`)
        const v = await verify(home, run)
        for (const b of v.bad) failures.push(`step ${n} (${key}): ${b}`)
        if (!v.same) failures.push(`step ${n} (${key}): second recovery gave a different state: ${v.states}`)
        if (JSON.stringify(v.disk1) !== JSON.stringify(v.disk2)) {
          failures.push(`step ${n} (${key}): second recovery changed the disk`)
        }
      })
    }
    const perPoint = new Map<string, number>()
    for (const x of l.labels) perPoint.set(x.point, (perPoint.get(x.point) ?? 0) + 1)
    console.log(
      `recovery crash points: ${total} (point × sub-step) cases over ${cases.size} distinct pairs\n` +
        [...perPoint.entries()].sort().map(([p, n]) => `  ${p} ${POINTS[p as keyof typeof POINTS] ?? "(start-up / other)"}: ${n}`).join("\n") +
        "\n" + [...cases.entries()].sort().map(([k, n]) => `    ${k}: ${n}`).join("\n")
    )
    expect(failures).toEqual([])
  })
})
