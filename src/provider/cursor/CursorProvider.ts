// The `cursor-agent` provider (seed 002, ARCHITECTURE §9) — UNTESTED AGAINST THE REAL BINARY:
// it cannot be installed on our machines; the tests run a stand-in (test/fixtures/cursor-agent)
// that emits the documented stream-json format (cursor/StreamJson.ts says where it comes from).
//   cursor-agent --print --output-format stream-json --trust --approve-mcps --force
//                [--model m] [--resume <session_id>] "<prompt>"
//   - tools: `.cursor/mcp.json` generated at agents/<sid>/mcp.json and bound read-only at
//     /workspace/.cursor/mcp.json (bwrap creates an empty mount point file in the workspace)
//   - --force: shell commands run without approval prompts (headless cannot answer them); the
//     sandbox is the fence
//   - instructions: cursor-agent has no system-prompt flag, so the first turn's prompt starts with
//     them (the resumed chat keeps them)
//   - model: the real binary talks to Cursor's backend with CURSOR_API_KEY (passed in from the
//     daemon's environment — there is no forwarder for it), so it needs a workspace with network
//     access. The OpenAI model socket is bound at /run/substrat/llm.sock when configured (the
//     stand-in uses it; the real binary ignores it).
import { Effect, Either } from "effect"
import * as Path from "node:path"
import * as NoFollow from "../../sandbox/NoFollow.js"
import { ProviderError } from "../../domain/errors.js"
import type { ExitStatus } from "../../sandbox/Sandbox.js"
import { SANDBOX_HOME } from "../cli/AgentSandbox.js"
import { type CliDriver, cliFactory, type TurnPlan } from "../cli/CliProvider.js"
import { basePath, commonBinds, substratMcp } from "../cli/CliSettings.js"
import type { ProviderOutput } from "../Provider.js"
import * as SJ from "./StreamJson.js"

export const SANDBOX_CURSOR_MCP = "/workspace/.cursor/mcp.json"

const parseResult = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** Decode one turn's stream-json into ProviderOutput. */
export const cursorDecoder = (): TurnPlan["decoder"] => {
  let sessionId: string | null = null
  let result: SJ.Result | null = null
  const pending = new Map<string, SJ.ToolCallView>()

  const line = (raw: string): ReadonlyArray<ProviderOutput> => {
    const d = SJ.decodeLine(raw)
    if (Either.isLeft(d)) return []
    const l = d.right
    if (SJ.isInit(l)) {
      sessionId = l.session_id
      return []
    }
    if (SJ.isAssistant(l)) {
      const text = SJ.messageText(l.message)
      return text === "" ? [] : [{ _tag: "TextChunk", text }]
    }
    if (SJ.isToolCall(l)) {
      const view = SJ.viewToolCall(l)
      if (view === null) return []
      if (l.subtype === "started") {
        pending.set(l.call_id, view)
        return []
      }
      pending.delete(l.call_id)
      const r = view.result
      const ours = view.kind === "mcp" && (view.server === null || view.server === "substrat")
      return [{
        _tag: "ToolCall",
        call_id: l.call_id,
        tool: view.kind === "mcp" && view.server !== null && view.server !== "substrat" ? `mcp__${view.server}__${view.tool}` : view.tool,
        arguments: view.args,
        result: r === undefined ? null : r.text !== null ? parseResult(r.text) : r.value,
        is_error: r?.isError ?? false,
        ...(ours ? {} : { source: "provider" as const })
      }]
    }
    if (SJ.isResult(l)) {
      result = l
      sessionId = sessionId ?? l.session_id
    }
    return []
  }

  const end = (exit: ExitStatus): Either.Either<ReadonlyArray<ProviderOutput>, string> => {
    if (result === null) return Either.left("cursor-agent ended without a result")
    if (result.is_error) return Either.left(`cursor-agent turn failed (${result.subtype}): ${result.result ?? "no message"}`)
    if (exit.code !== 0) return Either.left("cursor-agent exited abnormally after a successful result")
    const u = result.usage
    return Either.right([
      {
        _tag: "Usage",
        input_tokens: u?.input_tokens ?? u?.inputTokens ?? 0,
        output_tokens: u?.output_tokens ?? u?.outputTokens ?? 0,
        cost_usd: 0
      },
      { _tag: "Final", text: result.result ?? "" }
    ])
  }

  return { line, end, resumeId: () => (result === null ? null : result.session_id ?? sessionId) }
}

export const cursorDriver: CliDriver = {
  name: "cursor-agent",
  plan: (input) =>
    Effect.gen(function*() {
      const { settings: s, agent, bin } = input
      const mcp = substratMcp(s)
      const config = JSON.stringify({ mcpServers: { substrat: { command: mcp.command, args: [...mcp.args] } } }, null, 2)
      // In the agent's own directory (not agent-writable), bound read-only; written without following a link all the same.
      yield* NoFollow.writeFile(Path.dirname(agent.mcpConfigPath), Path.basename(agent.mcpConfigPath), config + "\n", { mode: 0o644 }).pipe(
        Effect.mapError((e) => new ProviderError({ provider: "cursor-agent", reason: "turn", message: `mcp.json: ${e.message}` }))
      )
      const model = s.models["cursor-agent"]
      const first = input.resumeId === null
      const text = first ? `${input.instructions}\n\n---\n\n${input.prompt}` : input.prompt
      // No `--` separator is documented: keep a leading dash from reading as an option.
      const prompt = text.startsWith("-") ? ` ${text}` : text
      const argv = [
        "--print",
        "--output-format", "stream-json",
        "--trust",
        "--approve-mcps",
        "--force",
        ...(model === undefined ? [] : ["--model", model]),
        ...(input.resumeId === null ? [] : ["--resume", input.resumeId]),
        prompt
      ]
      const plan: TurnPlan = {
        request: {
          command: [bin.sandboxPath, ...argv],
          env: { HOME: SANDBOX_HOME, PATH: basePath, ...s.env["cursor-agent"] },
          extraBinds: [
            ...commonBinds(s, agent, bin, s.openaiSocket),
            { host_path: agent.mcpConfigPath, sandbox_path: SANDBOX_CURSOR_MCP, mode: "ro" }
          ]
        },
        decoder: cursorDecoder()
      }
      return plan
    })
}

/** The `cursor-agent` factory (needs Sandbox, AgentSandboxes, CliSettings). */
export const factory = cliFactory(cursorDriver)
