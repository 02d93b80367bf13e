// Helpers for daemon tests with the real Gemini CLI as `acp:gemini` that need no test runner (the
// `security` chaos experiment imports them too): the metered home (the daemon's Gemini forwarder
// holds the key, the scripted Gemini API endpoint is its upstream), how the script tells agents
// apart, and the attack on the agent's forwarder socket from inside its sandbox — Gemini CLI's
// own run_shell_command curls other endpoints, model names that try to leave the path, a `?key=`
// and oversized bodies.
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, startDaemon } from "../integration/daemon.support.js"
import { agentEvents, dataNamed, withLlm } from "./daemon-claude.support.js"
import { FILE_BYTES, HELD, LEAD, teamScript } from "./team-script.support.js"

export const MODEL = "gemini-scripted"
export const KEY = "AIza-test-daemon-only"
/** Gemini's promptTokenCount includes the cached tokens: 4000 reported, 1000 of them uncached. */
export const usage = { input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000 }
/** $ per request at the home's prices: (1000×1 + 200×2 + 3000×0.5) / 1e6. */
export const price = 2900 / 1e6
export const withUsage = (r: ScriptedLlm.Reply): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage } : r)

/** The environment a gemini daemon test sets (register these keys with daemonTestScope). */
export const geminiEnvKeys = ["SUBSTRAT_GEMINI_UPSTREAM", "GEMINI_API_KEY", "SUBSTRAT_METER_PRICES"] as const

/** A fresh home whose acp:gemini agents reach `llm` through the daemon's Gemini forwarder as MODEL, priced. */
export const geminiHome = (llm: ScriptedLlm.ScriptedLlmServer, homes: Array<string>, toml = ""): string => {
  const home = makeTmpDir("sag-") // short: agent socket paths must fit in sun_path
  homes.push(home)
  Fs.chmodSync(home, 0o755)
  Fs.writeFileSync(Path.join(home, "config.toml"), `[acp]\nmodel = "${MODEL}"\n${toml}`)
  process.env["SUBSTRAT_GEMINI_UPSTREAM"] = llm.baseUrl
  process.env["GEMINI_API_KEY"] = KEY
  process.env["SUBSTRAT_METER_PRICES"] = JSON.stringify({ [MODEL]: { input: 1, output: 2, cache_read: 0.5, cache_write: 4 } })
  return home
}

/** The text of a request's first user content that carries Substrat's instructions ("" without it). */
export const firstPrompt = (r: { readonly body: unknown }): string => {
  const b = r.body
  const contents = typeof b === "object" && b !== null && "contents" in b && Array.isArray(b.contents) ? (b.contents as ReadonlyArray<unknown>) : []
  for (const c of contents) {
    if (typeof c !== "object" || c === null || !("parts" in c) || !Array.isArray(c.parts)) continue
    const t = (c.parts as ReadonlyArray<unknown>).map((p) => (typeof p === "object" && p !== null && "text" in p ? String(p.text) : "")).join("")
    if (t.includes("You are one agent in a team run by Substrat")) return t
  }
  return ""
}

/** Requests of the agent whose instructions contain `marker`. */
export const byAgent = (marker: string) => (r: ScriptedLlm.ScriptRequest) => firstPrompt(r).includes(marker)

/** Whose request it was: the team member whose instructions open its first prompt. */
export const whose = (r: { readonly body: unknown }): string => {
  const p = firstPrompt(r)
  return p.includes(LEAD) ? "lead" : p.includes("AGENT=coder") ? "coder" : p.includes("AGENT=reviewer") ? "reviewer" : "?"
}

/** A reply's calls of Substrat's tools under Gemini CLI's names (`mcp__substrat__x` → `mcp_substrat_x`). */
const geminiNames = (r: ScriptedLlm.Reply): ScriptedLlm.Reply =>
  r._tag === "Message" && r.content.some((b) => b.type === "tool_use")
    ? { ...r, content: r.content.map((b) => (b.type === "tool_use" ? { ...b, name: b.name.replace(/^mcp__substrat__/, "mcp_substrat_") } : b)) }
    : r

/**
 * The team's script for gemini agents: each rule keyed on an agent's system prompt is keyed on
 * its first prompt instead (Gemini CLI's system prompt is its own). The coder writes with Gemini
 * CLI's own write_file, the reviewer reads with its read_file. `held`: the reviewer's first
 * request is held (label HELD) until the daemon is dead.
 */
export const geminiTeamScript = (held = false): Array<ScriptedLlm.ScriptEntry> => [
  ...(held ? [{ match: { where: byAgent("AGENT=reviewer") }, reply: Reply.text("never seen"), delayMs: 600_000, label: HELD }] : []),
  ...teamScript({
    usage,
    write: Reply.toolCall("write_file", { file_path: "/workspace/version.ts", content: FILE_BYTES }),
    read: Reply.toolCall("read_file", { file_path: "/workspace/version.ts" })
  }).map((e) => {
    const m = e.match
    if (m?.system === undefined) return e
    const { system, where, ...rest } = m
    return {
      ...e,
      reply: geminiNames(e.reply),
      match: { ...rest, where: (r: ScriptedLlm.ScriptRequest) => firstPrompt(r).includes(system) && (where === undefined || where(r)) }
    }
  })
]

