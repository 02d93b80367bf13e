// Cron triggers of a swarm (docs/swarm.md, "Schedules"): a node's agent woken on an Effect `Cron`
// schedule. `swarm schedule <node> <cron>` sets one per node; `swarm start --cron <cron>` is the
// swarm-wide one, the schedule of the root directory's node (its agent may pass work down with
// `broadcast:children` or `find:`). Each tick is a `swarm trigger` (a durable SYSTEM request).
//  - Durable: `$SUBSTRAT_HOME/swarm/schedules.json` (atomic replace) holds each schedule and the
//    last tick it fired; a daemon start resumes them.
//  - A tick that falls while the swarm is stopped (daemon up) is skipped. Ticks missed while the
//    daemon was down fire ONCE at start (however many were missed), then the schedule goes on.
//  - A schedule of a node that is orphaned (its code gone) is dropped, with a daemon log line: at
//    daemon start after the swarm's reconcile, or at its next tick when a save orphaned it.
//  - At least once: a tick's request is logged before its `last` is saved, so a crash in between
//    fires that tick again at the next start (never loses it).
// Timers are fibers on the Clock (tests drive them with TestClock).
import { Clock, Cron, Duration, Effect, Either, FiberMap, Option, Schema } from "effect"
import { join } from "node:path"
import { InvalidInputError, NotFoundError } from "../domain/errors.js"
import { Durable } from "../storage/Durable.js"
import { Swarm, SwarmConfig } from "./Swarm.js"
import { SwarmError, swarmDir } from "./SwarmRecord.js"

export const ScheduleRecord = Schema.Struct({
  node: Schema.String,
  cron: Schema.String,
  /** When it was set (ISO): the first tick is the first one after it. */
  since: Schema.String,
  /** The last tick fired (or skipped), ISO; null: none yet. */
  last: Schema.NullOr(Schema.String)
})
export type ScheduleRecord = typeof ScheduleRecord.Type

const SchedulesFile = Schema.parseJson(Schema.Struct({ version: Schema.Literal(1), schedules: Schema.Array(ScheduleRecord) }))
const decodeFile = Schema.decodeUnknownEither(SchedulesFile)
const encodeFile = Schema.encodeSync(SchedulesFile)

export interface ScheduleView extends ScheduleRecord {
  /** The next tick (ISO). */
  readonly next: string
}

/** A cron expression (5 fields, or 6 with seconds first), as Effect's `Cron.parse` reads it; its error in words. */
export const parseCron = (expr: string): Either.Either<Cron.Cron, InvalidInputError> =>
  Either.mapLeft(Cron.parse(expr), (e) =>
    new InvalidInputError({
      field: "cron",
      message: `"${expr}" is not a cron expression (${e.message}); five fields "min hour day month weekday" (e.g. "*/5 * * * *"), or six with seconds first`
    }))

/**
 * The ticks of one schedule, forever: first, if a tick fell between `last` and now (missed while
 * the daemon was down), `fire` it once; then sleep to each next tick and `fire` it.
 */
export const runTicks = <E, R>(cron: Cron.Cron, last: number, fire: (tick: Date) => Effect.Effect<void, E, R>) =>
  Effect.gen(function*() {
    let prev = last
    const now = yield* Clock.currentTimeMillis
    const missed = Cron.next(cron, new Date(prev))
    if (missed.getTime() <= now) {
      yield* fire(missed)
      prev = now
    }
    for (;;) {
      const t = yield* Clock.currentTimeMillis
      // (From the later of now and the last tick: a timer that wakes a little early never fires a tick twice.)
      const next = Cron.next(cron, new Date(Math.max(t, prev)))
      yield* Effect.sleep(Duration.millis(Math.max(0, next.getTime() - t)))
      yield* fire(next)
      prev = next.getTime()
    }
  })

/** A schedule given when the swarm starts (`swarm start --cron`): the root directory node's. */
export const ROOT_NODE_REF = ".#dir"

/** `.` names the root directory's node (the swarm-wide schedule). */
const refOf = (ref: string) => ref === "." ? ROOT_NODE_REF : ref

