// How to run Codex for one turn against our own model endpoint: argv and environment as pure
// functions. Verified against @openai/codex 0.169.0 (docs/providers-real.md).
//
//   codex exec [resume] --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
//         --disable plugins … -c model_provider=substrat -c model_providers.substrat.base_url=…
//         -c mcp_servers.substrat.command=… -c mcp_servers.substrat.default_tools_approval_mode="approve"
//         [<thread_id>] -- "<prompt>"          (stdin: /dev/null)
//
// Codex only speaks HTTP(S) over TCP to a model provider (no Unix-socket base URL), so inside a
// netless sandbox it is started under llm-forward.mjs, which listens on the sandbox's own loopback
// and relays to the bound Unix socket; `{port}` in the base URL is filled in by the forwarder.

export interface McpServer {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>>
}

export interface CodexTurn {
  readonly prompt: string
  /** The thread id from a previous run's `thread.started` (same CODEX_HOME required). */
  readonly resume?: string
  /** e.g. `http://127.0.0.1:{port}/v1` under llm-forward, or the scripted endpoint's URL + `/v1`. */
  readonly baseUrl: string
  /** A model the bundled catalog knows (e.g. gpt-5.5) avoids a non-fatal "Model metadata … not found" item. */
  readonly model: string
  readonly mcpServers: Readonly<Record<string, McpServer>>
  /** Name of the env var holding the bearer token (sent as `Authorization: Bearer …`). */
  readonly envKey?: string
  /** Appended to Codex's own developer instructions (the agent's system prompt). */
  readonly developerInstructions?: string
  /** The provider id in `model_providers.<id>`; default "substrat". */
  readonly providerId?: string
  /** `model_catalog_json`: a model catalog file replacing the bundled one (see `codexCatalog`). */
  readonly modelCatalog?: string
}

/** A TOML basic string / inline array / inline table; JSON string escapes are valid TOML. */
const tomlString = (s: string): string => JSON.stringify(s)
const tomlStrings = (xs: ReadonlyArray<string>): string => `[${xs.map(tomlString).join(", ")}]`
const tomlTable = (o: Readonly<Record<string, string>>): string =>
  `{ ${Object.entries(o).map(([k, v]) => `${tomlString(k)} = ${tomlString(v)}`).join(", ")} }`

/** A TOML/JSON value of Codex's configuration. */
export type ConfigValue = string | number | boolean | { readonly [k: string]: ConfigValue }

/**
 * Codex's configuration for our model provider and nothing phoning home, as nested values: the
 * `-c` overrides of `codex exec` (flattened to dotted keys) and the codex-acp adapter's
 * CODEX_CONFIG (JSON).
 */
export const offlineConfig = (o: {
  readonly baseUrl: string
  readonly envKey?: string | undefined
  readonly providerId?: string | undefined
}): { readonly [k: string]: ConfigValue } => {
  const p = o.providerId ?? "substrat"
  return {
    model_provider: p,
    model_providers: {
      [p]: {
        name: p,
        base_url: o.baseUrl,
        wire_api: "responses",
        env_key: o.envKey ?? "SUBSTRAT_LLM_KEY",
        // Fail the turn at once (turn.failed) instead of retrying with backoff.
        request_max_retries: 0,
        stream_max_retries: 0
      }
    },
    // Nothing phones home: no analytics, no OTLP export, no update check.
    analytics: { enabled: false },
    otel: { exporter: "none", trace_exporter: "none", metrics_exporter: "none" },
    check_for_update_on_startup: false
  }
}

/**
 * Features switched off: plugin sync reaches GitHub / chatgpt.com at start-up (5 s of timeouts
 * without network); without `unbounded_connection_retries` off an unreachable endpoint is
 * "Reconnecting... waiting for network" forever, whatever request_max_retries says (with it the
 * turn fails at once).
 */
export const offlineDisabled = ["plugins", "remote_plugin", "apps", "unbounded_connection_retries"] as const

