// The `codex` provider: `codex exec --json` (resume: `codex exec resume <thread_id>`), one
// process per turn inside the agent's sandbox, stdin empty (docs/providers-real.md).
//   - model: Codex speaks HTTP over TCP only, so inside the netless sandbox it runs under
//     llm-forward.mjs, which listens on the sandbox's own loopback and relays to the bound model
//     socket (/run/substrat/llm.sock: the daemon's forwarder, or a scripted endpoint)
//   - tools: -c mcp_servers.substrat.* (approve, required); Codex's own sandbox is bypassed
//     (--dangerously-bypass-approvals-and-sandbox): ours is the fence
//   - instructions: `developer_instructions` on the first turn (the thread keeps them)
//   - conversation: CODEX_HOME=/home/agent/.codex in the private HOME; blob = the thread id
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as NoFollow from "../../sandbox/NoFollow.js"
import { runCollect, spawnScoped } from "../../sandbox/spawn.js"
import { noLimits } from "../../domain/workspace.js"
import * as Os from "node:os"
import * as Path from "node:path"
import { ProviderError } from "../../domain/errors.js"
import type { ExitStatus } from "../../sandbox/Sandbox.js"
import { SANDBOX_HOME, SANDBOX_LLM_SOCKET } from "../cli/AgentSandbox.js"
import { type CliDriver, cliFactory, type TokenTotals, type TurnPlan, zeroTokens } from "../cli/CliProvider.js"
import {
  basePath,
  commonBinds,
  llmForwardScript,
  SANDBOX_LLM_FORWARD,
  sandboxNode,
  substratMcp
} from "../cli/CliSettings.js"
import type { ProviderOutput } from "../Provider.js"
import * as EJ from "./ExecJson.js"
import { catalogWithoutToolSearch, codexArgs, codexEnv } from "./Invocation.js"

export const defaultCodexModel = "gpt-5.5"

const parseResult = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * Decode one turn's exec --json events into ProviderOutput. `turn.completed` usage is the
 * thread's running total across `exec resume`, so the turn's own tokens are the difference from
 * `base.tokenBase`, the totals after the previous turn of the resumed thread `base.resumeId` (a
 * different or new thread starts from zero; totals that went down were reset).
 */
export const codexDecoder = (
  base: { readonly resumeId: string | null; readonly tokenBase: TokenTotals } = { resumeId: null, tokenBase: zeroTokens }
): TurnPlan["decoder"] => {
  let threadId: string | null = null
  let completed: EJ.TurnCompleted | null = null
  let failed: string | null = null
  let lastError: string | null = null
  let lastMessage = ""

  const line = (raw: string): ReadonlyArray<ProviderOutput> => {
    const d = EJ.decodeLine(raw)
    if (Either.isLeft(d)) return []
    const l = d.right
    if (EJ.isThreadStarted(l)) {
      threadId = l.thread_id
      return []
    }
    if (EJ.isTurnCompleted(l)) {
      completed = l
      return []
    }
    if (EJ.isTurnFailed(l)) {
      failed = l.error.message
      return []
    }
    if (EJ.isStreamError(l)) {
      lastError = l.message
      return []
    }
    if (!EJ.isItemEvent(l) || l.type !== "item.completed") return []
    const item = l.item
    if (EJ.isAgentMessage(item)) {
      lastMessage = item.text
      return item.text === "" ? [] : [{ _tag: "TextChunk", text: item.text }]
    }
    if (EJ.isMcpToolCall(item)) {
      const isError = item.status === "failed" || (item.error !== undefined && item.error !== null)
      return [{
        _tag: "ToolCall",
        call_id: item.id,
        tool: item.server === "substrat" ? item.tool : `mcp__${item.server}__${item.tool}`,
        arguments: item.arguments ?? {},
        result: item.error ? { error: item.error.message } : parseResult(EJ.mcpResultText(item)),
        is_error: isError,
        ...(item.server === "substrat" ? {} : { source: "provider" as const })
      }]
    }
    if (EJ.isCommandExecution(item)) {
      return [{
        _tag: "ToolCall",
        call_id: item.id,
        tool: "exec_command",
        arguments: { command: item.command },
        result: { exit_code: item.exit_code ?? null, output: item.aggregated_output },
        is_error: item.status === "failed" || (item.exit_code !== undefined && item.exit_code !== null && item.exit_code !== 0),
        source: "provider"
      }]
    }
    if (EJ.isFileChange(item)) {
      // Codex's apply_patch: the item lists the files it changed.
      return [{
        _tag: "ToolCall",
        call_id: item.id,
        tool: "apply_patch",
        arguments: { changes: item.changes.map((c) => ({ path: c.path, kind: c.kind })) },
        result: { status: item.status },
        is_error: item.status !== "completed",
        source: "provider"
      }]
    }
    return []
  }

  const end = (exit: ExitStatus): Either.Either<ReadonlyArray<ProviderOutput>, string> => {
    if (failed !== null) return Either.left(`codex turn failed: ${failed}`)
    if (completed === null) {
      return Either.left(`codex ended without turn.completed${lastError === null ? "" : `: ${lastError}`}`)
    }
    if (exit.code !== 0) return Either.left("codex exited abnormally after turn.completed")
    const now = totalsOf(completed)
    const was = base.resumeId !== null && threadId === base.resumeId ? base.tokenBase : zeroTokens
    const reset = now.input_tokens < was.input_tokens || now.output_tokens < was.output_tokens
    const before = reset ? zeroTokens : was
    return Either.right([
      { _tag: "Usage", input_tokens: now.input_tokens - before.input_tokens, output_tokens: now.output_tokens - before.output_tokens, cost_usd: 0 },
      { _tag: "Final", text: lastMessage }
    ])
  }

  return {
    line,
    end,
    resumeId: () => (completed !== null || failed !== null ? threadId : null),
    // Only a completed turn moves the base: a failed turn's tokens are counted with the next one.
    tokenTotal: () => (completed === null || failed !== null ? null : totalsOf(completed))
  }
}

