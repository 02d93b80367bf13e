// Where child processes are started: a small long-lived spawner process, not the daemon.
//
// libuv starts a child with fork(), which copies the calling process's page tables while its main
// thread waits; in a daemon holding hundreds of MB that wait grows with the heap. So the daemon
// forks once (the spawner, a bare `node -e` with only `node:child_process` loaded) and asks it to
// start every other child: git, bwrap, prlimit, the provider CLIs (docs/sandbox.md "Spawner").
//
// - Channel: Node's IPC channel, an anonymous socketpair inherited by the spawner alone (no path,
//   no abstract name, close-on-exec in every other child), so only the daemon can ask for a spawn.
// - stdio: the spawner starts the child with socketpair stdio as `child_process.spawn` always did,
//   stops reading its ends at once, and hands each end to the daemon over the channel (SCM_RIGHTS)
//   before dropping its own copy. The daemon reads and writes the same sockets it had before.
// - pid, exit code and signal come back as messages; kills stay the daemon's own `kill(-pgid)`
//   (the child is still started `detached`, its own process group).
// - The spawner is its own session (terminal signals aimed at the daemon's group do not reach it)
//   and exits when the channel closes: a daemon killed with -9 takes it down, and with it every
//   bwrap (`--die-with-parent`). If the spawner dies, its running children are killed and reported
//   as SIGKILLed; the next spawn starts a new spawner.
// - While spawns are outstanding the channel holds the event loop open; otherwise it does not, so a
//   one-shot command that spawned something still exits.
//
// `launchDirect` is the old in-process path (kept for the benchmark's before/after).
// Over 300 lines because both ends of the channel (the spawner's script and the daemon's client)
// and the fallback path are one protocol: a message added on one side is read on the other here.
import { type ChildProcess, spawn } from "node:child_process"
import type { Socket } from "node:net"
import type { Readable, Writable } from "node:stream"
import type { ExitStatus } from "./Limits.js"

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

