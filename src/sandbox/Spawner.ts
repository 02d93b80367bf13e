// Where child processes are started: a small long-lived spawner process, not the daemon.
//
// libuv starts a child with fork(), which copies the calling process's page tables while its main
// thread waits; in a daemon holding hundreds of MB that wait grows with the heap. So the daemon
// forks once (the spawner, a bare `node -e` with only `node:child_process` and `node:fs` loaded)
// and asks it to start every other child: git, bwrap, prlimit, the provider CLIs
// (docs/sandbox.md "Spawner").
//
// - Channel: Node's IPC channel, an anonymous socketpair inherited by the spawner alone (no path,
//   no abstract name, close-on-exec in every other child), so only the daemon can ask for a spawn.
// - stdio: the spawner starts the child with socketpair stdio as `child_process.spawn` always did,
//   stops reading its ends at once, and hands each end to the daemon over the channel (SCM_RIGHTS)
//   before dropping its own copy. The daemon reads and writes the same sockets it had before.
// - pid (with the child's start time, read by the spawner from /proc right after the fork), exit
//   code and signal come back as messages; kills stay the daemon's own `kill(-pgid)` (the child is
//   still started `detached`, its own process group).
// - The spawner is its own session (terminal signals aimed at the daemon's group do not reach it)
//   and exits when the channel closes: a daemon killed with -9 takes it down, and with it every
//   bwrap (`--die-with-parent`). If the spawner dies, its running children are killed — each only
//   while its pid still names the process the spawner forked (same start time; ProcScan.ts) — and
//   reported as SIGKILLed; the next spawn starts a new spawner.
// - While spawns are outstanding the channel holds the event loop open; otherwise it does not, so a
//   one-shot command that spawned something still exits.
//
// `launchDirect` is the old in-process path (kept for the benchmark's before/after).
// Over 300 lines because both ends of the channel (the spawner's script and the daemon's client)
// and the fallback path are one protocol: a message added on one side is read on the other here.
import { Either, ParseResult, Schema } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { Socket } from "node:net"
import type { Readable, Writable } from "node:stream"
import type { ExitStatus } from "./Limits.js"
import { killFound, withEnvironment } from "./ProcScan.js"

/** A started child, whichever process forked it. */
export interface Child {
  readonly pid: number
  /** null unless a stdin pipe was asked for. */
  readonly stdin: Writable | null
  readonly stdout: Readable
  readonly stderr: Readable
  /** The exit status once the child has exited, else undefined. */
  readonly status: () => ExitStatus | undefined
}

export interface LaunchOptions {
  readonly program: string
  readonly args: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly cwd?: string
  /** Give the child a stdin pipe (else /dev/null). */
  readonly stdin: boolean
  /** Called once when the child has exited (only for a child that started). */
  readonly onExit: (status: ExitStatus) => void
}

/**
 * Outcome of a launch: the child, or why it could not start: `spawn` (ENOENT, EACCES, a bad cwd,
 * the spawner gone) or `protocol` (a message on the spawner's channel that breaks its protocol).
 */
export type Started =
  | { readonly _tag: "started"; readonly child: Child }
  | { readonly _tag: "failed"; readonly reason: "spawn" | "protocol"; readonly message: string }

/** Start a child; `done` is called once. The returned function cancels: a child still starting is killed. */
export type Launch = (opts: LaunchOptions, done: (r: Started) => void) => () => void

/** Signal a process group; false when there is no such group (any more). */
export const killPgrp = (pid: number, signal: NodeJS.Signals): boolean => {
  try {
    process.kill(-pid, signal)
    return true
  } catch {
    return false
  }
}

/** Signal the group led by `pid`, or `pid` alone when it has no group of its own. */
export const killGroup = (pid: number, signal: NodeJS.Signals): void => {
  if (killPgrp(pid, signal)) return
  try {
    process.kill(pid, signal)
  } catch {
    // already gone
  }
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e))

