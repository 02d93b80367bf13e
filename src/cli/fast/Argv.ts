// Which command lines the fast path answers, and what it sends for them. Deliberately narrow:
// a line is taken only when @effect/cli (the full CLI) would read it one way and run it — exact
// lower-case command words, `--json` / `--notify` / `--home DIR` spelled out, positionals that
// cannot be mistaken for flags or flag values, payloads the daemon's Schemas accept. Anything
// else (help, completions, `--home=DIR`, `-f`, unknown or repeated flags, a missing or extra
// argument, …) is `undefined`: the full CLI runs it and prints its own output and errors.
import type { DaemonStatus, InspectResult, SessionInfo } from "../../daemon/Rpcs.js"
import type { AgentNode } from "../../domain/agent.js"
import type { WorkspaceSpec } from "../../domain/workspace.js"
import { jsonText, renderInspect, renderSent, renderSessions, renderStatus, renderTree, renderWorkspaces } from "../Format.js"

/** One request/response (or finite stream) command, ready to send. */
export interface FastCall {
  readonly method: string
  readonly params: Readonly<Record<string, unknown>>
  /** `--home`, when given (else $SUBSTRAT_HOME, else ~/.substrat). */
  readonly home: string | undefined
  /**
   * Asking again has no effect beyond the answer (reads): when the reply is something the fast
   * path cannot render byte-for-byte like the full CLI, it hands the whole command to the full CLI.
   */
  readonly repeatable: boolean
  /** `agent.logs`: the result is a stream of lines, each printed as it comes. */
  readonly stream: boolean
  /** stdout for a successful (non-stream) result, without the final newline. */
  readonly render: (result: unknown) => string
}

interface Spec {
  readonly words: readonly [string, string]
  readonly args: number
  readonly json: boolean
  readonly flags: ReadonlyArray<string>
  readonly repeatable: boolean
  readonly stream?: boolean
  /** The method and params; undefined when the full CLI would refuse the payload itself. */
  readonly request: (
    args: ReadonlyArray<string>,
    flags: ReadonlySet<string>
  ) => { readonly method: string; readonly params: Readonly<Record<string, unknown>> } | undefined
  readonly render: (result: unknown) => string
}

/** `AgentRef` of src/daemon/Rpcs.ts: 1–256 characters. */
const agentRef = (s: string): boolean => s.length >= 1 && s.length <= 256

/** The daemon's payload limit for a message is 512 KiB of text; longer lines go to the full CLI. */
const maxLine = 64 * 1024

/** A command without arguments: `<group> <verb> [--json]` → `<method>` with no params. */
const plain = (group: string, verb: string, method: string, render: (result: unknown) => string): Spec => ({
  words: [group, verb],
  args: 0,
  json: true,
  flags: [],
  repeatable: true,
  request: () => ({ method, params: {} }),
  render
})

/** A read of one agent: `agent <verb> <agent>`. */
const ofAgent = (verb: string, json: boolean, params: Readonly<Record<string, unknown>>, render: (result: unknown) => string): Spec => ({
  words: ["agent", verb],
  args: 1,
  json,
  flags: [],
  repeatable: true,
  request: ([agent]) => (agentRef(agent!) ? { method: `agent.${verb}`, params: { agent, ...params } } : undefined),
  render
})

const specs: ReadonlyArray<Spec> = [
  plain("agent", "list", "agent.list", (r) => renderTree((r as { readonly agents: ReadonlyArray<AgentNode> }).agents)),
  plain("session", "list", "session.list", (r) => renderSessions((r as { readonly sessions: ReadonlyArray<SessionInfo> }).sessions)),
  plain("workspace", "list", "workspace.list", (r) => renderWorkspaces((r as { readonly workspaces: ReadonlyArray<WorkspaceSpec> }).workspaces)),
  plain("daemon", "status", "daemon.status", (r) => renderStatus(r as DaemonStatus)),
  ofAgent("inspect", true, {}, (r) => renderInspect(r as InspectResult)),
  // Without `-f` (a flag, so the full CLI takes it): the transcript so far, a line per item.
  { ...ofAgent("logs", false, { follow: false }, String), stream: true },
  {
    words: ["agent", "send"],
    args: 2,
    json: true,
    flags: ["notify"],
    repeatable: false,
    request: ([agent, text], flags) =>
      agentRef(agent!) ? { method: "agent.send", params: { agent, text, sync: !flags.has("notify") } } : undefined,
    render: (r) => renderSent(r as { readonly message_id: string })
  }
]

/** Values @effect/cli reads as the value of a boolean flag right before them (`--json yes`). */
const boolWords = new Set(["true", "1", "y", "yes", "on", "false", "0", "n", "no", "off"])

/** Could @effect/cli take this token for a flag (it trims and lower-cases before matching)? */
const flagLike = (token: string): boolean => token.trim().startsWith("-")

/** `argv` without node and script (process.argv.slice(2)). */
export const parse = (argv: ReadonlyArray<string>): FastCall | undefined => {
  const spec = specs.find((s) => s.words[0] === argv[0] && s.words[1] === argv[1])
  if (spec === undefined) return undefined
  const args: Array<string> = []
  const flags = new Set<string>()
  let home: string | undefined
  for (let i = 2; i < argv.length; i++) {
    const token = argv[i]!
    if (token === "--home") {
      const value = argv[i + 1]
      if (home !== undefined || value === undefined || value.length === 0 || flagLike(value)) return undefined
      home = value
      i++
      continue
    }
    const flag = token.startsWith("--") ? token.slice(2) : undefined
    if (flag !== undefined && ((flag === "json" && spec.json) || spec.flags.includes(flag))) {
      const next = argv[i + 1]
      if (flags.has(flag) || (next !== undefined && boolWords.has(next.trim().toLowerCase()))) return undefined
      flags.add(flag)
      continue
    }
    if (token.length === 0 || flagLike(token)) return undefined
    args.push(token)
  }
  if (args.length !== spec.args) return undefined
  const request = spec.request(args, flags)
  if (request === undefined || JSON.stringify(request.params).length > maxLine) return undefined
  const json = flags.has("json")
  return {
    ...request,
    home,
    repeatable: spec.repeatable,
    stream: spec.stream === true,
    render: json ? jsonText : spec.render
  }
}
