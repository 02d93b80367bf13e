// `session/request_permission` for an ACP agent, by the `acp.approve` policy:
//   auto    allow (the option of kind allow_once, else allow_always): inside the sandbox the
//           sandbox is the boundary, as for claude's bypassPermissions
//   reject  refuse (reject_once, else reject_always)
//   ask     an inbox item the human answers (Asks.ts): allow → allow_once (else allow_always),
//           allow-always → allow_always (else allow_once), reject → reject_once (else
//           reject_always); no answer within `acp.ask_timeout_seconds` seconds (0: no limit) → reject
// A request to run one of Substrat's own tools (the `substrat` MCP server: send_message,
// spawn_agent, …) is allowed under every policy and not shown: the daemon already governs and logs
// those calls. (Qwen Code and Gemini CLI ask before every MCP call.)
// Each other answer is shown in the turn's output as a ⚙ `permission` line (the tool's title and the
// option chosen, and who chose it). A request the agent withdraws (its signal aborts) is answered
// `cancelled`.
import type * as Acp from "@agentclientprotocol/sdk"
import { createHash } from "node:crypto"
import type { SessionId } from "../../domain/ids.js"
import type { ProviderOutput } from "../Provider.js"
import type { Answered, Choice, PermissionQuestion } from "./Asks.js"
import { toolNames } from "../../domain/tools.js"

export type Approve = "auto" | "reject" | "ask"

const pick = (options: ReadonlyArray<Acp.PermissionOption>, kinds: ReadonlyArray<Acp.PermissionOptionKind>) => {
  for (const k of kinds) {
    const o = options.find((x) => x.kind === k)
    if (o !== undefined) return o
  }
  return undefined
}

const kindsOf: Record<Choice, ReadonlyArray<Acp.PermissionOptionKind>> = {
  allow: ["allow_once", "allow_always"],
  "allow-always": ["allow_always", "allow_once"],
  reject: ["reject_once", "reject_always"]
}

export interface Asker {
  readonly ask: (q: PermissionQuestion, signal: AbortSignal) => Promise<Answered | null>
  readonly session_id: SessionId
  readonly agent_id: string
  readonly agent_name: string
  /** Seconds before an unanswered request is rejected (0: no limit). */
  readonly timeoutSeconds: number
}

/** The question's identity: what it asks (the text, the options) and the tool's input, not the call's id. */
export const questionKey = (text: string, r: Acp.RequestPermissionRequest): string =>
  createHash("sha256").update(JSON.stringify([text, r.toolCall.rawInput ?? null])).digest("hex")

/** The human's choice, or `timeout` / null (withdrawn) — bounded by the timeout. */
const askHuman = (asker: Asker, text: string, key: string, signal: AbortSignal): Promise<Answered | "timeout" | null> => {
  const q = { session_id: asker.session_id, agent_id: asker.agent_id, agent_name: asker.agent_name, text, key }
  if (asker.timeoutSeconds <= 0) return asker.ask(q, signal)
  const ctl = new AbortController()
  const onAbort = () => ctl.abort()
  signal.addEventListener("abort", onAbort)
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    ctl.abort()
  }, asker.timeoutSeconds * 1000)
  return asker.ask(q, ctl.signal).then((c) => {
    clearTimeout(timer)
    signal.removeEventListener("abort", onAbort)
    return c === null && timedOut ? "timeout" : c
  })
}

const nameIn = (m: unknown): string | null =>
  typeof m === "object" && m !== null && "toolName" in m && typeof m.toolName === "string" ? m.toolName : null

/**
 * The tool's own name when the agent sends it (`_meta.toolName`, as Qwen Code does;
 * `_meta.claudeCode.toolName`, as claude-agent-acp does for MCP tools), else null.
 */
const toolNameOf = (t: Acp.ToolCallUpdate): string | null => {
  const m: unknown = t._meta
  return nameIn(m) ?? (typeof m === "object" && m !== null && "claudeCode" in m ? nameIn(m.claudeCode) : null)
}