/** Outcome of a launch: the child, or why it could not start (ENOENT, EACCES, bad cwd, …). */
export type Started = { readonly _tag: "started"; readonly child: Child } | { readonly _tag: "failed"; readonly message: string }

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
    done({ _tag: "failed", message: errorText(e) })
    return () => {}
  }
  let settled = false
  child.on("error", (e) => {
    // Before `spawn`: the exec failed. After: a failed kill(); ignored.
    if (settled) return
    settled = true
    done({ _tag: "failed", message: e.message })
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

/**
 * The spawner's whole program (plain CommonJS, run with `node -e`). Messages in: {t:"spawn"}.
 * Out: {t:"pid"}, then one {t:"fd", n} per pipe carrying its socket, then {t:"exit"}; or {t:"fail"}.
 */
export const spawnerSource = String.raw`"use strict"
const { spawn } = require("node:child_process")
const send = (m, h) => { if (process.connected) process.send(m, h, { keepOpen: false }, () => {}) }
process.on("message", (m) => {
  if (m === null || typeof m !== "object" || m.t !== "spawn") return
  const id = m.id
  let c
  try {
    c = spawn(m.program, m.args, { stdio: [m.stdin ? "pipe" : "ignore", "pipe", "pipe"], env: m.env, cwd: m.cwd === null ? undefined : m.cwd, detached: true })
  } catch (e) {
    send({ t: "fail", id, message: String(e && e.message || e) })
    return
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
    for (const p of pipes) if (p) p.destroy()
    send({ t: "fail", id, message: e.message })
  })
  c.once("spawn", () => {
    if (failed) return
    started = true
    send({ t: "pid", id, pid: c.pid })
    pipes.forEach((p, n) => { if (p) send({ t: "fd", id, n }, p) })
  })
  c.once("exit", (code, signal) => { if (started) send({ t: "exit", id, code, signal }) })
})
process.on("disconnect", () => process.exit(0))
`

interface Pending {
  readonly opts: LaunchOptions
  readonly done: (r: Started) => void
  pid?: number
  pipes: Array<Socket | undefined>
  settled: boolean
  cancelled: boolean
  status?: ExitStatus
}

/** One running spawner process and the spawns it has in flight. */
class SpawnerProcess {
  private readonly proc: ChildProcess
  private readonly pending = new Map<number, Pending>()
  private next = 1
  private alive = true

  constructor(private readonly onGone: () => void) {
    this.proc = spawn(process.execPath, ["--max-old-space-size=64", "-e", spawnerSource], {
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      env: {},
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
      done({ _tag: "failed", message: "the spawner process has exited" })
      return () => {}
    }
    const id = this.next++
    const p: Pending = { opts, done, pipes: [], settled: false, cancelled: false }
    if (this.pending.size === 0) {
      this.proc.ref()
      this.proc.channel?.ref()
    }
    this.pending.set(id, p)
    this.proc.send({
      t: "spawn",
      id,
      program: opts.program,
      args: opts.args,
      env: opts.env,
      cwd: opts.cwd ?? null,
      stdin: opts.stdin
    })
    return () => {
      if (p.settled && !p.cancelled) {
        if (p.pid !== undefined) killGroup(p.pid, "SIGKILL")
        return
      }
      p.cancelled = true
      p.settled = true
      if (p.pid !== undefined) killGroup(p.pid, "SIGKILL")
      for (const s of p.pipes) s?.destroy()
    }
  }

  private finish(id: number) {
    this.pending.delete(id)
    if (this.pending.size === 0) this.idle()
  }

  private receive(m: unknown, handle: unknown) {
    if (m === null || typeof m !== "object") return
    const msg = m as { t?: unknown; id?: unknown; pid?: unknown; n?: unknown; code?: unknown; signal?: unknown; message?: unknown }
    const p = typeof msg.id === "number" ? this.pending.get(msg.id) : undefined
    const socket = handle as Socket | undefined
    if (p === undefined) {
      socket?.destroy()
      return
    }
    const id = msg.id as number
    switch (msg.t) {
      case "fail":
        this.finish(id)
        if (!p.settled) {
          p.settled = true
          p.done({ _tag: "failed", message: String(msg.message) })
        }
        return
      case "pid":
        p.pid = msg.pid as number
        if (p.cancelled) killGroup(p.pid, "SIGKILL")
        return
      case "fd": {
        if (socket === undefined) return
        if (p.cancelled) {
          socket.destroy()
          return
        }
        // Until a consumer reads (spawn.ts attaches it at once), bytes wait in the socket.
        p.pipes[msg.n as number] = socket
        this.maybeStarted(p)
        return
      }
      case "exit":
        p.status = { code: msg.code as number | null, signal: msg.signal as string | null }
        this.finish(id)
        p.opts.onExit(p.status)
        return
    }
  }

  private maybeStarted(p: Pending) {
    if (p.settled || p.pid === undefined) return
    const [stdin, stdout, stderr] = p.pipes
    if (stdout === undefined || stderr === undefined || (p.opts.stdin && stdin === undefined)) return
    p.settled = true
    const pid = p.pid
    p.done({
      _tag: "started",
      child: { pid, stdin: stdin ?? null, stdout, stderr, status: () => p.status }
    })
  }

  private gone() {
    if (!this.alive) return
    this.alive = false
    this.onGone()
    const lost = [...this.pending.values()]
    this.pending.clear()
    for (const p of lost) {
      if (p.pid !== undefined) killGroup(p.pid, "SIGKILL")
      if (!p.settled) {
        p.settled = true
        for (const s of p.pipes) s?.destroy()
        p.done({ _tag: "failed", message: "the spawner process exited" })
      } else if (p.status === undefined) {
        p.status = { code: null, signal: "SIGKILL" }
        p.opts.onExit(p.status)
      }
    }
    if (this.proc.connected) this.proc.disconnect()
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