const dotted = (prefix: string, v: ConfigValue): ReadonlyArray<string> =>
  typeof v === "object"
    ? Object.entries(v).flatMap(([k, x]) => dotted(prefix === "" ? k : `${prefix}.${k}`, x))
    : [`${prefix}=${typeof v === "string" ? tomlString(v) : String(v)}`]

export const codexArgs = (turn: CodexTurn): ReadonlyArray<string> => {
  const config: Array<string> = [
    ...dotted("", offlineConfig({ baseUrl: turn.baseUrl, envKey: turn.envKey, providerId: turn.providerId })),
    ...(turn.modelCatalog === undefined ? [] : [`model_catalog_json=${tomlString(turn.modelCatalog)}`]),
    ...(turn.developerInstructions === undefined ? [] : [`developer_instructions=${tomlString(turn.developerInstructions)}`])
  ]
  for (const [name, s] of Object.entries(turn.mcpServers)) {
    config.push(`mcp_servers.${name}.command=${tomlString(s.command)}`)
    config.push(`mcp_servers.${name}.args=${tomlStrings(s.args)}`)
    if (s.env !== undefined) config.push(`mcp_servers.${name}.env=${tomlTable(s.env)}`)
    // MCP tool calls run without an approval prompt (exec mode cannot prompt).
    config.push(`mcp_servers.${name}.default_tools_approval_mode="approve"`)
    // Wait for the server before the first model request (and fail if it cannot start). Without
    // it a slowly starting server (a loaded machine) misses the first request's tool list and the
    // model's call is refused as "unsupported call". (`startup_readiness` did not help.)
    config.push(`mcp_servers.${name}.required=true`)
  }
  return [
    "exec",
    ...(turn.resume === undefined ? [] : ["resume"]),
    "--json",
    "--skip-git-repo-check",
    // We sandbox Codex ourselves (bwrap); its own bwrap/landlock sandbox would nest and fail.
    "--dangerously-bypass-approvals-and-sandbox",
    ...offlineDisabled.flatMap((f) => ["--disable", f]),
    "-m", turn.model,
    ...config.flatMap((c) => ["-c", c]),
    ...(turn.resume === undefined ? [] : [turn.resume]),
    "--",
    turn.prompt
  ]
}

/**
 * The bundled catalog (`codex debug models --bundled`, JSON `{models:[…]}`) with
 * `supports_search_tool: false` on every model. With the bundled entry a catalog model (the
 * default gpt-5.5) defers MCP tools behind `tool_search`, which a custom model provider (our
 * forwarder, a local endpoint) may not serve; without it they are declared directly as a
 * `mcp__substrat` namespace tool, as for models outside the catalog — and the model keeps the
 * rest of its catalog metadata. Null when the text is not such a catalog.
 */
export const catalogWithoutToolSearch = (bundled: string): string | null => {
  let json: unknown
  try {
    json = JSON.parse(bundled)
  } catch {
    return null
  }
  if (typeof json !== "object" || json === null || !("models" in json) || !Array.isArray(json.models)) return null
  const models: ReadonlyArray<unknown> = json.models
  return JSON.stringify({
    ...json,
    models: models.map((m) => (typeof m === "object" && m !== null ? { ...m, supports_search_tool: false } : m))
  })
}

export interface CodexEnvOptions {
  /** HOME; CODEX_HOME is `<home>/.codex` and must exist before the run. */
  readonly home: string
  readonly apiKey?: string
  readonly envKey?: string
  readonly path?: string
  readonly extra?: Readonly<Record<string, string>>
}

export const codexEnv = (o: CodexEnvOptions): Record<string, string> => ({
  HOME: o.home,
  CODEX_HOME: `${o.home}/.codex`,
  PATH: o.path ?? "/usr/local/bin:/usr/bin:/bin",
  [o.envKey ?? "SUBSTRAT_LLM_KEY"]: o.apiKey ?? "scripted",
  ...o.extra
})
