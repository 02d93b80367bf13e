// The daemon process (`substrat daemon run`). Start-up, in order — each step scoped, so
// shutdown (SIGTERM/SIGINT, `daemon.stop`, or a failed start) releases them in reverse:
//   1. $SUBSTRAT_HOME (0700)          2. pid file (stale removed; live daemon → DaemonError)
//   3. storage: Durable, EventLog (tapped), SessionStore    4. transcript writer
//   5. orchestration                  6. recovery hook      7. drain-on-shutdown finalizer
//   8. admin socket: stock @effect/rpc (`RpcServer.layerProtocolSocketServer`, NDJSON JSON-RPC)
//      over `NodeSocketServer`, with the transport guard (SocketGuard.ts) in between; it listens
//      at a staging path, is chmod'ed 0600 there, then renamed to daemon.sock
// Shutdown therefore goes: stop accepting (socket closed and unlinked) → wait for running turns
// up to the grace period → suspend live sessions → close logs → remove the pid file.
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Context, Deferred, Duration, Effect, Either, Layer, Option, Scope } from "effect"
import { makePaths, SubstratPaths } from "../config/Paths.js"
import type { DaemonSettings } from "../config/DaemonConfig.js"
import { DaemonConfig } from "../config/DaemonConfig.js"
import { DaemonControl } from "./DaemonControl.js"
import { HandlersLive, inProcessClient } from "./Handlers.js"
import * as FileLimit from "./FileLimit.js"
import * as Spawner from "../sandbox/Spawner.js"
import * as Http from "../http/Server.js"
import { acquirePidFile, DaemonError, prepareHome, publishSocket, stagingSocket } from "./Lifecycle.js"
import { AdminRpcs } from "../protocol/AdminRpcs.js"
import { Drain, RuntimeLive, runtimeOn, StorageSql } from "./Runtime.js"
import * as Cluster from "./Cluster.js"
import * as ClusterPresence from "./ClusterPresence.js"
import * as net from "node:net"
import * as ClusterTrees from "./ClusterTrees.js"
import * as ClusterCarry from "./ClusterCarry.js"
import { admit } from "./ClusterJoin.js"
import { version } from "../version.js"
import { TreeEntityLive } from "./handlers/Agents.js"
import { ResolverService } from "./Resolver.js"
import { Recovery } from "../recovery/Recovery.js"
import * as Postgres from "../storage/Postgres.js"
import { parseAddress } from "../domain/address.js"
import * as SocketGuard from "../protocol/SocketGuard.js"
import { monitor } from "./Storage.js"
import { faultOf } from "../domain/errors.js"
import { StartupRecovery } from "../recovery/StartupRecovery.js"
import { MergeQueue } from "./MergeQueue.js"
import { installOtlp, Tracing } from "../telemetry/Tracing.js"
import { Swarm } from "../swarm/Swarm.js"
import { SwarmSchedules } from "../swarm/Schedules.js"
import { Finder } from "../agent/Finder.js"
import { parseTestResolve } from "../domain/egress.js"
import * as Resolver from "../egress/Resolver.js"
import type { EgressResolver } from "../egress/Resolver.js"

/** What a caller may replace: the egress proxy's resolver (tests: fixed names for a local fake registry). */
export interface DaemonOverrides {
  readonly egressResolver?: Layer.Layer<EgressResolver>
}

