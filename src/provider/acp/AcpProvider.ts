// The `acp` provider: any Agent Client Protocol agent (`acp:qwen`, `acp:gemini`, `acp:opencode`,
// `acp:claude`, `acp:codex`, or `acp:<command …>`; Presets.ts), run in the agent's bwrap sandbox
// (network off) and spoken to over stdio (AcpProcess.ts). docs/providers.md "ACP agents".
//   - process: started at the first turn, kept across turns while the agent holds its slot,
//     killed on eviction/stop (the provider instance's scope); a dead process is restarted at the
//     next turn
//   - conversation: the agent's own session, in its private HOME (/home/agent, kept across
//     evictions and restarts); its id is kept in agents/<sid>/acp-session.json (tmp + fsync +
//     rename), and a new process continues it with `session/load` when the agent offers that;
//     otherwise a new session starts and its first prompt carries a recovery note
//   - instructions (tool guidance included) open the first prompt of a new session (ACP has no
//     system prompt)
//   - tools: Substrat's MCP server (the bundle, over stdio) passed in `session/new`
//   - model: Presets.ts `model`; through the agent's metering forwarder like claude and codex
//   - client side: updates → Updates.ts; permissions → the agent's `approve`, else `acp.approve` (Permissions.ts;
//     `ask`: the human inbox, Asks.ts);
//     fs → WorkspaceFs.ts (workspace only); terminals → Terminals.ts (sandboxed)
import type * as Acp from "@agentclientprotocol/sdk"
import { Effect, Either, ExecutionStrategy, Exit, Option, Runtime, Scope, Stream } from "effect"
import { parentEnv } from "../../config/Config.js"
import { ProviderError } from "../../domain/errors.js"
import { withToolGuidance } from "../../domain/guidance.js"
import { Sandbox } from "../../sandbox/Sandbox.js"
import { AgentSandboxes } from "../cli/AgentSandbox.js"
import { CliSettings, withEgress } from "../cli/CliSettings.js"
import type { ProviderContext, ProviderFactory, ProviderOutput, ProviderService } from "../Provider.js"
import * as AcpProcess from "./AcpProcess.js"
import { AcpAsks } from "./Asks.js"
import { launch, persistSession, readSession } from "./Launch.js"
import * as Permissions from "./Permissions.js"
import { presetFor, presetsOf } from "./Presets.js"
import * as Terminals from "./Terminals.js"
import { makeDecoder } from "./Updates.js"
import * as WorkspaceFs from "./WorkspaceFs.js"

const NAME = "acp"

export const recoveryNote =
  "Note: your agent process was restarted and your earlier conversation could not be loaded; check the workspace and your inbox for where things stand."

/**
 * `_meta` of session/new and session/load: codex-acp answers only once the session's MCP servers
 * have started (at most this long), so Substrat's tools are offered from the first request; without
 * it a loaded machine's first request can go out before they are listed. Other agents ignore it.
 */
const sessionMeta = { mcpStartupAwaitTimeoutMs: 60_000 }

const fail = (reason: ProviderError["reason"], message: string) => new ProviderError({ provider: NAME, reason, message })

const errorText = (e: unknown): string =>
  e instanceof Error ? e.message : typeof e === "object" && e !== null && "message" in e ? String(e.message) : String(e)

