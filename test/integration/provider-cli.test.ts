// requires: bwrap
// The CLI providers through the real Orchestrator, each turn a sandboxed process (bwrap, no
// network): eviction/resume of claude agents with one slot, the sandbox wall seen from inside a
// claude agent (Bash), codex parent ↔ child, and the cursor-agent stand-in.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import type { SessionId } from "../../src/domain/ids.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { conversationText, dataOf, eventsOf, stackWith, testSettings, toolResultsOf } from "../e2e/providers.support.js"
import { tmpDir } from "../support/tmpDir.js"

const forwarders = (home: string, llm: ScriptedLlm.ScriptedLlmServer) =>
  Effect.all({
    anthropic: ModelForwarder.serve({ socketPath: Path.join(home, "llm", "a.sock"), api: "anthropic", upstream: llm.baseUrl, credential: null }),
    openai: ModelForwarder.serve({ socketPath: Path.join(home, "llm", "o.sock"), api: "openai", upstream: llm.baseUrl, credential: null })
  }).pipe(Effect.map((f) => ({ anthropic: f.anthropic.socketPath, openai: f.openai.socketPath })))

const turnsOf = (session: SessionId) =>
  Effect.map(eventsOf(session), (log) => ({
    log,
    prompts: dataOf(log, "turn.start").map((t) => t.prompt),
    responses: dataOf(log, "turn.complete").map((t) => t.response),
    errors: dataOf(log, "provider.error")
  }))

