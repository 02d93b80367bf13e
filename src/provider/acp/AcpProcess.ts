// One ACP agent process, sandboxed, spoken to over its stdio with @agentclientprotocol/sdk's
// client app. The process lives in the given scope (the provider instance's: kept across turns
// while the agent holds its slot, killed on eviction or stop). Bridges: the process' stdout (an
// Effect Stream) becomes the SDK's ReadableStream, the SDK's WritableStream feeds a queue that is
// the process' stdin. The client's side of the protocol (updates, permissions, fs, terminals) is
// handed in as `handlers`; whatever they throw goes back to the agent as a JSON-RPC error.
// A line that is not JSON is answered with a JSON-RPC parse error and the connection goes on; a
// line past MAX_MESSAGE_BYTES ends the connection (and the turn). When the process exits (crash,
// kill) `died` is set with its exit status and the tail of its stderr, and the connection is closed:
// requests in flight reject, and the provider reports the turn as failed with that reason. An
// agent that does not answer `initialize` within INITIALIZE_TIMEOUT (a live process stuck at
// start: codex-acp whose codex app-server exited) fails the start with its stderr tail; the
// process is killed with the scope.
// The SDK (and zod under it) is loaded with the first ACP process: a daemon with no `acp:` agent never loads it.
import type * as Acp from "@agentclientprotocol/sdk"
import { Deferred, Duration, Effect, Fiber, Option, Queue, Runtime, type Scope, Stream } from "effect"
import { ProviderError } from "../../domain/errors.js"
import type { SandboxRequest, SandboxService } from "../../sandbox/Sandbox.js"

const STDERR_KEEP = 4000
/** How long an agent may take to answer `initialize` (its process start included). */
export const INITIALIZE_TIMEOUT: Duration.DurationInput = "120 seconds"
/** The longest line (one JSON-RPC message) read from an agent; a longer one ends the connection. */
export const MAX_MESSAGE_BYTES = 4 * 1024 * 1024

export interface ClientHandlers {
  readonly update: (n: Acp.SessionNotification) => void
  readonly permission: (r: Acp.RequestPermissionRequest, signal: AbortSignal) => Promise<Acp.RequestPermissionResponse>
  readonly readTextFile: (r: Acp.ReadTextFileRequest) => Promise<Acp.ReadTextFileResponse>
  readonly writeTextFile: (r: Acp.WriteTextFileRequest) => Promise<Acp.WriteTextFileResponse>
  readonly createTerminal: (r: Acp.CreateTerminalRequest) => Promise<Acp.CreateTerminalResponse>
  readonly terminalOutput: (r: Acp.TerminalOutputRequest) => Promise<Acp.TerminalOutputResponse>
  readonly waitForTerminalExit: (r: Acp.WaitForTerminalExitRequest) => Promise<Acp.WaitForTerminalExitResponse>
  readonly killTerminal: (r: Acp.KillTerminalRequest) => Promise<Acp.KillTerminalResponse>
  readonly releaseTerminal: (r: Acp.ReleaseTerminalRequest) => Promise<Acp.ReleaseTerminalResponse>
}

export interface AcpProcess {
  readonly agent: Acp.ClientContext
  readonly initialized: Acp.InitializeResponse
  /** Why the process (or its connection) is gone (exit status, stderr tail), or null while it runs. */
  readonly died: () => string | null
  /** Completes when the process has exited (with `died`'s text). */
  readonly exited: Effect.Effect<string>
}

const tail = (s: string) => (s.length <= STDERR_KEEP ? s : `…${s.slice(s.length - STDERR_KEEP)}`)

type Sdk = typeof Acp

/** The client's reply to a thrown handler error: its message, as JSON-RPC's invalid-params. */
const asRequestError = (sdk: Sdk, e: unknown): Error =>
  e instanceof sdk.RequestError ? e : new sdk.RequestError(-32602, e instanceof Error ? e.message : String(e))

const guard = (sdk: Sdk) => <A, R>(f: (a: A) => Promise<R>) => async (c: { readonly params: A }): Promise<R> => {
  try {
    return await f(c.params)
  } catch (e) {
    throw asRequestError(sdk, e)
  }
}