const totalsOf = (c: EJ.TurnCompleted): TokenTotals => ({
  input_tokens: c.usage.input_tokens,
  cached_input_tokens: c.usage.cached_input_tokens ?? 0,
  output_tokens: c.usage.output_tokens
})

/** Where the catalog without tool_search goes, in the agent's CODEX_HOME. */
const CATALOG_FILE = "substrat-model-catalog.json"

/**
 * The bundled model catalog of a codex binary with `supports_search_tool: false`
 * (`catalogWithoutToolSearch`), read once per binary by running `codex debug models --bundled`
 * on the host (a local dump, ~40 ms, no network). Null when this codex cannot say (then the
 * bundled catalog stays in force).
 */
const catalogs = new Map<string, string | null>()
const catalogOf = (hostPath: string): Effect.Effect<string | null> =>
  catalogs.has(hostPath)
    ? Effect.succeed(catalogs.get(hostPath) ?? null)
    : Effect.acquireUseRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "substrat-codex-catalog-"))),
      (tmp) =>
        runCollect(spawnScoped(undefined, {
          argv: [hostPath, "debug", "models", "--bundled"],
          env: { CODEX_HOME: tmp, HOME: tmp, PATH: basePath },
          limits: { ...noLimits, wall_clock_seconds: 15 },
          graceMs: 1000
        })).pipe(
          Effect.map((r) => (r.exit.code === 0 ? catalogWithoutToolSearch(r.stdout) : null)),
          Effect.orElseSucceed(() => null)
        ),
      (tmp) => Effect.sync(() => Fs.rmSync(tmp, { recursive: true, force: true }))
    ).pipe(Effect.tap((out) => Effect.sync(() => catalogs.set(hostPath, out))))

/**
 * The agent's CODEX_HOME (`<home>/.codex`, which must exist before codex runs) with the model
 * catalog of `hostPath` without tool_search in it; the catalog's path inside the sandbox, or null
 * (this codex cannot say: its bundled catalog stays in force). The home is the agent's: never
 * follow a link in it.
 */
export const prepareCodexHome = (
  homeDir: string,
  hostPath: string,
  owner: NoFollow.Owner | undefined,
  provider: string,
  reason: ProviderError["reason"]
): Effect.Effect<string | null, ProviderError> =>
  Effect.gen(function*() {
    yield* NoFollow.makeDirectory(homeDir, ".codex", { mode: 0o700, owner }).pipe(
      Effect.mapError((e) => new ProviderError({ provider, reason, message: `CODEX_HOME: ${e.message}` }))
    )
    const catalog = yield* catalogOf(hostPath)
    if (catalog === null) return null
    yield* NoFollow.writeFile(homeDir, `.codex/${CATALOG_FILE}`, catalog, { mode: 0o600, owner }).pipe(
      Effect.mapError((e) => new ProviderError({ provider, reason, message: `model catalog: ${e.message}` }))
    )
    return `${SANDBOX_HOME}/.codex/${CATALOG_FILE}`
  })

export const codexDriver: CliDriver = {
  name: "codex",
  plan: (input) =>
    Effect.gen(function*() {
      const { settings: s, agent, bin } = input
      if (s.openaiSocket === null) {
        return yield* new ProviderError({
          provider: "codex",
          reason: "turn",
          message: "no OpenAI endpoint configured (the daemon's model forwarder socket)"
        })
      }
      const catalog = yield* prepareCodexHome(agent.homeDir, bin.hostPath, input.owner, "codex", "turn")
      const node = sandboxNode(s.nodePath).path
      const argv = codexArgs({
        ...(catalog === null ? {} : { modelCatalog: catalog }),
        prompt: input.prompt,
        ...(input.resumeId === null ? {} : { resume: input.resumeId }),
        baseUrl: "http://127.0.0.1:{port}/v1",
        model: s.models.codex ?? defaultCodexModel,
        mcpServers: { substrat: substratMcp(s) },
        ...(input.resumeId === null ? { developerInstructions: input.instructions } : {})
      })
      const forward = [node, SANDBOX_LLM_FORWARD, "--socket", SANDBOX_LLM_SOCKET, "--"]
      const plan: TurnPlan = {
        request: {
          command: [...forward, bin.sandboxPath, ...argv],
          env: codexEnv({ home: SANDBOX_HOME, path: basePath, apiKey: "substrat-forwarded", extra: { ...s.env.codex } }),
          extraBinds: [
            ...commonBinds(s, agent, bin, s.openaiSocket),
            { host_path: llmForwardScript(s.installDir), sandbox_path: SANDBOX_LLM_FORWARD, mode: "ro" }
          ]
        },
        decoder: codexDecoder({ resumeId: input.resumeId, tokenBase: input.tokenBase })
      }
      return plan
    })
}

/** The `codex` factory (needs Sandbox, AgentSandboxes, CliSettings). */
export const factory = cliFactory(codexDriver)