/** `child_process.spawn` in this process (fork() of the whole daemon). */
export const launchDirect: Launch = (opts, done) => {
  let child: ChildProcess
  try {
    child = spawn(opts.program, [...opts.args], {
      stdio: [opts.stdin ? "pipe" : "ignore", "pipe", "pipe"],
      env: opts.env,
      ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
      detached: true
    })
  } catch (e) {
    done({ _tag: "failed", reason: "spawn", message: errorText(e) })
    return () => {}
  }
  let settled = false
  child.on("error", (e) => {
    // Before `spawn`: the exec failed. After: a failed kill(); ignored.
    if (settled) return
    settled = true
    done({ _tag: "failed", reason: "spawn", message: e.message })
  })
  child.once("exit", (code, signal) => opts.onExit({ code, signal }))
  child.once("spawn", () => {
    if (settled) return
    settled = true
    const c = child
    done({
      _tag: "started",
      child: {
        pid: c.pid!,
        stdin: c.stdin,
        stdout: c.stdout!,
        stderr: c.stderr!,
        status: () => (c.exitCode === null && c.signalCode === null ? undefined : { code: c.exitCode, signal: c.signalCode })
      }
    })
  })
  return () => {
    settled = true
    if (child.pid !== undefined) killGroup(child.pid, "SIGKILL")
  }
}

/** How the spawner's children are marked: `SUBSTRAT_SPAWNER=<its token>` in their environment. */
export const MARK = "SUBSTRAT_SPAWNER"
/** Test hook (in the spawner's own environment only): pause this many ms between a fork and its pid report. */
export const PAUSE_HOOK = "SUBSTRAT_SPAWNER_TEST_PAUSE_MS"

const MessageId = Schema.Int.pipe(Schema.positive())

/** The one request the daemon sends: start a child. */
export const SpawnRequest = Schema.Struct({
  t: Schema.Literal("spawn"),
  id: MessageId,
  program: Schema.String,
  args: Schema.Array(Schema.String),
  env: Schema.Record({ key: Schema.String, value: Schema.String }),
  cwd: Schema.NullOr(Schema.String),
  stdin: Schema.Boolean
})

/**
 * What the spawner answers: the child's pid (first, before anything else) with its start time
 * (field 22 of /proc/<pid>/stat; null when the spawner could not read it), one `fd` per pipe
 * carrying its socket, its exit; or why it did not start (`fail`), or that the request was
 * malformed (`refused`, with the request's id when it had a usable one).
 */
export const SpawnerReply = Schema.Union(
  Schema.Struct({
    t: Schema.Literal("pid"),
    id: MessageId,
    pid: Schema.Int.pipe(Schema.positive()),
    start: Schema.NullOr(Schema.String.pipe(Schema.pattern(/^\d+$/)))
  }),
  Schema.Struct({ t: Schema.Literal("fd"), id: MessageId, n: Schema.Literal(0, 1, 2) }),
  Schema.Struct({ t: Schema.Literal("exit"), id: MessageId, code: Schema.NullOr(Schema.Int), signal: Schema.NullOr(Schema.String) }),
  Schema.Struct({ t: Schema.Literal("fail"), id: MessageId, message: Schema.String }),
  Schema.Struct({ t: Schema.Literal("refused"), id: Schema.NullOr(MessageId), message: Schema.String })
)
export type SpawnerReply = typeof SpawnerReply.Type

const encodeRequest = Schema.encodeUnknownEither(SpawnRequest)
const decodeReply = Schema.decodeUnknownEither(SpawnerReply)
const parseText = (e: ParseResult.ParseError) => ParseResult.TreeFormatter.formatErrorSync(e).replace(/\s+/g, " ")

/**
 * The spawner's whole program (plain CommonJS, run with `node -e`; it loads no library, so its
 * forks stay cheap, and checks each request against `SpawnRequest` by hand — the integration test
 * feeds it requests the Schema refuses). Every child gets the spawner's mark in its environment;
 * when the channel closes (the daemon exited or died) it kills every child group still running.
 */