export class SwarmSchedules extends Effect.Service<SwarmSchedules>()("substrat/swarm/SwarmSchedules", {
  scoped: Effect.gen(function*() {
    const swarm = yield* Swarm
    const durable = yield* Durable
    const config = yield* SwarmConfig
    const file = join(swarmDir(config.home), "schedules.json")
    const timers = yield* FiberMap.make<string>()
    const lock = yield* Effect.makeSemaphore(1)
    let schedules: ReadonlyArray<ScheduleRecord> | null = null

    const io = (e: { readonly message: string }) => new SwarmError({ reason: "io", message: `${file}: ${e.message}` })

    const load = Effect.gen(function*() {
      if (schedules !== null) return schedules
      const bytes = yield* durable.readFile(file).pipe(Effect.mapError(io))
      if (Option.isNone(bytes)) return (schedules = [])
      const r = decodeFile(new TextDecoder().decode(bytes.value))
      if (Either.isLeft(r)) return yield* new SwarmError({ reason: "corrupt", message: `${file}: ${r.left.message}` })
      return (schedules = r.right.schedules)
    })

    const save = (next: ReadonlyArray<ScheduleRecord>) =>
      Effect.gen(function*() {
        yield* durable.mkdir(swarmDir(config.home), 0o700).pipe(Effect.mapError(io))
        yield* durable.replaceAtomic(file, new TextEncoder().encode(encodeFile({ version: 1, schedules: next }) + "\n")).pipe(Effect.mapError(io))
        schedules = next
      })

    /** The node ids of the swarm's orphaned nodes (none when no swarm is loaded). */
    const orphanedNodes = Effect.map(swarm.agents({ status: ["orphaned"] }), (l) => new Set<string>(l.map((a) => a.node_id))).pipe(
      Effect.orElseSucceed(() => new Set<string>())
    )

    /** A schedule of an orphaned node (its code is gone): removed from the file, with a daemon log line. */
    const dropOrphaned = (node: string) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const all = yield* load
        const gone = all.find((s) => s.node === node)
        if (gone === undefined) return
        yield* save(all.filter((s) => s.node !== node))
        yield* Effect.logWarning(`swarm schedule of ${node} ("${gone.cron}") dropped: the node is orphaned (its code is gone)`)
      }))

    /**
     * One tick: a trigger while the swarm runs (skipped while it is stopped); then `last` saved.
     * A node orphaned since (a save removed its code) loses its schedule and its timer ends.
     */
    const fire = (node: string, expr: string) => (tick: Date) =>
      Effect.gen(function*() {
        const status = yield* swarm.status
        if (Option.isSome(status) && status.value.running) {
          const sent = yield* Effect.either(swarm.trigger(node, `on schedule "${expr}", tick ${tick.toISOString()}`))
          if (Either.isLeft(sent)) {
            if ((yield* orphanedNodes).has(node)) {
              yield* dropOrphaned(node)
              return yield* Effect.interrupt
            }
            yield* Effect.logWarning(`swarm schedule of ${node}: tick ${tick.toISOString()} not fired: ${sent.left.message}`)
          }
        }
        yield* lock.withPermits(1)(Effect.gen(function*() {
          const all = yield* load
          if (!all.some((s) => s.node === node)) return
          yield* save(all.map((s) => s.node === node ? { ...s, last: tick.toISOString() } : s))
        }))
      }).pipe(Effect.catchAll((e) => Effect.logWarning(`swarm schedule of ${node}: ${e.message}`)))

    const startTimer = (s: ScheduleRecord) =>
      Either.match(parseCron(s.cron), {
        onLeft: (e) => Effect.logWarning(`swarm schedule of ${s.node} not started: ${e.message}`),
        onRight: (cron) => FiberMap.run(timers, s.node, runTicks(cron, Date.parse(s.last ?? s.since), fire(s.node, s.cron))).pipe(Effect.asVoid)
      })

    const view = (s: ScheduleRecord, now: number): ScheduleView => {
      const cron = Either.getOrUndefined(Cron.parse(s.cron))
      return { ...s, next: cron === undefined ? "" : Cron.next(cron, new Date(now)).toISOString() }
    }

    /** Set (or replace) a node's schedule; it runs from now. `.`: the root directory's node. */
    const set = (nodeRef: string, expr: string) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const ref = refOf(nodeRef)
        yield* parseCron(expr.trim())
        const node = (yield* swarm.agent(ref)).node_id
        const now = yield* Clock.currentTimeMillis
        const s: ScheduleRecord = { node, cron: expr.trim(), since: new Date(now).toISOString(), last: null }
        const all = yield* load
        yield* save([...all.filter((x) => x.node !== node), s])
        yield* startTimer(s)
        return view(s, now)
      }))

    /** Remove a node's schedule (by node id, or any reference `swarm agents` takes). */
    const remove = (nodeRef: string) =>
      lock.withPermits(1)(Effect.gen(function*() {
        const ref = refOf(nodeRef)
        const all = yield* load
        const node = all.some((s) => s.node === ref) ? ref : (yield* Effect.either(swarm.agent(ref))).pipe(Either.getRight, Option.map((a) => a.node_id), Option.getOrElse(() => ref))
        const gone = all.find((s) => s.node === node)
        if (gone === undefined) return yield* new NotFoundError({ kind: "agent", id: ref, message: `no schedule for ${ref} (substrat swarm schedule shows them)` })
        yield* save(all.filter((s) => s.node !== node))
        yield* FiberMap.remove(timers, node)
        return view(gone, yield* Clock.currentTimeMillis)
      }))

    const list = Effect.gen(function*() {
      const all = yield* load
      const now = yield* Clock.currentTimeMillis
      return all.map((s) => view(s, now))
    })

    /**
     * At daemon start (after the swarm resumed and reconciled its tree): every saved schedule runs
     * again, missed ticks once; the schedule of a node the reconcile orphaned is dropped.
     */
    const resume = Effect.gen(function*() {
      const all = yield* load
      const orphans = all.length === 0 ? new Set<string>() : yield* orphanedNodes
      let running = 0
      for (const s of all) {
        if (orphans.has(s.node)) {
          yield* dropOrphaned(s.node)
        } else {
          yield* startTimer(s)
          running++
        }
      }
      return running
    })

    return { set, remove, list, resume } as const
  })
}) {}

export const validateCron = (expr: string): Effect.Effect<string, InvalidInputError> =>
  Either.match(parseCron(expr.trim()), { onLeft: Effect.fail, onRight: () => Effect.succeed(expr.trim()) })
