// requires: bwrap, git
// The REAL Gemini CLI (`@google/gemini-cli`, `gemini --acp`) as `acp:gemini` through the daemon and
// the CLI: its bwrap sandbox has the network off; its model traffic goes through the agent's
// metering forwarder to the daemon's Gemini forwarder (GEMINI_API_KEY added there as
// x-goog-api-key) and on to a scripted Gemini API endpoint (`acp.model`). Gemini CLI has a system
// prompt of its own: Substrat's instructions open the first prompt of its session, so the script
// tells agents apart by that first user content.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, rpcOnce, spawnCli, startDaemon, waitFor } from "../integration/daemon.support.js"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { byAgent, geminiDoors, geminiEnvKeys, geminiHome, geminiSideDoors, geminiTeamScript, KEY, MODEL, price, usage, whose, withUsage } from "./acp-gemini.support.js"
import { agentEvents as events, daemonTestScope, dataNamed as of, withLlm } from "./support.js"
import { checkTeamEndState, expectOrder, HELD, killDuringReview, rewait, sendTheTask } from "./team.support.js"

const { ds, homes } = daemonTestScope(geminiEnvKeys)

/** Agent `a`'s per-request usage events: one per answered request, each the scripted usage at the price. */
const expectPerRequestUsage = (home: string, a: { readonly name: string; readonly session_id: string }, answered: number) => {
  const perRequest = of(events(home, a.session_id), "usage").filter((u) => u["source"] === "request")
  expect(perRequest.length, a.name).toBe(answered)
  for (const u of perRequest) {
    expect(u).toMatchObject({ ...usage, cache_write_tokens: 0, model: MODEL })
    expect(u["cost_usd"]).toBeCloseTo(price, 12)
  }
}

/** Every file under the agent's HOME: none may hold the daemon's key. */
const expectNoKeyInHome = (home: string, sessionId: string) => {
  const agentHome = Path.join(home, "agents", sessionId, "home")
  const files = (Fs.readdirSync(agentHome, { recursive: true }) as Array<string>).filter((f) => Fs.statSync(Path.join(agentHome, f)).isFile())
  for (const f of files) expect(Fs.readFileSync(Path.join(agentHome, f), "utf8"), f).not.toContain(KEY)
}