export const factory = Effect.gen(function*() {
  const sandbox = yield* Sandbox
  const sandboxes = yield* AgentSandboxes
  const settings = yield* CliSettings
  // The human inbox for `acp.approve = "ask"` (the daemon provides it; without it, ask rejects).
  const asks = yield* Effect.serviceOption(AcpAsks)

  const presetOf = (variant: string | null) =>
    Either.flatMap(presetsOf(settings.acp?.presets), (table) => presetFor(table, variant))

  const make = (ctx: ProviderContext) =>
    Effect.gen(function*() {
      const chosen = presetOf(ctx.variant)
      if (Either.isLeft(chosen)) return yield* fail("start", chosen.left)
      const { name: presetName, preset } = chosen.right
      const agent = yield* sandboxes.prepare(ctx, NAME)
      const api = preset.model === "none" ? null : preset.model
      const modelSocket = api === null
        ? null
        : yield* sandboxes.modelSocket(
          ctx,
          NAME,
          api,
          api === "openai" ? settings.openaiSocket : api === "gemini" ? settings.geminiSocket ?? null : settings.anthropicSocket
        )
      const owner = sandbox.owner ?? undefined
      const instanceScope = yield* Effect.scope
      // Interruptible: `make` runs as an acquire (uninterruptible), and effects run through this
      // runtime must not inherit that (a terminal's scope interrupts its fibers when released).
      const runtime = yield* Effect.interruptible(Effect.runtime<never>())
      const run = <A, E>(eff: Effect.Effect<A, E>): Promise<A> => Runtime.runPromise(runtime)(eff)
      /** The live process's egress socket (served while it lives; null: no egress policy). */
      let egressNow: string | null = null
      /** Turns sent so far: the egress proxy's per-turn byte count starts again with each. */
      let turns = 0
      const terminals = Terminals.make(sandbox, agent.workspace, { env: { HOME: "/home/agent" } }, (r) =>
        egressNow === null ? r : withEgress(r, settings, egressNow))
      yield* Effect.addFinalizer(() => terminals.releaseAll)

      let sink: ((u: Acp.SessionUpdate) => void) | null = null
      /** The turn's decoder learns a permission request's tool call (its input: Updates.ts). */
      let asked: ((t: Acp.ToolCallUpdate) => void) | null = null
      let live: { readonly proc: AcpProcess.AcpProcess; readonly sessionId: string; intro: string | null; readonly scope: Scope.CloseableScope } | null = null
      let instructions = withToolGuidance("")
      let stopped = false
      /** The previous turn's prompt, still settling after a cancel. */
      let inFlight: Promise<unknown> | null = null
      const policy = Permissions.make({
        approve: ctx.approve ?? settings.acp?.approve ?? "auto",
        emit: (o) => emitOut?.(o),
        asker: Option.match(asks, {
          onNone: () => null,
          onSome: (a) => ({ ask: a.ask, session_id: ctx.session_id, agent_id: agent.agentId ?? ctx.session_id, agent_name: ctx.agent_name, timeoutSeconds: settings.acp?.askTimeoutSeconds ?? 0 })
        })
      })
      let emitOut: ((o: ProviderOutput) => void) | null = null
      /** The turn's prompt settled: questions logged before a restart answer nothing more (Asks.ts). */
      const turnEnded = () => Option.map(asks, (a) => a.turnEnded(ctx.session_id))

      const handlers: AcpProcess.ClientHandlers = {
        update: (n) => sink?.(n.update),
        permission: (r, signal) => {
          asked?.(r.toolCall)
          return policy.decide(r, signal)
        },
        readTextFile: (r) => run(WorkspaceFs.readText(agent.workspace.root_path, r.path, r.line, r.limit)).then((content) => ({ content })),
        writeTextFile: (r) => run(WorkspaceFs.writeText(agent.workspace.root_path, r.path, r.content, owner)).then(() => ({})),
        createTerminal: (r) => run(terminals.create(r)).then((terminalId) => ({ terminalId })),
        terminalOutput: (r) => run(terminals.output(r.terminalId)),
        waitForTerminalExit: (r) => run(terminals.waitForExit(r.terminalId)),
        killTerminal: (r) => run(terminals.kill(r.terminalId)).then(() => ({})),
        releaseTerminal: (r) => run(terminals.release(r.terminalId)).then(() => ({}))
      }

      /** A running process with a session: the live one, or a new one (continuing the kept session when it can). */
      const ensureLive = Effect.gen(function*() {
        if (live !== null && live.proc.died() === null) return live
        if (live !== null) yield* Scope.close(live.scope, Exit.void)
        live = null
        const scope = yield* Scope.fork(instanceScope, ExecutionStrategy.sequential)
        // The process lives across turns: its egress proxy (if its workspace has a policy) is
        // served as long as it does; a policy given to a workspace that had none applies from the
        // agent's next process.
        const launched = yield* Effect.gen(function*() {
          const egressSocket = yield* sandboxes.egressSocket(ctx, NAME, () => turns)
          egressNow = egressSocket
          return yield* launch({ ctx, preset, presetName, agent, settings, modelSocket, egressSocket, owner, sandbox, handlers, env: parentEnv() })
        }).pipe(
          Scope.extend(scope),
          Effect.tapError(() => Scope.close(scope, Exit.void))
        )
        const proc = launched.proc
        const kept = readSession(agent.agentDir, presetName)
        const mcpServers = launched.mcpServers
        let sessionId: string | null = null
        let intro: string | null = instructions
        if (kept !== null) {
          if (proc.initialized.agentCapabilities?.loadSession === true && preset.loadSession !== false) {
            const loaded = yield* Effect.tryPromise(() =>
              proc.agent.request("session/load", { sessionId: kept, cwd: WorkspaceFs.SANDBOX_WORKSPACE, mcpServers, _meta: sessionMeta })
            ).pipe(Effect.either)
            if (Either.isRight(loaded)) {
              sessionId = kept
              intro = null
            } else yield* Effect.logWarning(`acp: session/load ${kept} failed (${errorText(loaded.left)}); starting a new session`)
          }
          if (sessionId === null) intro = `${instructions}\n\n${recoveryNote}`
        }
        if (sessionId === null) {
          const created = yield* Effect.tryPromise({
            try: () => proc.agent.request("session/new", { cwd: WorkspaceFs.SANDBOX_WORKSPACE, mcpServers, _meta: sessionMeta }),
            catch: (e) => e
          }).pipe(Effect.catchAll((e) => Effect.flatMap(AcpProcess.failure(proc, e), (m) => Effect.fail(fail("start", `ACP session/new failed: ${m}`)))))
          sessionId = created.sessionId
          persistSession(agent.agentDir, presetName, sessionId)
        }
        live = { proc, sessionId, intro, scope }
        return live
      })

      const send = (message: string): Stream.Stream<ProviderOutput, ProviderError> =>
        Stream.asyncScoped<ProviderOutput, ProviderError>((emit) =>
          Effect.gen(function*() {
            if (stopped) return yield* fail("turn", "provider was stopped")
            if (inFlight !== null) {
              // A cancelled turn's prompt settles first (bounded): the agent runs one prompt at a time.
              const prev = inFlight
              yield* Effect.promise(() => prev.then(() => undefined, () => undefined)).pipe(Effect.timeoutOption("10 seconds"))
            }
            turns++
            const l = yield* ensureLive.pipe(Effect.mapError((e) => (e.reason === "turn" ? e : fail("turn", e.message))))
            const decoder = makeDecoder()
            let done = false
            emitOut = (o) => void emit.single(o)
            sink = (u) => {
              for (const o of decoder.update(u)) void emit.single(o)
            }
            asked = decoder.asked
            const text = l.intro === null ? message : `${l.intro}\n\n${message}`
            const p = l.proc.agent.request("session/prompt", { sessionId: l.sessionId, prompt: [{ type: "text", text }] })
            inFlight = p
            p.then(
              (r) => {
                done = true
                turnEnded()
                l.intro = null
                if (r.stopReason === "end_turn") void emit.end()
                else void emit.fail(fail("turn", `the ACP agent stopped the turn: ${r.stopReason}`))
              },
              (e) => {
                done = true
                turnEnded()
                void run(AcpProcess.failure(l.proc, e)).then((m) => emit.fail(fail("turn", `ACP turn failed: ${m}`)))
              }
            )
            yield* Effect.addFinalizer(() =>
              Effect.sync(() => {
                sink = null
                asked = null
                emitOut = null
                if (!done && l.proc.died() === null) void l.proc.agent.notify("session/cancel", { sessionId: l.sessionId }).catch(() => undefined)
              })
            )
          }).pipe(Effect.catchAll((e) => Effect.sync(() => void emit.fail(e))))
        )

      const service: ProviderService = {
        name: NAME,
        start: (_session, text) =>
          Effect.suspend(() => {
            if (stopped) return Effect.fail(fail("start", "provider was stopped"))
            instructions = withToolGuidance(text)
            return Effect.void
          }),
        send,
        suspend: Effect.sync(() => new TextEncoder().encode(JSON.stringify({ v: 1, provider: NAME, preset: presetName, instructions }))),
        resume: (state) =>
          Effect.try({
            try: () => {
              const j: unknown = JSON.parse(new TextDecoder().decode(state))
              if (typeof j === "object" && j !== null && "instructions" in j && typeof j.instructions === "string") instructions = j.instructions
            },
            catch: (e) => fail("resume", `bad acp blob: ${errorText(e)}`)
          }),
        stop: Effect.sync(() => {
          stopped = true
        })
      }
      return service
    })

  const resolveCheck = (variant: string | null) =>
    Either.isLeft(presetOf(variant))
      ? Effect.fail(new ProviderError({ provider: `${NAME}:${variant ?? ""}`, reason: "unknown-provider", message: Either.getLeft(presetOf(variant)).pipe(Option.getOrElse(() => "")) }))
      : Effect.void

  const f: ProviderFactory = {
    name: NAME,
    make: (ctx) => Effect.acquireRelease(make(ctx), (p) => p.stop.pipe(Effect.ignore)),
    checkVariant: resolveCheck
  }
  return f
})