/** Run a daemon until `daemon.stop` or interruption (signals); every resource released on exit. */
export const run = (settings: DaemonSettings, overrides: DaemonOverrides = {}): Effect.Effect<void, DaemonError> =>
  Effect.scoped(Effect.gen(function*() {
    const paths = makePaths(settings.home)
    // Cluster mode: Postgres must answer before anything starts (exit 2 with the URL and the cause).
    const cluster = yield* clusterStart(settings)
    const control = yield* DaemonControl.make(settings, paths.socket)
    // stdout/stderr are daemon.log: a failed write (a full disk) must not end the process (an
    // 'error' nobody handles, or bin.ts's listener rethrowing it, is an uncaught exception that
    // ends the daemon with no line anywhere: its log is on the full disk). The line is lost; the
    // failure is kept for `daemon status` and turns the daemon read-only (Storage.ts).
    for (const out of [process.stdout, process.stderr]) out.on("error", (e) => control.storage.logFailed(e))
    yield* prepareHome(paths)
    // Open files: soft limit up to the hard one (FileLimit.ts), so a connection flood cannot starve the daemon.
    const files = yield* FileLimit.raise
    if (files !== undefined && files.soft < files.hard) yield* Effect.logWarning(`open-file limit ${files.soft} is below its hard limit ${files.hard} (prlimit failed)`)
    const pidFile = yield* acquirePidFile(paths)
    // Children are forked by the spawner process (sandbox/Spawner.ts): start it while the heap is small.
    yield* Effect.sync(Spawner.warm)
    // Tracing (src/telemetry/Tracing.ts): installed before any service starts, flushed last.
    const tracing = Option.isSome(settings.otlp.endpoint)
      ? Layer.succeed(Tracing, yield* installOtlp({ endpoint: settings.otlp.endpoint.value }))
      : Layer.empty

    const base = Layer.mergeAll(
      SubstratPaths.layer(settings.home),
      DaemonConfig.layer(settings),
      DaemonControl.layer(control),
      // egress.testResolve (tests only; names under .substrat-test, checked at load) or the system's.
      overrides.egressResolver ?? Option.match(settings.egress.testResolve, {
        onNone: () => Resolver.layerSystem,
        onSome: (spec) => Resolver.layerOverride(Either.getOrElse(parseTestResolve(spec), () => ({})))
      }),
      tracing
    )
    // Storage, transcript and orchestration (Runtime.ts decides which implementations).
    const storageRuntime = cluster === undefined
      ? RuntimeLive
      : runtimeOn(StorageSql.pipe(Layer.provide(Layer.succeedContext(cluster.sql)))).pipe(
        // Workspaces and provider state carried to the runner a tree moves to (ClusterCarry.ts).
        Layer.provideMerge(ClusterCarry.layer.pipe(Layer.provide(Layer.succeedContext(cluster.sql))))
      )
    const runtime = yield* Layer.build(storageRuntime.pipe(Layer.provideMerge(base))).pipe(
      Effect.mapError((e) => new DaemonError({ reason: "home", message: `start-up failed: ${String(e)}` }))
    )

    // A full or failing disk: recovery writes nothing and the daemon serves reads only (Storage.ts).
    const storage = control.storage
    storage.probe()
    if (pidFile.unwritten !== null) storage.enterReadOnly(pidFile.unwritten, { startup: true })
    const recovery = yield* Effect.provide(StartupRecovery, runtime)
    const readOnlyRecovery = (why: string) =>
      Effect.gen(function*() {
        storage.enterReadOnly(why, { startup: true })
        yield* Effect.logWarning(`read-only mode: ${why}; recovery writes nothing, no turn starts, changes are refused`)
        if (recovery.runReadOnly === undefined) return yield* Effect.fail(why)
        return yield* recovery.runReadOnly
      })
    const [recoveryTook, report] = yield* (storage.readOnly() ? readOnlyRecovery(storage.status().reason ?? "storage unavailable") : recovery.run.pipe(
      Effect.catchAll((e) => faultOf(e) !== undefined ? readOnlyRecovery(`recovery could not write: ${String(e)}`) : Effect.fail(e))
    )).pipe(
      Effect.timed,
      Effect.provide(runtime),
      Effect.mapError((e) => new DaemonError({ reason: "home", message: `recovery failed: ${String(e)}` }))
    )
    yield* monitor(storage)
    yield* Effect.logInfo(
      `recovered ${report.sessions} session(s), ${report.suspended} suspended, ${report.agents} agent(s) in ${
        Math.round(Duration.toMillis(recoveryTook))
      } ms` +
        (report.notes.length > 0 ? `; ${report.notes.join("; ")}` : "")
    )

    // A swarm that was running when the daemon stopped (or died) runs again: reconcile, watch.
    const swarm = yield* Effect.flatMap(Swarm, (s) => s.resume).pipe(
      Effect.provide(runtime),
      Effect.catchAll((e) => Effect.as(Effect.logWarning(`swarm not resumed: ${e.message}`), Option.none()))
    )
    if (swarm._tag === "Some") yield* Effect.logInfo(`swarm ${swarm.value.name} of ${swarm.value.root} resumed: ${swarm.value.nodes} node(s)`)
    // Cron schedules run again (a tick missed while the daemon was down fires once).
    yield* Effect.flatMap(SwarmSchedules, (s) => s.resume).pipe(
      Effect.provide(runtime),
      Effect.catchAll((e) => Effect.logWarning(`swarm schedules not resumed: ${e.message}`))
    )
    // `find:` searches the crash caught in transit go on (after the swarm: its symbols are back).
    const finds = yield* Effect.flatMap(Finder, (f) => f.resumeRecovered).pipe(Effect.provide(runtime))
    if (finds > 0) yield* Effect.logInfo(`${finds} find: search(es) in transit resumed`)
    // Merge queues go on: items queued and never merged or failed are retried (MergeQueue.ts).
    yield* Effect.flatMap(MergeQueue, (q) => q.resume).pipe(Effect.provide(runtime))

    // Runs after the socket is closed (finalizers run in reverse): let turns finish, suspend.
    // Once: in cluster mode it runs earlier, before the runner leaves the cluster (below).
    const drainOnce = yield* Effect.once(Effect.provide(drain, runtime))
    yield* Effect.addFinalizer(() => drainOnce)

    const guard = SocketGuard.optionsFromGroup(AdminRpcs, {
      maxLineBytes: settings.maxLineBytes,
      // Live streams end with the client, not with its answers (see SocketGuard's half-close).
      openEnded: (method, params) =>
        method === "agent.attach" ||
        (method === "events.follow" && typeof params === "object" && params !== null && "follow" in params && params.follow === true) ||
        (method === "agent.logs" && typeof params === "object" && params !== null && "follow" in params && params.follow === true)
    })
    // Only the handlers get the daemon's services: the server's own context (which RpcServer
    // merges into every request's runtime) holds the handlers and the protocol. It is built from
    // the Scope alone, so the CLI's services around `daemon run` (file system, path, terminal)
    // are not copied into every request's context either.
    // The cluster runner (Cluster.ts) starts once the local trees are recovered.
    // Cluster mode: the runner, the Tree entity (its handlers run this runner's trees) and the
    // router the admin handlers reach other runners' trees with.
    const runner = cluster === undefined ? Context.empty() : yield* Layer.build(
      TreeEntityLive.pipe(
        Layer.provide(ResolverService.layer),
        Layer.provideMerge(ClusterTrees.layerTakeover),
        Layer.provide(Recovery.Default),
        Layer.provide(ClusterPresence.layer(cluster.listen)),
        Layer.provideMerge(ClusterTrees.layerRouter(cluster.listen)),
        Layer.provideMerge(Cluster.layer(cluster.runner)),
        Layer.provide(Layer.succeedContext(Context.merge(runtime, cluster.sql)))
      )
    ).pipe(
      Effect.mapError((e) => new DaemonError({ reason: "cluster", message: `cannot start the cluster runner on ${cluster.listen}: ${String(e)}` })),
      Effect.tap(() => Effect.logInfo(`cluster runner on ${cluster.listen}`))
    )
    // A runner that stops hands its trees over: its turns finish (up to the grace period) and its
    // sessions are suspended before the engine releases its shards and unregisters it; only then
    // do the runners that get its shards recover those trees (ClusterTrees.layerTakeover), so no
    // tree runs on two runners at once.
    if (cluster !== undefined) yield* Effect.addFinalizer(() => drainOnce)
    const handlers = yield* Layer.build(HandlersLive).pipe(Effect.provide(Context.merge(runtime, runner)))
    const ServerLive = RpcServer.layer(AdminRpcs, { disableFatalDefects: true, concurrency: "unbounded", disableTracing: true }).pipe(
      Layer.provide(Layer.succeedContext(handlers)),
      Layer.provide(SocketGuard.layerProtocol(guard, control.connections)),
      Layer.provide(NodeSocketServer.layer({ path: stagingSocket(paths), allowHalfOpen: true })),
      Layer.provide(RpcSerialization.layerNdJsonRpc())
    )
    yield* Layer.build(ServerLive).pipe(
      Effect.mapInputContext((context: Context.Context<Scope.Scope>) => Context.pick(Scope.Scope)(context)),
      Effect.mapError((e) => new DaemonError({ reason: "socket", message: `cannot listen on ${paths.socket}: ${String(e.cause)}` }))
    )
    // http.sock (+ TCP): src/http/Server.ts, calling the same handlers in process.
    const admin = yield* inProcessClient.pipe(Effect.provide(handlers))
    yield* Http.serve(paths, settings.http, admin).pipe(
      Effect.provide(runtime),
      Effect.catchTag("HttpStartError", (e) => new DaemonError({ reason: e.reason === "files" ? "home" : "socket", message: e.message }))
    )
    yield* publishSocket(paths)
    yield* Effect.logInfo(`substrat daemon ${process.pid} listening on ${paths.socket}`)
    yield* Deferred.await(control.stop)
    yield* Effect.logInfo("stopping")
  }))

