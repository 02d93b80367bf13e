// How to run Claude Code for one turn, offline-capable and sandbox-friendly: argv and environment as
// pure functions. Verified against @anthropic-ai/claude-code 2.1.330 (docs/providers-real.md).
//
//   claude -p --output-format stream-json --verbose --mcp-config '{"mcpServers":{…}}' --strict-mcp-config
//          --allowedTools mcp__substrat__* [--resume <session_id>] -- "<prompt>"

export interface McpServer {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>>
}

export interface ClaudeTurn {
  readonly prompt: string
  /** The session id from a previous run's `system/init` / `result` (same cwd and HOME required). */
  readonly resume?: string
  readonly mcpServers: Readonly<Record<string, McpServer>>
  /** Tools allowed without a permission prompt; default: every tool of every configured MCP server. */
  readonly allowedTools?: ReadonlyArray<string>
  /** e.g. "bypassPermissions" so built-in tools (Bash, Edit) run without prompts inside our sandbox.
   * As root this also needs IS_SANDBOX=1 in the environment. */
  readonly permissionMode?: string
  readonly appendSystemPrompt?: string
  readonly model?: string
}

export const claudeArgs = (turn: ClaudeTurn): ReadonlyArray<string> => {
  const mcpServers = Object.fromEntries(
    Object.entries(turn.mcpServers).map(([name, s]) => [
      name,
      { type: "stdio", command: s.command, args: [...s.args], ...(s.env === undefined ? {} : { env: { ...s.env } }) }
    ])
  )
  const allowed = turn.allowedTools ?? Object.keys(turn.mcpServers).map((name) => `mcp__${name}__*`)
  return [
    "-p",
    "--output-format", "stream-json",
    "--verbose",
    "--mcp-config", JSON.stringify({ mcpServers }),
    "--strict-mcp-config",
    ...(allowed.length === 0 ? [] : ["--allowedTools", allowed.join(",")]),
    ...(turn.permissionMode === undefined ? [] : ["--permission-mode", turn.permissionMode]),
    ...(turn.appendSystemPrompt === undefined ? [] : ["--append-system-prompt", turn.appendSystemPrompt]),
    ...(turn.model === undefined ? [] : ["--model", turn.model]),
    ...(turn.resume === undefined ? [] : ["--resume", turn.resume]),
    "--",
    turn.prompt
  ]
}

/** Where the model is: a Unix socket (the sandbox case) or a URL. */
export type ModelEndpoint =
  | { readonly _tag: "UnixSocket"; readonly path: string }
  | { readonly _tag: "Url"; readonly baseUrl: string }

export interface ClaudeEnvOptions {
  readonly home: string
  readonly endpoint: ModelEndpoint
  /** Sent as x-api-key; the scripted endpoint ignores it, a forwarder may replace it. */
  readonly apiKey?: string
  readonly path?: string
  /** Default 0: a failed API call ends the turn at once with `is_error` instead of backing off. */
  readonly maxRetries?: number
  readonly extra?: Readonly<Record<string, string>>
}

/**
 * A complete environment (use with a cleared env, e.g. bwrap --clearenv). Besides the endpoint it
 * switches off everything that would phone home, and ENABLE_TOOL_SEARCH=false puts MCP tools in
 * the request's `tools` directly (otherwise they are "deferred" behind ToolSearch).
 */
export const claudeEnv = (o: ClaudeEnvOptions): Record<string, string> => ({
  HOME: o.home,
  PATH: o.path ?? "/usr/local/bin:/usr/bin:/bin",
  ANTHROPIC_API_KEY: o.apiKey ?? "scripted",
  ...(o.endpoint._tag === "UnixSocket"
    ? { ANTHROPIC_UNIX_SOCKET: o.endpoint.path, ANTHROPIC_BASE_URL: "http://localhost" }
    : { ANTHROPIC_BASE_URL: o.endpoint.baseUrl }),
  CLAUDE_CODE_MAX_RETRIES: String(o.maxRetries ?? 0),
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1",
  DISABLE_AUTOUPDATER: "1",
  ENABLE_TOOL_SEARCH: "false",
  ...o.extra
})