export const spawnerSource = String.raw`"use strict"
const { spawn } = require("node:child_process")
const { readFileSync } = require("node:fs")
const MARK = ${JSON.stringify(MARK)}
const mark = process.env[MARK]
const pause = Number(process.env[${JSON.stringify(PAUSE_HOOK)}] || 0)
const send = (m, h) => { if (process.connected) process.send(m, h, { keepOpen: false }, () => {}) }
const running = new Map()
const isId = (x) => Number.isSafeInteger(x) && x > 0
const isStr = (x) => typeof x === "string"
// Field 22 of /proc/<pid>/stat, parsed as ProcScan.identity does (no module of ours loads here).
// Read while the child is at worst an unreaped zombie of this process (reaping waits for the
// event loop), so the pid is still the child's.
const startOf = (pid) => {
  try {
    const stat = readFileSync("/proc/" + pid + "/stat", "latin1")
    const start = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
    return /^\d+$/.test(start) ? start : null
  } catch { return null }
}
const problem = (m) => {
  if (m === null || typeof m !== "object" || Array.isArray(m)) return "not an object"
  if (m.t !== "spawn") return "t is not \"spawn\""
  if (!isId(m.id)) return "id is not a positive integer"
  if (!isStr(m.program)) return "program is not a string"
  if (!Array.isArray(m.args) || !m.args.every(isStr)) return "args is not an array of strings"
  if (m.env === null || typeof m.env !== "object" || Array.isArray(m.env) || !Object.values(m.env).every(isStr)) return "env is not a record of strings"
  if (m.cwd !== null && !isStr(m.cwd)) return "cwd is neither null nor a string"
  if (typeof m.stdin !== "boolean") return "stdin is not a boolean"
  if (running.has(m.id)) return "id is already running"
  return undefined
}
process.on("message", (m) => {
  const bad = problem(m)
  if (bad !== undefined) {
    send({ t: "refused", id: m !== null && typeof m === "object" && isId(m.id) && !running.has(m.id) ? m.id : null, message: bad })
    return
  }
  const id = m.id
  let c
  try {
    c = spawn(m.program, m.args, { stdio: [m.stdin ? "pipe" : "ignore", "pipe", "pipe"], env: { ...m.env, [MARK]: mark }, cwd: m.cwd === null ? undefined : m.cwd, detached: true })
  } catch (e) {
    send({ t: "fail", id, message: String(e && e.message || e) })
    return
  }
  // The pid goes first, before anything else: the daemon can kill a child it knows.
  if (c.pid !== undefined) {
    const start = startOf(c.pid)
    if (pause > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, pause)
    running.set(id, c.pid)
    send({ t: "pid", id, pid: c.pid, start })
  }
  // Nothing here reads the pipes: the daemon does, once it holds them.
  const pipes = [c.stdin, c.stdout, c.stderr]
  for (const p of pipes) if (p && p._handle && typeof p._handle.readStop === "function") p._handle.readStop()
  c.stdio[0] = c.stdio[1] = c.stdio[2] = null
  c.stdin = c.stdout = c.stderr = null
  let started = false
  let failed = false
  c.on("error", (e) => {
    if (started || failed) return
    failed = true
    running.delete(id)
    for (const p of pipes) if (p) p.destroy()
    send({ t: "fail", id, message: e.message })
  })
  c.once("spawn", () => {
    if (failed) return
    started = true
    pipes.forEach((p, n) => { if (p) send({ t: "fd", id, n }, p) })
  })
  c.once("exit", (code, signal) => {
    running.delete(id)
    if (started) send({ t: "exit", id, code, signal })
  })
})
process.on("disconnect", () => {
  for (const pid of running.values()) {
    try { process.kill(-pid, "SIGKILL") } catch { try { process.kill(pid, "SIGKILL") } catch {} }
  }
  process.exit(0)
})
`

type Phase = "starting" | "started" | "failed" | "cancelled"

interface Pending {
  readonly opts: LaunchOptions
  readonly done: (r: Started) => void
  pid?: number
  /** The child's start time as the spawner read it (null: it could not). */
  start?: string | null
  pipes: Array<Socket | undefined>
  phase: Phase
  status?: ExitStatus
}

export interface SpawnerOptions {
  /** The program the spawner runs (tests: a fake spawner). */
  readonly source?: string
  /** Added to the spawner's own environment (tests: `PAUSE_HOOK`). */
  readonly env?: Readonly<Record<string, string>>
}

