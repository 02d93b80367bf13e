// requires: bwrap
// End to end through the REAL daemon process and CLI (real `claude` binary, bwrap, network off;
// the daemon's model forwarder relays to a scripted Anthropic endpoint, SUBSTRAT_ANTHROPIC_UPSTREAM):
// - eviction: `--slots 1` and three claude roots, each talked to twice in turn — every agent is
//   suspended and restored (Claude `--resume` of its own session), conversations stay separate;
// - security: the scripted model makes a claude agent use Bash against the sandbox wall (read
//   $SUBSTRAT_HOME, connect to a host listener, call admin methods on its agent socket) — all fail,
//   and the daemon and its tree are untouched afterwards.
import { Duration, Effect } from "effect"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, isAlive, startDaemon, waitQuiet } from "../integration/daemon.support.js"
import { makeTmpDir } from "../support/tmp.js"
import { conversationText, toolResultsOf } from "./providers.support.js"
import { claudeBin, daemonTestScope } from "./support.js"

type Entry = { readonly event: string; readonly data: Record<string, unknown> }
const events = (home: string, sid: string): ReadonlyArray<Entry> =>
  Fs.readFileSync(Path.join(home, "agents", sid, "events.jsonl"), "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Entry)
const of = (es: ReadonlyArray<Entry>, name: string) => es.filter((e) => e.event === name).map((e) => e.data)

const withLlm = async <A>(script: ReadonlyArray<ScriptedLlm.ScriptEntry>, f: (llm: ScriptedLlm.ScriptedLlmServer) => Promise<A>): Promise<A> =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(ScriptedLlm.make({ listen: { port: 0 }, script }), (llm) => Effect.promise(() => f(llm)))))

/** Wait for the endpoint to have recorded a request with this label (bounded, so a stuck run fails). */
const awaitLabel = (llm: ScriptedLlm.ScriptedLlmServer, label: string) =>
  Effect.runPromise(
    llm.awaitRequests(1, (r) => r.label === label).pipe(
      Effect.timeoutFail({ duration: Duration.seconds(60), onTimeout: () => new Error(`no request labelled ${label}`) })
    )
  )

const envKeys = ["SUBSTRAT_ANTHROPIC_UPSTREAM", "ANTHROPIC_API_KEY", "SUBSTRAT_CLAUDE_BIN", "SUBSTRAT_SLOTS"]
const { ds, homes } = daemonTestScope(envKeys)

const setup = (llm: ScriptedLlm.ScriptedLlmServer, prefix: string) => {
  const home = makeTmpDir(prefix) // short: agent socket paths must fit in sun_path
  homes.push(home)
  process.env["SUBSTRAT_ANTHROPIC_UPSTREAM"] = llm.baseUrl
  process.env["ANTHROPIC_API_KEY"] = "sk-test-daemon-only"
  process.env["SUBSTRAT_CLAUDE_BIN"] = claudeBin
  delete process.env["SUBSTRAT_SLOTS"]
  return home
}

// Markers unique to one agent's conversation (question and answer per round).
const question = (n: string, r: number) => `zq-${n}-question-${r}`
const answer = (n: string, r: number) => `zq-${n}-answer-${r}`