describe("acp:gemini, the real Gemini CLI (daemon + CLI, bwrap, network off, scripted Gemini API)", () => {
  it("one turn: `send --wait` prints gemini's answer; its requests metered exactly at the price; the key never reaches the sandbox", () =>
    withLlm([], async (llm) => {
      const home = geminiHome(llm, homes)
      await Effect.runPromise(llm.replace([
        { match: { where: byAgent("AGENT=solo") }, reply: withUsage(Reply.text("Hello from Gemini CLI.")), label: "solo" }
      ]))
      ds.track(await startDaemon(home))
      const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "acp:gemini", "--name", "solo", "--instructions", "AGENT=solo Be brief."])
      const sent = await cli(home, ["agent", "send", "--wait", "solo", "Say hello."])
      expect(sent.stderr).toBe("")
      expect(sent.stdout).toBe("Hello from Gemini CLI.\n")
      expect(sent.code).toBe(0)
      const reqs = await Effect.runPromise(llm.modelRequests)
      expect(reqs.map((r) => r.label ?? `unmatched: ${r.path} ${(r.lastUser ?? "").slice(0, 80)}`)).toEqual(["solo"])
      expect([reqs[0]!.kind, reqs[0]!.model, reqs[0]!.path, reqs[0]!.headers["x-goog-api-key"]]).toEqual([
        "gemini",
        MODEL,
        `/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`,
        KEY
      ])
      // Substrat's MCP tools are declared to the model from the first request on.
      expect(JSON.stringify(reqs[0]!.body)).toContain("mcp_substrat_check_inbox")
      expect(reqs[0]!.lastUser).toContain("AGENT=solo Be brief.")
      expect(reqs[0]!.lastUser).toContain("Say hello.")
      expectPerRequestUsage(home, a, 1)
      // Reserved before it left, for the model its path named.
      expect(of(events(home, a.session_id), "usage.reserved").map((r) => r["model"])).toEqual([MODEL])
      expect(of(events(home, a.session_id), "turn.complete").map((t) => t["response"])).toEqual(["Hello from Gemini CLI."])
      expect(of(events(home, a.session_id), "provider.error")).toEqual([])
      expect(JSON.parse(Fs.readFileSync(Path.join(home, "agents", a.session_id, "home", ".gemini/settings.json"), "utf8"))).toMatchObject({
        security: { auth: { selectedType: "gemini-api-key" } },
        telemetry: { enabled: false },
        privacy: { usageStatisticsEnabled: false }
      })
      expectNoKeyInHome(home, a.session_id)
    }), 180_000)

  it("--approve ask: gemini's write_file asks in `substrat inbox` (even with workspace settings and a policy that would approve it; Substrat's own tool unasked); `allow` writes the file, `reject` does not", () =>
    withLlm([], async (llm) => {
      const home = geminiHome(llm, homes)
      const asker = byAgent("AGENT=asker")
      await Effect.runPromise(llm.replace([
        // First one of Substrat's own tools: allowed unasked under every policy.
        { match: { where: (r) => asker(r) && r.lastUser.includes("Write allowed.txt") }, reply: withUsage(Reply.toolCall("mcp_substrat_check_inbox", {})), label: "check-inbox" },
        {
          match: { where: (r) => asker(r) && lastResponse(r) === "mcp_substrat_check_inbox" },
          reply: withUsage(Reply.toolCall("write_file", { file_path: "/workspace/allowed.txt", content: "allowed\n" })),
          label: "write-allowed"
        },
        {
          match: { where: (r) => asker(r) && r.lastUser.includes("Write rejected.txt") },
          reply: withUsage(Reply.toolCall("write_file", { file_path: "/workspace/rejected.txt", content: "rejected\n" })),
          label: "write-rejected"
        },
        { match: { where: (r) => asker(r) && r.lastUser.includes("canceled by the user") }, reply: withUsage(Reply.text("Not written.")), label: "after-reject" },
        { match: { where: asker }, reply: withUsage(Reply.text("Written.")), label: "after-allow" }
      ]))
      ds.track(await startDaemon(home))
      const a = await cliJson<Agent & { readonly workspace_id: string }>(home, [
        "agent", "create", "--provider", "acp:gemini", "--name", "asker", "--approve", "ask", "--instructions", "AGENT=asker Work."
      ])
      const ws = (await cliJson<{ workspaces: ReadonlyArray<{ id: string; root_path: string }> }>(home, ["workspace", "list"])).workspaces
        .find((w) => w.id === a.workspace_id)!
      // What the workspace (a repository, or the agent itself) may hold: Gemini CLI reads it as its
      // workspace settings and policies. Were any of the three honoured, the write would run unasked.
      Fs.mkdirSync(Path.join(ws.root_path, ".gemini/policies"), { recursive: true })
      Fs.writeFileSync(Path.join(ws.root_path, ".gemini/settings.json"), JSON.stringify({ general: { defaultApprovalMode: "auto_edit" }, tools: { allowed: ["write_file"] } }))
      Fs.writeFileSync(Path.join(ws.root_path, ".gemini/policies/allow.toml"), `[[rule]]\ntoolName = "write_file"\ndecision = "allow"\npriority = 999\n`)
      type Item = { readonly id: string; readonly kind: string; readonly agent_name: string; readonly text: string }
      /** The permission item `send`'s turn asks (not one of `not`); a turn that ends unasked fails at once. */
      const asked = (send: ReturnType<typeof spawnCli>, not: ReadonlyArray<string>) => {
        let ended = false
        void send.exit.then(() => (ended = true))
        return waitFor("gemini's permission request in the inbox", async () => {
          const item = (await rpcOnce<{ items: ReadonlyArray<Item> }>(home, "inbox.list")).items.find((i) => i.kind === "permission" && !not.includes(i.id))
          if (item === undefined && ended) throw new Error(`the turn ended without asking: ${send.out()}${send.err()}`)
          return item
        }, 150_000)
      }

      const first = spawnCli(home, ["agent", "send", "--wait", "asker", "Write allowed.txt."])
      const q1 = await asked(first, [])
      expect(q1.agent_name).toBe("asker")
      expect(q1.text).toContain("asker asks permission: ")
      expect(q1.text).toContain("allowed.txt")
      expect(q1.text).toContain("allow_once (Allow)")
      // The turn waits on the human: nothing written yet.
      expect(Fs.existsSync(Path.join(ws.root_path, "allowed.txt"))).toBe(false)
      const allow = await cli(home, ["inbox", "answer", q1.id, "allow"])
      expect(allow.code, allow.stderr).toBe(0)
      expect(await first.exit).toBe(0)
      expect(first.out()).toBe("Written.\n")
      expect(Fs.readFileSync(Path.join(ws.root_path, "allowed.txt"), "utf8")).toBe("allowed\n")

      const second = spawnCli(home, ["agent", "send", "--wait", "asker", "Write rejected.txt."])
      const q2 = await asked(second, [q1.id])
      expect(q2.text).toContain("rejected.txt")
      const reject = await cli(home, ["inbox", "answer", q2.id, "reject"])
      expect(reject.code, reject.stderr).toBe(0)
      expect(await second.exit).toBe(0)
      expect(second.out()).toBe("Not written.\n")
      expect(Fs.existsSync(Path.join(ws.root_path, "rejected.txt"))).toBe(false)

      // Both answers in the agent's log, in order; the conversation's requests and nothing else.
      const log = events(home, a.session_id)
      expect(of(log, "permission.answered").map((x) => [x["item_id"], x["choice"]])).toEqual([[q1.id, "allow"], [q2.id, "reject"]])
      expect(of(log, "tool_call.result").filter((r) => r["tool"] === "permission").map((r) => [r["result"], r["is_error"]]))
        .toEqual([["allow_once (the human)", false], ["reject_once (the human)", true]])
      const reqs = await Effect.runPromise(llm.modelRequests)
      expect(reqs.map((r) => r.label ?? `unmatched: ${(r.lastUser ?? "").slice(0, 80)}`)).toEqual(["check-inbox", "write-allowed", "after-allow", "write-rejected", "after-reject"])
      expect((await rpcOnce<{ items: ReadonlyArray<Item> }>(home, "inbox.list")).items.filter((i) => i.kind === "permission")).toEqual([])
    }), 300_000)

  it("attacks from inside: gemini's own shell curls its forwarder socket — other endpoints, escaping model names, a `?key=`, oversized bodies — all refused, none reaches the upstream or is reserved", async () => {
    const r = await geminiSideDoors(homes, ds.track)
    expect([r.code, r.answer]).toEqual([0, "done\n"])
    // Only the agent's own two model requests reached the upstream.
    expect(r.reachedUpstream).toEqual([
      `POST /v1beta/models/${MODEL}:streamGenerateContent?alt=sse shell`,
      `POST /v1beta/models/${MODEL}:streamGenerateContent?alt=sse done`
    ])
    expect(r.codes).toEqual([...geminiDoors.map(() => "403"), "413", "413"])
    // Each door logged as sent; only the two model requests were reserved.
    expect(r.refused).toEqual(geminiDoors.map((d) => `POST ${d}`))
    expect(r.reserved).toBe(2)
    expect(r.keySeen).toBe(false)
  }, 180_000)

  it("the team: lead spawns coder and reviewer, coder writes with gemini's write_file, reviewer reads it with read_file, `send --wait` prints lead's answer; every request metered", () =>
    withLlm([], async (llm) => {
      const home = geminiHome(llm, homes)
      await Effect.runPromise(llm.replace(geminiTeamScript()))
      await sendTheTask(home, "acp:gemini", ds.track)
      await checkGeminiTeam(home, llm)
    }), 420_000)

  it("the team, kill -9 of the daemon while the reviewer's turn runs: `agent wait` prints the answer after a restart; nothing lost or answered twice", () =>
    withLlm([], async (llm) => {
      const home = geminiHome(llm, homes)
      const request = await killDuringReview(home, llm, "acp:gemini", geminiTeamScript(true), ds.track)
      ds.track(await startDaemon(home))
      await rewait(home, request)
      const reqs = await checkGeminiTeam(home, llm)
      expect(reqs.filter((r) => r.label === HELD).length).toBe(1)
    }), 420_000)
})