export const start = (
  provider: string,
  sandbox: SandboxService,
  request: Omit<SandboxRequest, "stdin">,
  handlers: ClientHandlers,
  capabilities: { readonly fs: boolean; readonly terminal: boolean },
  options: { readonly initializeTimeout?: Duration.DurationInput } = {}
): Effect.Effect<AcpProcess, ProviderError, Scope.Scope> =>
  Effect.gen(function*() {
    const fail = (message: string) => new ProviderError({ provider, reason: "start", message })
    const sdk = yield* Effect.tryPromise({
      try: () => import("@agentclientprotocol/sdk"),
      catch: (e) => fail(`cannot load the ACP SDK: ${String(e)}`)
    })
    const guarded = guard(sdk)
    const stdin = yield* Queue.unbounded<Uint8Array>()
    yield* Effect.addFinalizer(() => Queue.shutdown(stdin))
    const proc = yield* sandbox.start({ ...request, stdin: Stream.fromQueue(stdin) }).pipe(
      Effect.mapError((e) => fail(`cannot start the sandbox: ${e._tag}: ${e.message}`))
    )
    const runtime = yield* Effect.interruptible(Effect.runtime<never>())
    let stderr = ""
    const stderrFiber = yield* proc.stderr.pipe(
      Stream.decodeText(),
      Stream.runForEach((s) => Effect.sync(() => (stderr = tail(stderr + s)))),
      Effect.ignore,
      Effect.forkScoped
    )
    let died: string | null = null
    const exited = yield* Deferred.make<string>()
    const input = Stream.toReadableStreamRuntime(proc.stdout.pipe(Stream.catchAll(() => Stream.empty)), runtime)
    const output = new WritableStream<Uint8Array>({
      write: (chunk) => {
        Runtime.runSync(runtime)(Queue.offer(stdin, chunk))
      }
    })
    const app = sdk.client({ name: "substrat" })
      .onNotification(sdk.methods.client.session.update, (c) => handlers.update(c.params))
      .onRequest(sdk.methods.client.session.requestPermission, async (c) => {
        try {
          return await handlers.permission(c.params, c.signal)
        } catch (e) {
          throw asRequestError(sdk, e)
        }
      })
      .onRequest(sdk.methods.client.fs.readTextFile, guarded(handlers.readTextFile))
      .onRequest(sdk.methods.client.fs.writeTextFile, guarded(handlers.writeTextFile))
      .onRequest(sdk.methods.client.terminal.create, guarded(handlers.createTerminal))
      .onRequest(sdk.methods.client.terminal.output, guarded(handlers.terminalOutput))
      .onRequest(sdk.methods.client.terminal.waitForExit, guarded(handlers.waitForTerminalExit))
      .onRequest(sdk.methods.client.terminal.kill, guarded(handlers.killTerminal))
      .onRequest(sdk.methods.client.terminal.release, guarded(handlers.releaseTerminal))
    const conn = app.connect(sdk.ndJsonStream(output, input, { maxMessageBytes: MAX_MESSAGE_BYTES }))
    yield* Effect.addFinalizer(() => Effect.sync(() => conn.close()))
    // A connection the SDK closed (a line past the limit, a broken pipe) ends the process too:
    // the provider starts a new one at the next turn.
    let closed: string | null = null
    conn.signal.addEventListener("abort", () => {
      if (died !== null) return
      const r: unknown = conn.signal.reason
      closed = `the ACP connection closed${r instanceof Error ? `: ${r.message}` : ""}`
      // Give a process that is ending by itself (EOF closed the connection) a moment to report its exit.
      Runtime.runFork(runtime)(Effect.sleep("1 second").pipe(Effect.zipRight(proc.kill("SIGKILL"))))
    })
    // The process' end closes the connection: requests in flight reject at once.
    yield* Fiber.join(stderrFiber).pipe(
      Effect.zipRight(Effect.either(proc.exit)),
      Effect.flatMap((x) =>
        Effect.sync(() => {
          const how = x._tag === "Left"
            ? `${x.left._tag}: ${x.left.message}`
            : x.right.signal !== null
            ? `killed by signal ${x.right.signal}`
            : `exited with code ${x.right.code}`
          died = `the ACP agent process ${how}${stderr.trim() === "" ? "" : `; stderr: ${stderr.trim()}`}`
          conn.close(new Error(died))
          // Killed after the connection closed: the closing is the cause.
          const killed = x._tag === "Left" || x.right.signal === "SIGKILL"
          return killed && closed !== null ? closed : died
        })
      ),
      Effect.flatMap((d) => Deferred.succeed(exited, d)),
      Effect.forkScoped
    )
    const initialized = yield* Effect.tryPromise({
      try: () =>
        conn.agent.request(sdk.methods.agent.initialize, {
          protocolVersion: sdk.PROTOCOL_VERSION,
          clientCapabilities: { fs: { readTextFile: capabilities.fs, writeTextFile: capabilities.fs }, terminal: capabilities.terminal },
          clientInfo: { name: "substrat", version: "1" }
        }),
      catch: (e) => e
    }).pipe(
      Effect.timeoutFail({
        duration: options.initializeTimeout ?? INITIALIZE_TIMEOUT,
        onTimeout: () =>
          new Error(`no answer within ${Duration.format(Duration.decode(options.initializeTimeout ?? INITIALIZE_TIMEOUT))} (the process is running)${
            stderr.trim() === "" ? "" : `; stderr: ${stderr.trim()}`
          }`)
      }),
      Effect.catchAll((e) =>
        Effect.flatMap(Deferred.await(exited).pipe(Effect.timeoutOption("2 seconds")), (d) =>
          Effect.fail(fail(`ACP initialize failed: ${Option.getOrElse(d, () => (e instanceof Error ? e.message : String(e)))}`)))
      )
    )
    return { agent: conn.agent, initialized, died: () => died ?? closed, exited: Deferred.await(exited) }
  })

/** A failed request's message, completed with the process' end when that is what caused it. */
export const failure = (proc: AcpProcess, e: unknown): Effect.Effect<string> =>
  Effect.map(proc.exited.pipe(Effect.timeoutOption("2 seconds")), (d) =>
    Option.getOrElse(d, () => (e instanceof Error ? e.message : typeof e === "object" && e !== null && "message" in e ? String(e.message) : String(e))))