describe("daemon + real Claude Code agents: eviction and the sandbox wall", () => {
  const names = ["ea", "eb", "ec"] as const

  it("eviction: --slots 1, three claude agents talked to in turn; each is suspended and resumed (--resume of its own session), conversations separate", () =>
    withLlm(
      names.flatMap((n) => [1, 2].map((r) => ({
        match: { system: `AGENT=${n}`, lastUser: question(n, r) },
        reply: Reply.text(answer(n, r)),
        label: `${n}-${r}`
      }))),
      async (llm) => {
        const home = setup(llm, "sev-")
        const pid = await startDaemon(home, ["--slots", "1"])
        ds.track(pid)
        const status = await cliJson<{ slots: number }>(home, ["daemon", "status"])
        expect(status.slots).toBe(1)
        const agents: Array<Agent> = []
        for (const n of names) {
          agents.push(await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", n, "--instructions", `AGENT=${n} You answer.`]))
        }
        // One at a time: with one slot, each turn evicts the agent that ran before it.
        for (const r of [1, 2]) {
          for (const n of names) {
            expect((await cli(home, ["agent", "send", n, question(n, r)])).code).toBe(0)
            await awaitLabel(llm, `${n}-${r}`)
            await waitQuiet(home)
          }
        }

        const reqs = await Effect.runPromise(llm.modelRequests)
        expect(reqs.map((r) => r.label)).toEqual(["ea-1", "eb-1", "ec-1", "ea-2", "eb-2", "ec-2"])
        const sessionIds = new Set<unknown>()
        for (const a of agents) {
          const log = events(home, a.session_id)
          expect(of(log, "provider.error")).toEqual([])
          expect(of(log, "turn.complete").map((d) => d["response"])).toEqual([answer(a.name, 1), answer(a.name, 2)])
          expect(of(log, "suspend.result").length).toBeGreaterThanOrEqual(1)
          expect(of(log, "session.restored").length).toBeGreaterThanOrEqual(1)
          expect(of(log, "session.restored").every((d) => d["provider"] === "claude")).toBe(true)
          const first = reqs.find((r) => r.label === `${a.name}-1`)!
          const second = reqs.find((r) => r.label === `${a.name}-2`)!
          // The resumed request carries this agent's own first round…
          const resumed = conversationText(second)
          expect(resumed).toContain(question(a.name, 1))
          expect(resumed).toContain(answer(a.name, 1))
          expect(resumed).toContain(question(a.name, 2))
          // …and nothing of any other agent's conversation.
          for (const other of names.filter((x) => x !== a.name)) {
            for (const r of [1, 2]) {
              expect(resumed).not.toContain(question(other, r))
              expect(resumed).not.toContain(answer(other, r))
              expect(conversationText(first)).not.toContain(question(other, r))
            }
          }
          // Same Claude session across the eviction: --resume, not a fresh session.
          const sid = first.headers["x-claude-code-session-id"]
          expect(typeof sid).toBe("string")
          expect(second.headers["x-claude-code-session-id"]).toBe(sid)
          sessionIds.add(sid)
        }
        expect(sessionIds.size).toBe(3)
        expect(reqs.every((r) => r.headers["x-api-key"] === "sk-test-daemon-only")).toBe(true)
        expect(isAlive(pid)).toBe(true)
      }
    ), 120_000)

  it("security: Bash inside a claude agent cannot read $SUBSTRAT_HOME, connect to a host listener, or call admin methods on its agent socket; the daemon and tree survive", async () => {
    // A host listener on loopback: the sandbox (own network namespace) must not reach it.
    let hostConnections = 0
    const listener = Net.createServer((s) => {
      hostConnections++
      s.destroy()
    })
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve))
    const port = (listener.address() as Net.AddressInfo).port
    try {
      await withLlm([], async (llm) => {
        const home = setup(llm, "ssc-")
        Fs.writeFileSync(Path.join(home, "secret.txt"), "TOP-SECRET-VALUE")
        const node = `node -e`
        const netProbe = `${node} "const s=require('net').connect(${port},'127.0.0.1');s.on('connect',()=>{console.log('NET-OPEN');process.exit(0)});s.on('error',e=>{console.log('NET-CLOSED '+e.code)})"; ` +
          `${node} "console.log('NET-IFACES ['+Object.keys(require('os').networkInterfaces()).sort().join(',')+']')"`
        const adminProbe = `${node} "const s=require('net').connect('/run/substrat/agent.sock');let b='';s.on('data',d=>{b+=d;if(b.split('\\\\n').filter(Boolean).length>=2){console.log('ADMIN '+b.trim().split('\\\\n').join(' | '));process.exit(0)}});s.on('end',()=>{console.log('ADMIN '+b.trim());process.exit(0)});` +
          `s.write(JSON.stringify({jsonrpc:'2.0',id:1,method:'agent.list',params:{}})+'\\\\n');s.write(JSON.stringify({jsonrpc:'2.0',id:2,method:'daemon.stop',params:{}})+'\\\\n')"`
        await Effect.runPromise(llm.replace([
          { match: { system: "AGENT=sec", lastUser: "ADMIN " }, reply: Reply.text("probes done"), label: "end" },
          { match: { system: "AGENT=sec", lastUser: "NET-" }, reply: Reply.toolCall("Bash", { command: adminProbe, description: "admin" }), label: "admin" },
          { match: { system: "AGENT=sec", lastUser: "HOME-PROBE" }, reply: Reply.toolCall("Bash", { command: netProbe, description: "net" }), label: "net" },
          {
            match: { system: "AGENT=sec", lastUser: "probe" },
            reply: Reply.toolCall("Bash", { command: `echo HOME-PROBE; ls ${home} 2>&1; cat ${home}/secret.txt 2>&1; ls /run/substrat`, description: "home" }),
            label: "home"
          }
        ]))
        const pid = await startDaemon(home)
        ds.track(pid)
        const sec = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "sec", "--instructions", "AGENT=sec You probe."])
        expect((await cli(home, ["agent", "send", "sec", "probe the sandbox"])).code).toBe(0)
        await awaitLabel(llm, "end")
        const agents = await waitQuiet(home)

        const log = events(home, sec.session_id)
        expect(of(log, "provider.error")).toEqual([])
        expect(of(log, "turn.complete").map((d) => d["response"])).toEqual(["probes done"])
        const reqs = await Effect.runPromise(llm.modelRequests)
        expect(reqs.map((r) => r.label)).toEqual(["home", "net", "admin", "end"])

        // $SUBSTRAT_HOME is not in the sandbox; only the agent and model sockets are under /run/substrat.
        const homeOut = toolResultsOf(reqs[1]!).join("\n")
        expect(homeOut).toContain("HOME-PROBE")
        expect(homeOut).toContain(`cat: ${home}/secret.txt: No such file or directory`)
        expect(homeOut).not.toContain("TOP-SECRET-VALUE")
        expect(homeOut).toContain("agent.sock")
        expect(homeOut).toContain("llm.sock")

        // No network: neither the host's loopback listener nor the outside.
        const netOut = toolResultsOf(reqs[2]!).join("\n")
        expect(netOut).toMatch(/NET-CLOSED ECONNREFUSED/)
        // No route out: the sandbox's network namespace has loopback at most (no probe leaves the
        // machine; reaching the host's loopback is the connect test above).
        expect(netOut).toMatch(/NET-IFACES \[(lo)?\]/)
        expect(netOut).not.toContain("NET-OPEN")
        expect(hostConnections).toBe(0)

        // The agent socket answers admin methods with "method not found".
        const adminOut = toolResultsOf(reqs[3]!).join("\n")
        expect(adminOut).toContain("ADMIN ")
        expect((adminOut.match(/-32601/g) ?? []).length).toBe(2)

        // The daemon is still running, with the same tree.
        expect(isAlive(pid)).toBe(true)
        expect(agents.map((a) => [a.id, a.name, a.parent_id])).toEqual([[sec.id, "sec", null]])
        const status = await cli(home, ["daemon", "status"])
        expect(status.code).toBe(0)
        const { agents: list } = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
        expect(list.map((a) => [a.id, a.name, a.state])).toEqual([[sec.id, "sec", "idle"]])
        expect(of(log, "agent.terminated")).toEqual([])
      })
    } finally {
      await new Promise<void>((resolve) => listener.close(() => resolve()))
    }
  }, 120_000)
})