/** The name of the function whose response ends the request's contents ("" when none does). */
const lastResponse = (r: { readonly body: unknown }): string => {
  const b = r.body
  const contents = typeof b === "object" && b !== null && "contents" in b && Array.isArray(b.contents) ? (b.contents as ReadonlyArray<unknown>) : []
  const last = contents.at(-1)
  const parts = typeof last === "object" && last !== null && "parts" in last && Array.isArray(last.parts) ? (last.parts as ReadonlyArray<unknown>) : []
  for (const p of parts) {
    if (typeof p === "object" && p !== null && "functionResponse" in p && typeof p.functionResponse === "object" && p.functionResponse !== null && "name" in p.functionResponse) {
      return String(p.functionResponse.name)
    }
  }
  return ""
}

/** The end state of the gemini team: the team's, gemini's own tools, every request metered once. */
const checkGeminiTeam = async (home: string, llm: ScriptedLlm.ScriptedLlmServer) => {
  const { agents, by } = await checkTeamEndState(home)
  expect(agents.map((a) => a.provider)).toEqual(["acp:gemini", "acp:gemini", "acp:gemini"])
  const calls = (name: string) =>
    of(events(home, by[name]!.session_id), "tool_call.invoked").map((c) => (c["tool"] === "permission" ? "permission" : String(c["call_id"]).split("__")[0]))
  // Gemini CLI's own tools (its call ids name them; the tool shows as its title), the write asked and allowed (approve auto).
  expect(calls("coder")).toEqual(["permission", "write_file"])
  expect(calls("reviewer")).toEqual(["read_file"])
  const reqs = await Effect.runPromise(llm.modelRequests)
  expectOrder(reqs.filter((r) => r.label !== HELD))
  // Every request is one of the team's conversation, for the model, with the daemon's key; each
  // agent's answered requests metered one by one at the scripted usage.
  expect(reqs.filter((r) => r.label === undefined).map((r) => `${whose(r)}: ${(r.lastUser ?? "").slice(0, 100)}`)).toEqual([])
  expect(reqs.every((r) => r.kind === "gemini" && r.model === MODEL && r.headers["x-goog-api-key"] === KEY)).toBe(true)
  for (const a of agents) expectPerRequestUsage(home, a, reqs.filter((r) => whose(r) === a.name && r.label !== HELD).length)
  return reqs
}