/** Cluster mode's Postgres client and runner settings, checked before anything starts; undefined for a single daemon. */
const clusterStart = (settings: DaemonSettings) =>
  Effect.gen(function*() {
    const { postgres, listen, leaseMs } = settings.cluster
    if (Option.isNone(postgres)) {
      if (Option.isSome(listen)) return yield* new DaemonError({ reason: "cluster", message: "--listen (cluster.listen) needs --cluster <postgres url> (cluster.postgres)" })
      return undefined
    }
    const address = Option.isSome(listen) ? parseAddress(listen.value) : undefined
    if (address === undefined) {
      return yield* new DaemonError({ reason: "cluster", message: "--cluster needs --listen <host:port> (cluster.listen): the address the other runners reach this one at" })
    }
    // Refused before anything starts: the engine would fail to listen only once the daemon serves.
    const busy = yield* listenRefusal(address.host, address.port)
    if (busy !== undefined) {
      return yield* new DaemonError({ reason: "cluster", message: `cannot listen on ${address.host}:${address.port} (--listen): ${busy}` })
    }
    const sql = yield* Layer.build(Postgres.layer({ url: postgres.value })).pipe(
      Effect.mapError((e) => new DaemonError({ reason: "cluster", message: e.message }))
    )
    // Another live runner at this address, or live runners of another version: refused (ClusterJoin.ts).
    const listenText = `${address.host}:${address.port}`
    yield* admit({ address: listenText, leaseMs, home: settings.home, version }).pipe(
      Effect.provide(sql),
      Effect.mapError((message) => new DaemonError({ reason: "cluster", message }))
    )
    return { sql, listen: `${address.host}:${address.port}`, runner: { host: address.host, port: address.port, leaseMs } }
  })

/**
 * Why `host:port` cannot be listened on (in use, not an address of this machine, not allowed),
 * or undefined: a probe that binds it and closes it again at once.
 */
const listenRefusal = (host: string, port: number) =>
  Effect.async<string | undefined>((resume) => {
    const probe = net.createServer()
    probe.once("error", (e: NodeJS.ErrnoException) =>
      resume(Effect.succeed(e.code === "EADDRINUSE" ? "the address is in use (another runner or program listens there)" : e.message)))
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resume(Effect.succeed(undefined))))
  })

/** Shutdown drain: wait for running turns up to the grace period, then suspend live sessions. */
const drain = Effect.gen(function*() {
  const config = yield* DaemonConfig
  const { awaitIdle, suspendAll } = yield* Drain
  const idle = yield* awaitIdle.pipe(Effect.interruptible, Effect.timeout(config.graceMs), Effect.option)
  if (idle._tag === "None") yield* Effect.logWarning(`grace period of ${config.graceMs} ms over; suspending anyway`)
  const n = yield* suspendAll
  yield* Effect.logInfo(`suspended ${n} session(s)`)
}).pipe(Effect.catchAllCause((cause) => Effect.logError("drain failed", cause)))