/** One running spawner process and the spawns it has in flight. */
export class SpawnerProcess {
  private readonly proc: ChildProcess
  private readonly pending = new Map<number, Pending>()
  private readonly token = randomBytes(16).toString("hex")
  private next = 1
  private alive = true

  constructor(private readonly onGone: () => void, options: SpawnerOptions = {}) {
    this.proc = spawn(process.execPath, ["--max-old-space-size=64", "-e", options.source ?? spawnerSource], {
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      env: { ...options.env, [MARK]: this.token },
      detached: true,
      serialization: "json"
    })
    this.proc.on("message", (m: unknown, handle: unknown) => this.receive(m, handle))
    // The channel's end comes after every message the spawner sent before dying (its `exit` event
    // may come before them).
    this.proc.on("disconnect", () => this.gone())
    this.proc.on("error", () => this.gone())
    this.idle()
  }

  get pid(): number | undefined {
    return this.proc.pid
  }

  private idle() {
    this.proc.unref()
    this.proc.channel?.unref()
  }

  launch: Launch = (opts, done) => {
    if (!this.alive) {
      done({ _tag: "failed", reason: "spawn", message: "the spawner process has exited" })
      return () => {}
    }
    const id = this.next++
    const request = encodeRequest({
      t: "spawn",
      id,
      program: opts.program,
      args: opts.args,
      env: opts.env,
      cwd: opts.cwd ?? null,
      stdin: opts.stdin
    })
    if (Either.isLeft(request)) {
      done({ _tag: "failed", reason: "protocol", message: `malformed spawn request: ${parseText(request.left)}` })
      return () => {}
    }
    const p: Pending = { opts, done, pipes: [], phase: "starting" }
    if (this.pending.size === 0) {
      this.proc.ref()
      this.proc.channel?.ref()
    }
    this.pending.set(id, p)
    this.proc.send(request.right)
    return () => {
      if (p.phase === "starting") {
        p.phase = "cancelled"
        for (const s of p.pipes) s?.destroy()
      }
      if (p.pid !== undefined) killGroup(p.pid, "SIGKILL")
    }
  }

  private finish(id: number) {
    this.pending.delete(id)
    if (this.pending.size === 0) this.idle()
  }

  /**
   * A start that cannot complete: its group is killed, the caller gets a protocol error. After
   * the child's exit only its group's stragglers are (its pid alone may already be another's).
   */
  private failStart(p: Pending, message: string) {
    if (p.pid !== undefined) {
      if (p.status === undefined) killGroup(p.pid, "SIGKILL")
      else killPgrp(p.pid, "SIGKILL")
    }
    for (const s of p.pipes) s?.destroy()
    if (p.phase !== "starting") return
    p.phase = "failed"
    p.done({ _tag: "failed", reason: "protocol", message })
  }

  private receive(raw: unknown, handle: unknown) {
    const socket = handle instanceof Socket ? handle : undefined
    const decoded = decodeReply(raw)
    if (Either.isLeft(decoded)) {
      socket?.destroy()
      // Out of step with the daemon: nothing it says can be trusted any more.
      this.broken(`malformed message from the spawner: ${parseText(decoded.left)}`)
      return
    }
    const msg = decoded.right
    if (msg.t !== "fd") socket?.destroy()
    const id = msg.id
    const p = id === null ? undefined : this.pending.get(id)
    if (id === null || p === undefined) {
      socket?.destroy()
      // A refusal it cannot tie to one request leaves that request unanswered for ever.
      if (msg.t === "refused") this.broken(`the spawner refused a request: ${msg.message}`)
      return
    }
    switch (msg.t) {
      case "refused":
        this.finish(id)
        this.failStart(p, `the spawner refused the request: ${msg.message}`)
        return
      case "fail":
        this.finish(id)
        if (p.phase === "starting") {
          p.phase = "failed"
          p.done({ _tag: "failed", reason: "spawn", message: msg.message })
        }
        return
      case "pid":
        p.pid = msg.pid
        p.start = msg.start
        if (p.phase === "cancelled" || p.phase === "failed") killGroup(p.pid, "SIGKILL")
        return
      case "fd": {
        if (socket === undefined) return this.failStart(p, `pipe ${msg.n} of pid ${p.pid ?? "?"} arrived without its socket`)
        if (p.phase !== "starting" || p.pipes[msg.n] !== undefined) {
          socket.destroy()
          if (p.phase === "starting") this.failStart(p, `pipe ${msg.n} of pid ${p.pid ?? "?"} arrived twice`)
          return
        }
        // Until a consumer reads (spawn.ts attaches it at once), bytes wait in the socket.
        p.pipes[msg.n] = socket
        this.maybeStarted(p)
        return
      }
      case "exit":
        p.status = { code: msg.code, signal: msg.signal }
        this.finish(id)
        if (p.phase === "started") p.opts.onExit(p.status)
        else if (p.phase === "starting") this.failStart(p, `pid ${p.pid ?? "?"} exited (${msg.code ?? msg.signal}) before all its pipes arrived`)
        return
    }
  }

