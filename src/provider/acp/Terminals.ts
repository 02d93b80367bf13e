// `terminal/*` for an ACP agent: each terminal is one more process in a sandbox of its own over
// the agent's workspace (the same rules as the agent's: network off, nothing of the host but what
// every sandbox gets), never on the host. Output is kept up to the agent's `outputByteLimit`
// (default and ceiling MAX_OUTPUT_BYTES), cut at the front. At most MAX_TERMINALS live at once per
// agent; all are killed when the provider stops.
import { Deferred, Effect, Exit, Fiber, Option, Scope, Stream } from "effect"
import type { SandboxRequest, SandboxService } from "../../sandbox/Sandbox.js"

export const MAX_OUTPUT_BYTES = 1024 * 1024
export const MAX_TERMINALS = 16

interface Term {
  output: string
  truncated: boolean
  readonly limit: number
  readonly scope: Scope.CloseableScope
  readonly exit: Deferred.Deferred<{ readonly exitCode: number | null; readonly signal: string | null }>
  kill: Effect.Effect<void>
}

export interface CreateTerminal {
  readonly command: string
  readonly args?: ReadonlyArray<string> | undefined
  readonly env?: ReadonlyArray<{ readonly name: string; readonly value: string }> | undefined
  readonly cwd?: string | null | undefined
  readonly outputByteLimit?: number | null | undefined
}

export class TerminalError extends Error {}

export const make = (
  sandbox: SandboxService,
  workspace: SandboxRequest["workspace"],
  base: Pick<SandboxRequest, "env" | "extraBinds">,
  /** Applied to each terminal's request before it starts (the agent's egress proxy, when served). */
  wrap: (r: Omit<SandboxRequest, "workspace">) => Omit<SandboxRequest, "workspace"> = (r) => r
) => {
  const terms = new Map<string, Term>()
  let next = 0

  const get = (id: string) =>
    Effect.suspend(() => {
      const t = terms.get(id)
      return t === undefined ? Effect.fail(new TerminalError(`no terminal ${id}`)) : Effect.succeed(t)
    })

  const append = (t: Term, text: string) => {
    t.output += text
    const bytes = Buffer.byteLength(t.output)
    if (bytes > t.limit) {
      const buf = Buffer.from(t.output).subarray(bytes - t.limit)
      // Cut at a character boundary.
      let i = 0
      while (i < buf.length && (buf[i]! & 0xc0) === 0x80) i++
      t.output = buf.subarray(i).toString("utf8")
      t.truncated = true
    }
  }

  const create = (req: CreateTerminal) =>
    Effect.gen(function*() {
      if (terms.size >= MAX_TERMINALS) return yield* Effect.fail(new TerminalError(`at most ${MAX_TERMINALS} terminals at once; release one first`))
      const cwd = req.cwd ?? "/workspace"
      if (!cwd.startsWith("/workspace") || cwd.split("/").includes("..")) {
        return yield* Effect.fail(new TerminalError(`refused: cwd ${JSON.stringify(cwd)} is outside the workspace`))
      }
      const scope = yield* Scope.make()
      const env: Record<string, string> = { ...base.env }
      for (const v of req.env ?? []) env[v.name] = v.value
      const proc = yield* sandbox.start({
        workspace,
        ...wrap({
          command: [req.command, ...(req.args ?? [])],
          cwd,
          env,
          ...(base.extraBinds === undefined ? {} : { extraBinds: base.extraBinds })
        })
      }).pipe(
        Scope.extend(scope),
        Effect.tapError(() => Scope.close(scope, Exit.void)),
        Effect.mapError((e) => new TerminalError(`cannot start ${req.command}: ${e.message}`))
      )
      const id = `term-${++next}`
      const t: Term = {
        output: "",
        truncated: false,
        limit: Math.min(MAX_OUTPUT_BYTES, Math.max(0, req.outputByteLimit ?? MAX_OUTPUT_BYTES)),
        scope,
        exit: yield* Deferred.make<{ readonly exitCode: number | null; readonly signal: string | null }>(),
        kill: proc.kill("SIGKILL")
      }
      const drain = (s: typeof proc.stdout) => s.pipe(Stream.decodeText(), Stream.runForEach((x) => Effect.sync(() => append(t, x))), Effect.ignore)
      const readers = yield* Effect.all([drain(proc.stdout), drain(proc.stderr)], { concurrency: 2 }).pipe(Effect.forkIn(scope))
      yield* Fiber.join(readers).pipe(
        Effect.zipRight(proc.exit),
        Effect.map((x) => ({ exitCode: x.code, signal: x.signal })),
        Effect.orElseSucceed(() => ({ exitCode: null, signal: "SIGKILL" })),
        Effect.flatMap((x) => Deferred.succeed(t.exit, x)),
        Effect.forkIn(scope)
      )
      terms.set(id, t)
      return id
    })

  const output = (id: string) =>
    Effect.flatMap(get(id), (t) =>
      Effect.map(Effect.flatMap(Deferred.poll(t.exit), Effect.transposeOption), (done) => ({
        output: t.output,
        truncated: t.truncated,
        ...(Option.isSome(done) ? { exitStatus: done.value } : {})
      })))

  const waitForExit = (id: string) => Effect.flatMap(get(id), (t) => Deferred.await(t.exit))

  const kill = (id: string) => Effect.flatMap(get(id), (t) => t.kill)

  const release = (id: string) =>
    Effect.flatMap(get(id), (t) =>
      Effect.sync(() => terms.delete(id)).pipe(
        Effect.zipRight(t.kill),
        Effect.zipRight(Scope.close(t.scope, Exit.void))
      ))

  const releaseAll = Effect.suspend(() => Effect.forEach([...terms.keys()], (id) => Effect.ignore(release(id)), { discard: true }))

  return { create, output, waitForExit, kill, release, releaseAll }
}

export type Terminals = ReturnType<typeof make>
