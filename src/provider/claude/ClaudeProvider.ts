// The `claude` provider: Claude Code, one `claude -p --output-format stream-json` process per
// turn inside the agent's sandbox (docs/providers.md, docs/providers-real.md).
//   - conversation: Claude's own session under the private HOME; resume = `--resume <session_id>`
//     (same cwd: always /workspace); suspend blob = that session id (CliProvider.ts)
//   - model: ANTHROPIC_UNIX_SOCKET=/run/substrat/llm.sock + ANTHROPIC_BASE_URL=http://localhost,
//     the socket being the daemon's forwarder (or a scripted endpoint); no network in the sandbox
//   - tools: inline --mcp-config with only our server (--strict-mcp-config), allowed without
//     prompts; built-in tools (Bash, Edit, …) run under bypassPermissions — the sandbox is the fence
//   - instructions: tool guidance + the agent's, via --append-system-prompt on every turn
import { Effect, Either } from "effect"
import { ProviderError } from "../../domain/errors.js"
import { SANDBOX_HOME, SANDBOX_LLM_SOCKET } from "../cli/AgentSandbox.js"
import { basePath, commonBinds, substratMcp } from "../cli/CliSettings.js"
import { type CliDriver, cliFactory, type TurnPlan } from "../cli/CliProvider.js"
import type { ExitStatus } from "../../sandbox/Sandbox.js"
import type { ProviderOutput } from "../Provider.js"
import { claudeArgs, claudeEnv } from "./Invocation.js"
import * as SJ from "./StreamJson.js"

const MCP_PREFIX = "mcp__substrat__"

/** Tool results come back as text; ours are JSON. */
export const parseResult = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** Money in the log: no float dust from subtracting running totals (0.018 - 0.006). */
const roundUsd = (x: number): number => Math.round(x * 1e10) / 1e10

/**
 * Decode one turn's stream-json into ProviderOutput. Pure state machine over lines.
 * `total_cost_usd` in claude's `result` is the session's running total across `--resume`, so the
 * turn's own cost is the difference from `base.costBase`, the total after the previous turn of
 * the resumed session `base.resumeId` (a different or new session starts from 0).
 */
export const claudeDecoder = (
  base: { readonly resumeId: string | null; readonly costBase: number } = { resumeId: null, costBase: 0 }
): TurnPlan["decoder"] => {
  let sessionId: string | null = null
  let result: SJ.Result | null = null
  let apiError: string | null = null
  const pending = new Map<string, { readonly name: string; readonly input: unknown }>()

  const line = (raw: string): ReadonlyArray<ProviderOutput> => {
    const d = SJ.decodeLine(raw)
    if (Either.isLeft(d)) return []
    const l = d.right
    if (SJ.isInit(l)) {
      sessionId = l.session_id
      return []
    }
    if (SJ.isAssistant(l)) {
      if (l.is_api_error_message === true) {
        apiError = SJ.assistantText(l)
        return []
      }
      if (l.parent_tool_use_id !== null) return []
      const out: Array<ProviderOutput> = []
      const text = SJ.assistantText(l)
      if (text !== "") out.push({ _tag: "TextChunk", text })
      for (const u of SJ.toolUses(l)) pending.set(u.id, { name: u.name, input: u.input })
      return out
    }
    if (SJ.isUser(l)) {
      const out: Array<ProviderOutput> = []
      for (const r of SJ.toolResults(l)) {
        const call = pending.get(r.tool_use_id)
        if (call === undefined) continue
        pending.delete(r.tool_use_id)
        const ours = call.name.startsWith(MCP_PREFIX)
        out.push({
          _tag: "ToolCall",
          call_id: r.tool_use_id,
          tool: ours ? call.name.slice(MCP_PREFIX.length) : call.name,
          arguments: call.input,
          result: parseResult(SJ.toolResultText(r)),
          is_error: r.is_error === true,
          // Claude's built-in tools (Write, Bash, Read, Edit, …) never reach our ToolHandler.
          ...(ours ? {} : { source: "provider" as const })
        })
      }
      return out
    }
    if (SJ.isResult(l)) {
      result = l
      sessionId = sessionId ?? l.session_id
    }
    return []
  }

  const end = (exit: ExitStatus): Either.Either<ReadonlyArray<ProviderOutput>, string> => {
    if (result === null) {
      return Either.left(`claude ended without a result${apiError === null ? "" : `: ${apiError}`}`)
    }
    if (result.is_error) {
      const why = result.terminal_reason ?? result.subtype
      return Either.left(`claude turn failed (${why}): ${result.result ?? apiError ?? "no message"}`)
    }
    if (exit.code !== 0) return Either.left(`claude exited abnormally after a successful result`)
    const u = result.usage
    return Either.right([
      {
        _tag: "Usage",
        input_tokens: u.input_tokens + (u.cache_creation_input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0),
        output_tokens: u.output_tokens,
        cost_usd: turnCost(result)
      },
      { _tag: "Final", text: result.result ?? "" }
    ])
  }

  const continues = (r: SJ.Result): boolean => base.resumeId !== null && r.session_id === base.resumeId
  /** The turn's own cost: the running total minus the total before it (a total that went down was reset). */
  const turnCost = (r: SJ.Result): number => {
    const before = continues(r) ? base.costBase : 0
    return r.total_cost_usd >= before ? roundUsd(r.total_cost_usd - before) : r.total_cost_usd
  }

  return {
    line,
    end,
    resumeId: () => (result === null ? null : result.session_id ?? sessionId),
    // Only a successful turn moves the base: a failed turn's cost is counted with the next one.
    costTotal: () => (result === null || result.is_error ? null : result.total_cost_usd)
  }
}

export const claudeDriver: CliDriver = {
  name: "claude",
  plan: (input) =>
    Effect.gen(function*() {
      const { settings: s, agent, bin } = input
      if (s.anthropicSocket === null) {
        return yield* new ProviderError({
          provider: "claude",
          reason: "turn",
          message: "no Anthropic endpoint configured (the daemon's model forwarder socket)"
        })
      }
      const model = s.models.claude
      const argv = claudeArgs({
        prompt: input.prompt,
        ...(input.resumeId === null ? {} : { resume: input.resumeId }),
        mcpServers: { substrat: substratMcp(s) },
        allowedTools: ["mcp__substrat__*"],
        permissionMode: "bypassPermissions",
        appendSystemPrompt: input.instructions,
        ...(model === undefined ? {} : { model })
      })
      const env = claudeEnv({
        home: SANDBOX_HOME,
        endpoint: { _tag: "UnixSocket", path: SANDBOX_LLM_SOCKET },
        // A placeholder: the forwarder outside the sandbox puts the real key in.
        apiKey: "substrat-forwarded",
        path: basePath,
        extra: { IS_SANDBOX: "1", ...s.env.claude }
      })
      const plan: TurnPlan = {
        request: {
          command: [bin.sandboxPath, ...argv],
          env,
          extraBinds: commonBinds(s, agent, bin, s.anthropicSocket)
        },
        decoder: claudeDecoder({ resumeId: input.resumeId, costBase: input.costBase })
      }
      return plan
    })
}

/** The `claude` factory (needs Sandbox, AgentSandboxes, CliSettings). */
export const factory = cliFactory(claudeDriver)
