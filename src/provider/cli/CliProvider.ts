// The generic CLI provider: a conversation held by an agent CLI (claude, codex, cursor-agent)
// whose every turn is one sandboxed process (CliTurn.ts). Per CLI only a `CliDriver` differs:
// the argv/env/binds of a turn and the stdout decoder. The conversation itself lives in the CLI's
// own session store under the agent's private HOME; what we keep is its resume id.
//
// Suspend blob (JSON): {"v":1,"provider","resume_id","instructions","cost_total"?,"token_total"?}
// — the CLI's session/thread id (null before the first successful turn), the instructions (with
// the tool guidance), which some CLIs need on every turn (claude: --append-system-prompt) and
// `resume` does not receive, and the CLI's own running totals for that conversation: claude
// reports the session's cost so far, codex the thread's tokens so far, not the turn's. Each
// turn's own figure is the difference, so the totals must survive with the resume id (absent in
// older blobs = 0).
//
// Crash safety: the blob reaches session.json only on a suspend, so after a kill -9 the
// Multiplexer finds no blob and calls `start`. The resume id (and the running cost total) is
// therefore also written to agents/<sid>/cli-resume.json (tmp + fsync + rename) after every
// turn that changes it, and
// `start` continues that conversation when the file exists — it exists only for a session that
// already ran turns, so a new agent still starts fresh. `resume` prefers the file over the blob
// for the same reason (a blob from an earlier eviction can be stale after a kill -9).
import { Effect, Option, Schema, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { ProviderError } from "../../domain/errors.js"
import type { SessionId } from "../../domain/ids.js"
import { withToolGuidance } from "../../domain/guidance.js"
import { Sandbox, type SandboxRequest } from "../../sandbox/Sandbox.js"
import type { ProviderContext, ProviderFactory, ProviderOutput, ProviderService } from "../Provider.js"
import { type AgentSandbox, AgentSandboxes } from "./AgentSandbox.js"
import { checkBinary, type CliName, type ResolvedBinary, resolveBinary } from "./Binary.js"
import { CliSettings, type CliSettingsShape, withEgress } from "./CliSettings.js"
import { runTurn, type TurnDecoder } from "./CliTurn.js"
import { parentEnv } from "../../config/Config.js"

export interface TurnInput {
  readonly prompt: string
  /** The CLI's session/thread id to resume, or null for the first turn. */
  readonly resumeId: string | null
  /** The agent's instructions, tool guidance included. */
  readonly instructions: string
  /** The CLI's running cost total of the `resumeId` conversation so far (0 for a new one). */
  readonly costBase: number
  /** The CLI's running token totals of the `resumeId` conversation so far (zero for a new one). */
  readonly tokenBase: TokenTotals
  readonly agent: AgentSandbox
  readonly bin: ResolvedBinary
  readonly settings: CliSettingsShape
  readonly ctx: ProviderContext
  /** Who the sandboxed CLI runs as on the host when not the daemon (files written into its home get this owner). */
  readonly owner: { readonly uid: number; readonly gid: number } | undefined
}

export interface TurnPlan {
  /** Everything but the workspace (the provider adds the agent's). */
  readonly request: Omit<SandboxRequest, "workspace">
  readonly decoder: TurnDecoder & {
    /** The id to resume next turn, once the CLI has persisted the conversation (else null). */
    readonly resumeId: () => string | null
    /**
     * The conversation's running cost total after a successful turn, for CLIs that report a
     * running total (claude); null when there is none (then the base is left unchanged).
     */
    readonly costTotal?: () => number | null
    /**
     * The conversation's running token totals after a successful turn, for CLIs that report
     * those instead of the turn's (codex); null when there are none (the base is left unchanged).
     */
    readonly tokenTotal?: () => TokenTotals | null
  }
}

/** A CLI's running token counts of one conversation (codex's `turn.completed` usage). */
export const TokenTotals = Schema.Struct({
  input_tokens: Schema.Number,
  cached_input_tokens: Schema.Number,
  output_tokens: Schema.Number
})
export type TokenTotals = typeof TokenTotals.Type
export const zeroTokens: TokenTotals = { input_tokens: 0, cached_input_tokens: 0, output_tokens: 0 }
const sameTokens = (a: TokenTotals, b: TokenTotals): boolean =>
  a.input_tokens === b.input_tokens && a.cached_input_tokens === b.cached_input_tokens && a.output_tokens === b.output_tokens
const decodeTokens = Schema.decodeUnknownOption(TokenTotals)

export interface CliDriver {
  readonly name: CliName
  readonly plan: (input: TurnInput) => Effect.Effect<TurnPlan, ProviderError>
}

const Blob = Schema.parseJson(Schema.Struct({
  v: Schema.Literal(1),
  provider: Schema.String,
  resume_id: Schema.NullOr(Schema.String),
  instructions: Schema.String,
  cost_total: Schema.optional(Schema.Number),
  token_total: Schema.optional(TokenTotals)
}))

/** The factory for one CLI; needs the Sandbox, the agent sandboxes and the CLI settings. */
export const cliFactory = (driver: CliDriver) =>
  Effect.gen(function*() {
    const sandbox = yield* Sandbox
    const sandboxes = yield* AgentSandboxes
    const baseSettings = yield* CliSettings
    const name = driver.name
    const fail = (reason: ProviderError["reason"], message: string) => new ProviderError({ provider: name, reason, message })

    const make = (ctx: ProviderContext) =>
      Effect.gen(function*() {
        const bin = yield* resolveBinary(name, baseSettings.binaries[name], parentEnv(), baseSettings.installDir)
        const agent = yield* sandboxes.prepare(ctx, name)
        // Model requests go through a metering forwarder of this agent's own when the daemon meters.
        const settings = {
          ...baseSettings,
          anthropicSocket: yield* sandboxes.modelSocket(ctx, name, "anthropic", baseSettings.anthropicSocket),
          openaiSocket: yield* sandboxes.modelSocket(ctx, name, "openai", baseSettings.openaiSocket)
        }
        const resumeFile = Path.join(agent.agentDir, "cli-resume.json")
        const persist = (id: string, cost_total: number, token_total: TokenTotals) =>
          Effect.try({
            try: () => {
              const tmp = `${resumeFile}.tmp`
              const fd = Fs.openSync(tmp, "w", 0o600)
              Fs.writeSync(fd, JSON.stringify({ provider: name, resume_id: id, cost_total, token_total }))
              Fs.fsyncSync(fd)
              Fs.closeSync(fd)
              Fs.renameSync(tmp, resumeFile)
            },
            catch: (e) => fail("turn", `cannot record the resume id: ${String(e)}`)
          }).pipe(Effect.catchAll((e) => Effect.logWarning(e.message)))
        const persisted = (): { readonly resumeId: string; readonly costTotal: number; readonly tokenTotal: TokenTotals } | null => {
          try {
            const j: unknown = JSON.parse(Fs.readFileSync(resumeFile, "utf8"))
            if (typeof j === "object" && j !== null && "provider" in j && "resume_id" in j && j.provider === name && typeof j.resume_id === "string") {
              const cost = "cost_total" in j && typeof j.cost_total === "number" && Number.isFinite(j.cost_total) ? j.cost_total : 0
              const tokens = "token_total" in j ? Option.getOrElse(decodeTokens(j.token_total), () => zeroTokens) : zeroTokens
              return { resumeId: j.resume_id, costTotal: cost, tokenTotal: tokens }
            }
          } catch {
            // absent or unreadable: a fresh conversation
          }
          return null
        }
        let resumeId: string | null = null
        /** The CLI's running cost total of the `resumeId` conversation (claude), 0 for a new one. */
        let costTotal = 0
        /** The CLI's running token totals of the `resumeId` conversation (codex), zero for a new one. */
        let tokenTotal = zeroTokens
        let instructions = withToolGuidance("")
        let live = false
        let stopped = false

        const send = (message: string): Stream.Stream<ProviderOutput, ProviderError> =>
          Stream.unwrapScoped(Effect.gen(function*() {
            if (stopped) return yield* fail("turn", "provider was stopped")
            if (!live) return yield* fail("turn", "send before start/resume")
            const costBase = resumeId === null ? 0 : costTotal
            const tokenBase = resumeId === null ? zeroTokens : tokenTotal
            const plan = yield* driver.plan({ prompt: message, resumeId, instructions, costBase, tokenBase, agent, bin, settings, ctx, owner: sandbox.owner ?? undefined })
            // The agent's egress proxy for this turn (none without a policy): served while the turn runs.
            const egress = yield* sandboxes.egressSocket(ctx, name)
            const request: SandboxRequest = {
              workspace: agent.workspace,
              ...(egress === null ? plan.request : withEgress(plan.request, settings, egress)),
              ...(settings.limits === undefined ? {} : { limits: settings.limits })
            }
            return runTurn(sandbox, name, request, plan.decoder).pipe(
              Stream.ensuring(Effect.suspend(() => {
                const next = plan.decoder.resumeId()
                const total = plan.decoder.costTotal?.() ?? null
                const tokens = plan.decoder.tokenTotal?.() ?? null
                const nextCost = total ?? (next === resumeId ? costTotal : 0)
                const nextTokens = tokens ?? (next === resumeId ? tokenTotal : zeroTokens)
                if (next === null || (next === resumeId && nextCost === costTotal && sameTokens(nextTokens, tokenTotal))) return Effect.void
                resumeId = next
                costTotal = nextCost
                tokenTotal = nextTokens
                return persist(next, nextCost, nextTokens)
              }))
            )
          }))

        const service: ProviderService = {
          name,
          start: (_session: SessionId, text: string) =>
            Effect.suspend(() => {
              if (stopped) return Effect.fail(fail("start", "provider was stopped"))
              instructions = withToolGuidance(text)
              const p = persisted()
              resumeId = p?.resumeId ?? null
              costTotal = p?.costTotal ?? 0
              tokenTotal = p?.tokenTotal ?? zeroTokens
              live = true
              return Effect.void
            }),
          send,
          suspend: Effect.suspend(() => Schema.encode(Blob)({ v: 1, provider: name, resume_id: resumeId, instructions, cost_total: costTotal, token_total: tokenTotal })).pipe(
            Effect.map((s) => new TextEncoder().encode(s)),
            Effect.mapError((e) => fail("suspend", e.message))
          ),
          resume: (state: Uint8Array) =>
            Schema.decode(Blob)(new TextDecoder().decode(state)).pipe(
              Effect.mapError((e) => fail("resume", `bad ${name} blob: ${e.message}`)),
              Effect.flatMap((b) =>
                b.provider === name
                  ? Effect.sync(() => {
                    // cli-resume.json is rewritten after every turn, so it is never older than a
                    // blob; a blob can be (an eviction's, left in session.json when the daemon
                    // was later killed mid-conversation).
                    const p = persisted()
                    resumeId = p?.resumeId ?? b.resume_id
                    costTotal = p?.costTotal ?? b.cost_total ?? 0
                    tokenTotal = p?.tokenTotal ?? b.token_total ?? zeroTokens
                    instructions = b.instructions
                    live = true
                  })
                  : Effect.fail(fail("resume", `blob is for provider ${b.provider}, not ${name}`))
              )
            ),
          stop: Effect.sync(() => {
            stopped = true
            live = false
          })
        }
        return service
      })

    const factory: ProviderFactory = {
      name,
      make: (ctx) => Effect.acquireRelease(make(ctx), (p) => p.stop.pipe(Effect.ignore)),
      check: checkBinary(name, baseSettings.binaries[name], parentEnv(), baseSettings.installDir)
    }
    return factory
  })