  private maybeStarted(p: Pending) {
    if (p.phase !== "starting" || p.pid === undefined) return
    const [stdin, stdout, stderr] = p.pipes
    if (stdout === undefined || stderr === undefined || (p.opts.stdin && stdin === undefined)) return
    p.phase = "started"
    const pid = p.pid
    p.done({
      _tag: "started",
      child: { pid, stdin: stdin ?? null, stdout, stderr, status: () => p.status }
    })
  }

  /** A spawner that broke the protocol is killed; its spawns end as if it had died. */
  private broken(message: string) {
    this.gone("protocol", message)
    try {
      process.kill(this.proc.pid!, "SIGKILL")
    } catch {
      // already gone
    }
  }

  private gone(reason: "spawn" | "protocol" = "spawn", message = "the spawner process exited") {
    if (!this.alive) return
    this.alive = false
    this.onGone()
    const lost = [...this.pending.values()]
    this.pending.clear()
    for (const p of lost) {
      // Its exit was never reported: it may have exited since and, with the spawner dead, been
      // reaped by init, its pid another process's. So it is killed only while its pid still
      // names the process the spawner forked (same start time, re-read right before the kill);
      // with no start time known it is left to the scan below.
      if (p.pid !== undefined && typeof p.start === "string") killFound({ pid: p.pid, start: p.start }, "SIGKILL")
      if (p.phase === "starting") {
        p.phase = "failed"
        for (const s of p.pipes) s?.destroy()
        p.done({ _tag: "failed", reason, message })
      } else if (p.phase === "started" && p.status === undefined) {
        p.status = { code: null, signal: "SIGKILL" }
        p.opts.onExit(p.status)
      }
    }
    // Children it forked but had not reported yet (it died between a fork and the pid message),
    // and any descendant they started: all carry its mark.
    this.reap()
    if (this.proc.connected) this.proc.disconnect()
  }

  /**
   * SIGKILL every process carrying this spawner's mark, until none is left (they may fork
   * meanwhile). Each is killed only if its pid still names the process the scan read
   * (ProcScan.ts: its start time is re-read right before the kill).
   */
  private reap() {
    for (let round = 0; round < 5; round++) {
      const found = withEnvironment(`${MARK}=${this.token}`).filter((p) => p.pid !== this.proc.pid)
      if (found.length === 0) return
      for (const p of found) killFound(p, "SIGKILL")
    }
  }

  stop() {
    this.gone()
  }
}

let current: SpawnerProcess | undefined

const spawner = (): SpawnerProcess => {
  if (current === undefined) {
    const made: SpawnerProcess = new SpawnerProcess(() => {
      if (current === made) current = undefined
    })
    current = made
  }
  return current
}

/** Start a child through the spawner (started on first use). */
export const launch: Launch = (opts, done) => spawner().launch(opts, done)

/** Start the spawner now (the daemon does at boot, while its heap is small); its pid. */
export const warm = (): number | undefined => spawner().pid

/** The running spawner's pid, if any (tests). */
export const spawnerPid = (): number | undefined => current?.pid

/** Close the channel: the spawner exits; running children are reported as killed. */
export const stop = (): void => {
  current?.stop()
}
