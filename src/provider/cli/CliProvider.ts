// The generic CLI provider: a conversation held by an agent CLI (claude, codex, cursor-agent)
// whose every turn is one sandboxed process (CliTurn.ts). Per CLI only a `CliDriver` differs:
// the argv/env/binds of a turn and the stdout decoder. The conversation itself lives in the CLI's
// own session store under the agent's private HOME; what we keep is its resume id.
//
// Suspend blob (JSON): {"v":1,"provider","resume_id","instructions"} — the CLI's session/thread
// id (null before the first successful turn) and the instructions (with the tool guidance), which
// some CLIs need on every turn (claude: --append-system-prompt) and `resume` does not receive.
//
// Crash safety: the blob reaches session.json only on a suspend, so after a kill -9 the
// Multiplexer finds no blob and calls `start`. The resume id is therefore also written to
// agents/<sid>/cli-resume.json (tmp + fsync + rename) after every turn that changes it, and
// `start` continues that conversation when the file exists — it exists only for a session that
// already ran turns, so a new agent still starts fresh.
import { Effect, Schema, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { ProviderError } from "../../domain/errors.js"
import type { SessionId } from "../../domain/ids.js"
import { withToolGuidance } from "../../domain/guidance.js"
import { Sandbox, type SandboxRequest } from "../../sandbox/Sandbox.js"
import type { ProviderContext, ProviderFactory, ProviderOutput, ProviderService } from "../Provider.js"
import { type AgentSandbox, AgentSandboxes } from "./AgentSandbox.js"
import { checkBinary, type CliName, type ResolvedBinary, resolveBinary } from "./Binary.js"
import { CliSettings, type CliSettingsShape } from "./CliSettings.js"
import { runTurn, type TurnDecoder } from "./CliTurn.js"

export interface TurnInput {
  readonly prompt: string
  /** The CLI's session/thread id to resume, or null for the first turn. */
  readonly resumeId: string | null
  /** The agent's instructions, tool guidance included. */
  readonly instructions: string
  readonly agent: AgentSandbox
  readonly bin: ResolvedBinary
  readonly settings: CliSettingsShape
  readonly ctx: ProviderContext
}

export interface TurnPlan {
  /** Everything but the workspace (the provider adds the agent's). */
  readonly request: Omit<SandboxRequest, "workspace">
  readonly decoder: TurnDecoder & {
    /** The id to resume next turn, once the CLI has persisted the conversation (else null). */
    readonly resumeId: () => string | null
  }
}

export interface CliDriver {
  readonly name: CliName
  readonly plan: (input: TurnInput) => Effect.Effect<TurnPlan, ProviderError>
}

const Blob = Schema.parseJson(Schema.Struct({
  v: Schema.Literal(1),
  provider: Schema.String,
  resume_id: Schema.NullOr(Schema.String),
  instructions: Schema.String
}))

/** The factory for one CLI; needs the Sandbox, the agent sandboxes and the CLI settings. */
export const cliFactory = (driver: CliDriver) =>
  Effect.gen(function*() {
    const sandbox = yield* Sandbox
    const sandboxes = yield* AgentSandboxes
    const settings = yield* CliSettings
    const name = driver.name
    const fail = (reason: ProviderError["reason"], message: string) => new ProviderError({ provider: name, reason, message })

    const make = (ctx: ProviderContext) =>
      Effect.gen(function*() {
        const bin = yield* resolveBinary(name, settings.binaries[name], process.env, settings.installDir)
        const agent = yield* sandboxes.prepare(ctx, name)
        const resumeFile = Path.join(agent.agentDir, "cli-resume.json")
        const persist = (id: string) =>
          Effect.try({
            try: () => {
              const tmp = `${resumeFile}.tmp`
              const fd = Fs.openSync(tmp, "w", 0o600)
              Fs.writeSync(fd, JSON.stringify({ provider: name, resume_id: id }))
              Fs.fsyncSync(fd)
              Fs.closeSync(fd)
              Fs.renameSync(tmp, resumeFile)
            },
            catch: (e) => fail("turn", `cannot record the resume id: ${String(e)}`)
          }).pipe(Effect.catchAll((e) => Effect.logWarning(e.message)))
        const persisted = (): string | null => {
          try {
            const j: unknown = JSON.parse(Fs.readFileSync(resumeFile, "utf8"))
            if (typeof j === "object" && j !== null && "provider" in j && "resume_id" in j && j.provider === name && typeof j.resume_id === "string") {
              return j.resume_id
            }
          } catch {
            // absent or unreadable: a fresh conversation
          }
          return null
        }
        let resumeId: string | null = null
        let instructions = withToolGuidance("")
        let live = false
        let stopped = false

        const send = (message: string): Stream.Stream<ProviderOutput, ProviderError> =>
          Stream.unwrap(Effect.gen(function*() {
            if (stopped) return yield* fail("turn", "provider was stopped")
            if (!live) return yield* fail("turn", "send before start/resume")
            const plan = yield* driver.plan({ prompt: message, resumeId, instructions, agent, bin, settings, ctx })
            const request: SandboxRequest = {
              workspace: agent.workspace,
              ...plan.request,
              ...(settings.limits === undefined ? {} : { limits: settings.limits })
            }
            return runTurn(sandbox, name, request, plan.decoder).pipe(
              Stream.ensuring(Effect.suspend(() => {
                const next = plan.decoder.resumeId()
                if (next === null || next === resumeId) return Effect.void
                resumeId = next
                return persist(next)
              }))
            )
          }))

        const service: ProviderService = {
          name,
          start: (_session: SessionId, text: string) =>
            Effect.suspend(() => {
              if (stopped) return Effect.fail(fail("start", "provider was stopped"))
              instructions = withToolGuidance(text)
              resumeId = persisted()
              live = true
              return Effect.void
            }),
          send,
          suspend: Effect.suspend(() => Schema.encode(Blob)({ v: 1, provider: name, resume_id: resumeId, instructions })).pipe(
            Effect.map((s) => new TextEncoder().encode(s)),
            Effect.mapError((e) => fail("suspend", e.message))
          ),
          resume: (state: Uint8Array) =>
            Schema.decode(Blob)(new TextDecoder().decode(state)).pipe(
              Effect.mapError((e) => fail("resume", `bad ${name} blob: ${e.message}`)),
              Effect.flatMap((b) =>
                b.provider === name
                  ? Effect.sync(() => {
                    resumeId = b.resume_id
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
      check: checkBinary(name, settings.binaries[name], process.env, settings.installDir)
    }
    return factory
  })