/**
 * One of Substrat's tools as Gemini CLI asks for it: no `_meta`, the title its MCP tools carry
 * (`<tool> (substrat MCP Server)`; the server of that name is always the one of `session/new`)
 * and kind `other` (a shell command's title is free text, but its kind is `execute`).
 */
const geminiSubstratTool = (t: Acp.ToolCallUpdate): string | null => {
  const m = t.kind === "other" ? /^(\w+) \(substrat MCP Server\)$/.exec(t.title ?? "") : null
  return m === null ? null : `mcp__substrat__${m[1]!}`
}

/**
 * One of Substrat's tools by its exact full name, `mcp__substrat__<tool>`: a server the agent adds
 * itself (`my_substrat`, `substrat__x`) or a tool it names `substrat_…` is asked like any other.
 */
const ownTool = (name: string): boolean => {
  const m = /^mcp__substrat__(\w+)$/.exec(name)
  return m !== null && (toolNames as ReadonlyArray<string>).includes(m[1]!)
}

/**
 * What the question calls the tool: its title, with the tool's name when the title does not say
 * it; without a name, the call's kind after the title (opencode's title of an edit is the bare path).
 */
const describeTool = (t: Acp.ToolCallUpdate): string => {
  const title = t.title ?? ""
  const name = toolNameOf(t)
  if (name === null) {
    const kind = t.kind === undefined || t.kind === null || t.kind === "other" ? "" : t.kind
    return title === "" ? (kind === "" ? t.toolCallId : kind) : kind === "" ? title : `${title} (${kind})`
  }
  return title === "" || title === "{}" ? name : title.includes(name) ? title : `${name}: ${title}`
}

export const make = (o: { readonly approve: Approve; readonly emit: (out: ProviderOutput) => void; readonly asker: Asker | null }) => {
  let n = 0
  const decide = async (r: Acp.RequestPermissionRequest, signal: AbortSignal): Promise<Acp.RequestPermissionResponse> => {
    if (signal.aborted) return { outcome: { outcome: "cancelled" } }
    // By the tool's name (or Gemini CLI's exact MCP title), never by a title's mention of substrat:
    // a title is free text (a shell command may mention substrat).
    const name = toolNameOf(r.toolCall) ?? geminiSubstratTool(r.toolCall)
    if (name !== null && ownTool(name)) {
      const own = pick(r.options, kindsOf.allow)
      if (own !== undefined) return { outcome: { outcome: "selected", optionId: own.optionId } }
    }
    const title = describeTool(r.toolCall)
    let choice: Choice | "timeout" | null
    let by: string
    if (o.approve === "ask" && o.asker !== null) {
      const opts = r.options.map((x) => `${x.kind} (${x.name})`).join(", ")
      const text = `${o.asker.agent_name} asks permission: ${title}. Its options: ${opts}. Answer allow, allow-always or reject.`
      const got = await askHuman(o.asker, text, questionKey(text, r), signal)
      choice = got === null || got === "timeout" ? got : got.choice
      by = got === "timeout"
        ? `no answer within ${o.asker.timeoutSeconds}s (acp.ask_timeout_seconds)`
        : got !== null && got.earlier
        ? "the human, answered before the restart"
        : "the human"
    } else {
      choice = o.approve === "auto" ? "allow" : "reject"
      by = o.approve === "ask" ? "policy ask without an inbox: reject" : `policy ${o.approve}`
    }
    if (choice === null) return { outcome: { outcome: "cancelled" } }
    const option = pick(r.options, kindsOf[choice === "timeout" ? "reject" : choice])
    n += 1
    o.emit({
      _tag: "ToolCall",
      call_id: `permission-${n}`,
      tool: "permission",
      arguments: { tool: title, options: r.options.map((x) => x.kind) },
      result: option === undefined ? `no ${choice === "timeout" ? "reject" : choice} option: cancelled` : `${option.kind} (${by})`,
      is_error: option === undefined || !option.kind.startsWith("allow"),
      source: "provider"
    })
    return option === undefined ? { outcome: { outcome: "cancelled" } } : { outcome: { outcome: "selected", optionId: option.optionId } }
  }
  return { decide }
}