describe("CLI providers through the orchestrator (real binaries, bwrap, network off)", () => {
  it.scoped("claude, one slot, three agents: every one is suspended and resumed via --resume, conversations intact", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-evict-")
      const names = ["a", "b", "c"] as const
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: names.flatMap((n) => [1, 2].map((r) => ({
          match: { system: `AGENT=${n}`, lastUser: `round ${r} for ${n}` },
          reply: Reply.text(`${n} answers round ${r}`),
          label: `${n}-${r}`
        })))
      })
      const sockets = yield* forwarders(home, llm)
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const agents = []
        for (const n of names) agents.push(yield* o.createRoot({ name: n, instructions: `AGENT=${n}`, provider: "claude" }))
        for (const r of [1, 2]) {
          for (const a of agents) {
            yield* o.send({ agent: a.id, text: `round ${r} for ${a.name}`, sync: false })
            yield* o.awaitIdle
          }
        }
        const reqs = yield* llm.modelRequests
        // A failed turn explains a missing request: show its provider.error first.
        for (const a of agents) expect({ agent: a.name, errors: (yield* turnsOf(a.session_id)).errors }).toEqual({ agent: a.name, errors: [] })
        expect(reqs.map((r) => r.label)).toEqual(["a-1", "b-1", "c-1", "a-2", "b-2", "c-2"])
        for (const a of agents) {
          const t = yield* turnsOf(a.session_id)
          expect(t.errors).toEqual([])
          expect(t.responses).toEqual([`${a.name} answers round 1`, `${a.name} answers round 2`])
          expect(dataOf(t.log, "suspend.result").length).toBeGreaterThanOrEqual(1)
          expect(dataOf(t.log, "session.restored").length).toBeGreaterThanOrEqual(1)
          // The resumed request carries the first round: Claude's own session, via --resume.
          const second = reqs.find((r) => r.label === `${a.name}-2`)!
          const first = reqs.find((r) => r.label === `${a.name}-1`)!
          expect(conversationText(second)).toContain(`round 1 for ${a.name}`)
          expect(conversationText(second)).toContain(`${a.name} answers round 1`)
          expect(second.headers["x-claude-code-session-id"]).toBe(first.headers["x-claude-code-session-id"])
          // No other agent's conversation leaked in.
          for (const other of names.filter((x) => x !== a.name)) expect(conversationText(second)).not.toContain(`round 1 for ${other}`)
        }
      }).pipe(Effect.provide(stackWith(home, testSettings(sockets), 1)))
    }), { timeout: 180_000 })

  it.scoped("security: from inside a claude agent, Bash cannot read $SUBSTRAT_HOME, reach the network, or call admin methods", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-sec-")
      Fs.writeFileSync(Path.join(home, "secret.txt"), "TOP-SECRET-VALUE")
      const llm = yield* ScriptedLlm.make({ listen: { port: 0 }, script: [] })
      const port = llm.address._tag === "Tcp" ? llm.address.port : 0
      const node = `node -e`
      const netProbe = `${node} "const s=require('net').connect(${port},'127.0.0.1');s.on('connect',()=>{console.log('NET-OPEN');process.exit(0)});s.on('error',e=>{console.log('NET-CLOSED '+e.code)})"; ` +
        `${node} "console.log('NET-IFACES ['+Object.keys(require('os').networkInterfaces()).sort().join(',')+']')"`
      const adminProbe = `${node} "const s=require('net').connect('/run/substrat/agent.sock');let b='';s.on('data',d=>{b+=d;if(b.split('\\\\n').filter(Boolean).length>=2){console.log('ADMIN '+b.trim().split('\\\\n').join(' | '));process.exit(0)}});s.on('end',()=>{console.log('ADMIN '+b.trim());process.exit(0)});` +
        `s.write(JSON.stringify({jsonrpc:'2.0',id:1,method:'agent.list',params:{}})+'\\\\n');s.write(JSON.stringify({jsonrpc:'2.0',id:2,method:'daemon.stop',params:{}})+'\\\\n')"`
      yield* llm.replace([
        { match: { system: "AGENT=sec", lastUser: "ADMIN " }, reply: Reply.text("probes done"), label: "end" },
        { match: { system: "AGENT=sec", lastUser: "NET-" }, reply: Reply.toolCall("Bash", { command: adminProbe, description: "admin" }), label: "admin" },
        { match: { system: "AGENT=sec", lastUser: "HOME-PROBE" }, reply: Reply.toolCall("Bash", { command: netProbe, description: "net" }), label: "net" },
        {
          match: { system: "AGENT=sec", lastUser: "probe" },
          reply: Reply.toolCall("Bash", { command: `echo HOME-PROBE; ls ${home} 2>&1; cat ${home}/secret.txt 2>&1; ls /run/substrat; id -u`, description: "home" }),
          label: "home"
        }
      ])
      const sockets = yield* forwarders(home, llm)
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "sec", instructions: "AGENT=sec", provider: "claude" })
        yield* o.send({ agent: a.id, text: "probe the sandbox", sync: false })
        yield* o.awaitIdle
        const t = yield* turnsOf(a.session_id)
        expect(t.errors).toEqual([])
        expect(t.responses).toEqual(["probes done"])
        const reqs = yield* llm.modelRequests
        expect(reqs.map((r) => r.label)).toEqual(["home", "net", "admin", "end"])
        const homeOut = toolResultsOf(reqs[1]!).join("\n")
        expect(homeOut).toContain("No such file or directory")
        expect(homeOut).not.toContain("TOP-SECRET-VALUE")
        expect(homeOut).toContain("agent.sock") // only the agent socket and the model socket are there
        expect(homeOut).toContain("llm.sock")
        const netOut = toolResultsOf(reqs[2]!).join("\n")
        expect(netOut).toMatch(/NET-CLOSED ECONNREFUSED/)
        // No route out: the sandbox's network namespace has loopback at most (no probe leaves the
        // machine; reaching the host's loopback is the connect test above).
        expect(netOut).toMatch(/NET-IFACES \[(lo)?\]/)
        expect(netOut).not.toContain("NET-OPEN")
        const adminOut = toolResultsOf(reqs[3]!).join("\n")
        expect(adminOut).toContain("ADMIN ")
        expect((adminOut.match(/-32601/g) ?? []).length).toBe(2)
        // …and the daemon state is untouched: still one agent, alive.
        expect((yield* o.list).map((n) => n.name)).toEqual(["sec"])
      }).pipe(Effect.provide(stackWith(home, testSettings(sockets))))
    }), { timeout: 120_000 })

  it.scoped("codex: a codex root spawns a codex child, asks it (sync), gets the reply via exec resume", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-codex-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=cx", lastUser: "Reply from cy" }, reply: Reply.text("cy said pong"), label: "cx-2" },
          { match: { system: "AGENT=cx" }, reply: Reply.toolCall("mcp__substrat__spawn_agent", { name: "cy", instructions: "AGENT=cy answer pings" }), label: "cx-spawn" },
          { match: { system: "AGENT=cx" }, reply: Reply.toolCall("mcp__substrat__send_message", { recipient: "cy", text: "ping?" }), label: "cx-ask" },
          { match: { system: "AGENT=cx" }, reply: Reply.text("asked cy"), label: "cx-1-end" },
          { match: { system: "AGENT=cy" }, reply: Reply.text("pong"), label: "cy" }
        ]
      })
      const sockets = yield* forwarders(home, llm)
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const cx = yield* o.createRoot({ name: "cx", instructions: "AGENT=cx", provider: "codex" })
        yield* o.send({ agent: cx.id, text: "start", sync: false })
        yield* o.awaitIdle
        const t = yield* turnsOf(cx.session_id)
        expect(t.errors).toEqual([])
        expect(t.responses).toEqual(["asked cy", "cy said pong"])
        expect(t.prompts[1]).toMatch(/^Reply from cy \(to message [0-9a-f-]{36}\): pong$/)
        expect(dataOf(t.log, "tool_call.invoked").map((c) => c.tool)).toEqual(["spawn_agent", "send_message"])
        const reqs = yield* llm.modelRequests
        expect(reqs.map((r) => r.label)).toEqual(["cx-spawn", "cx-ask", "cx-1-end", "cy", "cx-2"])
        // exec resume: the last request holds the first turn (same thread).
        const resumed = JSON.stringify((reqs[4]!.body as { input: unknown }).input)
        expect(resumed).toContain("asked cy")
        expect(resumed).toContain("ping?")
      }).pipe(Effect.provide(stackWith(home, testSettings(sockets))))
    }), { timeout: 120_000 })

  it.scoped("cursor-agent (stand-in): MCP tool round trip from .cursor/mcp.json, then --resume keeps the chat", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-cursor-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { reply: Reply.toolCall("mcp__substrat__check_inbox", {}), label: "inbox" },
          { reply: Reply.text("inbox checked"), label: "end-1" },
          { match: { lastUser: "second" }, reply: Reply.text("second answer"), label: "end-2" }
        ]
      })
      const sockets = yield* forwarders(home, llm)
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "cur", instructions: "AGENT=cur", provider: "cursor-agent" })
        yield* o.send({ agent: a.id, text: "first", sync: false })
        yield* o.awaitIdle
        yield* o.send({ agent: a.id, text: "second", sync: false })
        yield* o.awaitIdle
        const t = yield* turnsOf(a.session_id)
        expect(t.errors).toEqual([])
        expect(t.responses).toEqual(["inbox checked", "second answer"])
        expect(dataOf(t.log, "tool_call.invoked").map((c) => c.tool)).toEqual(["check_inbox"])
        const reqs = yield* llm.modelRequests
        expect(reqs.map((r) => r.label)).toEqual(["inbox", "end-1", "end-2"])
        // Instructions (with the tool guidance) open the first prompt; the resumed chat carries it all.
        const last = JSON.stringify(reqs[2]!.body)
        expect(last).toContain("AGENT=cur")
        expect(last).toContain("Every substrat tool returns immediately")
        expect(last).toContain("inbox checked")
        const cfg = JSON.parse(Fs.readFileSync(Path.join(home, "agents", a.session_id, "mcp.json"), "utf8"))
        expect(cfg.mcpServers.substrat.args).toContain("/run/substrat/agent.sock")
      }).pipe(Effect.provide(stackWith(home, testSettings(sockets))))
    }), { timeout: 120_000 })
})