/** Side doors of the Gemini forwarder: other endpoints and versions, a key in the query, model names that try to leave the path. */
export const geminiDoors: ReadonlyArray<string> = [
  `/v1beta/models/${MODEL}:embedContent`,
  "/v1beta/models",
  "/v1beta/files",
  "/upload/v1beta/files",
  "/v1beta/cachedContents",
  `/v1/models/${MODEL}:generateContent`,
  `/v1beta/models/${MODEL}:streamGenerateContent`,
  `/v1beta/models/${MODEL}:generateContent?key=AIza-sandbox`,
  `/v1beta/models/${MODEL}:streamGenerateContent?alt=sse&key=AIza-sandbox`,
  "/v1beta/models/../files:generateContent",
  "/v1beta/models/x/../../files:generateContent",
  "/v1beta/models/..:generateContent",
  "/v1beta/models/%2e%2e%2Ffiles:generateContent",
  "/v1beta/models/a%2Fb:generateContent",
  "/v1beta/models/a/b:generateContent",
  "/v1beta/models/a:embedContent:generateContent",
  "/v1beta//models/a:generateContent",
  "/v1beta/models/a;x:generateContent"
]

/** A curl of the forwarder socket from inside the sandbox, the target sent as is, its status appended to /tmp/codes. */
const curl = (target: string, data: string) =>
  `curl -s --path-as-is --unix-socket /run/substrat/llm.sock -X POST -H 'content-type: application/json' -H 'x-goog-api-key: AIza-sandbox' ${data} -o /dev/null -w '%{http_code}\\n' 'http://localhost${target}' >> /tmp/codes`

/**
 * The shell command: every door, then a 33 MiB body twice (with content-length, then chunked);
 * the codes after `CODES`. (Gemini CLI refuses commands with `$(…)` or backticks.)
 */
export const doorsCommand = (): string => {
  const small = `--data '{"contents":[{"role":"user","parts":[{"text":"x"}]}]}'`
  const model = `/v1beta/models/${MODEL}:generateContent`
  return [
    "rm -f /tmp/codes /tmp/big",
    ...geminiDoors.map((d) => curl(d, small)),
    "head -c 34603008 /dev/zero | tr '\\0' 'x' > /tmp/big",
    curl(model, "--data-binary @/tmp/big"),
    curl(model, "-H 'transfer-encoding: chunked' --data-binary @/tmp/big"),
    "rm -f /tmp/big",
    "echo CODES",
    "tr '\\n' ' ' < /tmp/codes"
  ].join("; ")
}

export interface GeminiSideDoors {
  /** Requests the upstream got, as `METHOD target label`. */
  readonly reachedUpstream: ReadonlyArray<string>
  /** HTTP codes the sandbox saw: one per door, then the two oversized bodies. */
  readonly codes: ReadonlyArray<string>
  /** `forwarder.refused` events in the agent's log: `METHOD target`. */
  readonly refused: ReadonlyArray<string>
  /** `usage.reserved` events in the agent's log. */
  readonly reserved: number
  /** The final answer `send --wait` printed, its exit code. */
  readonly answer: string
  readonly code: number
  /** Whether the daemon's key showed anywhere the sandbox could see (its shell's output). */
  readonly keySeen: boolean
}

/** The attack run through a daemon (`track` gets its pid); the home goes into `homes`. */
export const geminiSideDoors = (homes: Array<string>, track: (pid: number) => void): Promise<GeminiSideDoors> =>
  withLlm([], async (llm) => {
    const home = geminiHome(llm, homes)
    const door = byAgent("AGENT=door")
    await Effect.runPromise(llm.replace([
      {
        match: { where: (r) => door(r) && r.lastUser.includes("Go.") },
        reply: withUsage(Reply.toolCall("run_shell_command", { command: doorsCommand(), description: "forwarder" })),
        label: "shell"
      },
      { match: { where: (r) => door(r) && r.lastUser.includes("CODES") }, reply: withUsage(Reply.text("done")), label: "done" }
    ]))
    track(await startDaemon(home))
    const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "acp:gemini", "--name", "door", "--instructions", "AGENT=door Work."])
    const sent = await cli(home, ["agent", "send", "--wait", "door", "Go."])
    const reqs = await Effect.runPromise(llm.requests)
    const output = reqs.find((r) => r.label === "done")?.lastUser ?? ""
    const log = agentEvents(home, a.session_id)
    return {
      reachedUpstream: reqs.map((r) => `${r.method} ${r.path} ${r.label ?? "-"}`),
      codes: (output.split("CODES")[1] ?? "").match(/\d{3}/g) ?? [],
      refused: dataNamed(log, "forwarder.refused").map((d) => `${String(d["method"])} ${String(d["path"])}`),
      reserved: dataNamed(log, "usage.reserved").length,
      answer: sent.stdout,
      code: sent.code,
      keySeen: output.includes(KEY)
    }
  })
