// requires: bwrap
// The acp provider through the real Orchestrator with the in-repo ACP test agent
// (test/fixtures/acp-agent.ts, bundled here) in the agent's bwrap sandbox, network off: the
// session/update mapping, permissions, fs confinement (attacks), terminals, cancel and crash
// mid-turn, malformed output, and session/load across evictions.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import type { AgentId, SessionId } from "../../src/domain/ids.js"
import type { CliSettingsShape } from "../../src/provider/cli/CliSettings.js"
import { dataOf, eventsOf, stackWith, testSettings } from "../e2e/providers.support.js"
import { bundleAcpAgent } from "../support/acpAgent.js"
import { tmpDir } from "../support/tmpDir.js"

const bundleAgent = bundleAcpAgent

const setup = (prefix: string, acp?: CliSettingsShape["acp"], slots = 4) =>
  Effect.gen(function*() {
    const home = yield* tmpDir(prefix)
    const agent = bundleAgent(home)
    const settings: CliSettingsShape = { ...testSettings({ anthropic: null, openai: null }), ...(acp === undefined ? {} : { acp }) }
    return { home, provider: `acp:/usr/bin/node ${agent}`, layer: stackWith(home, settings, slots) }
  })

const turns = (session: SessionId) =>
  Effect.map(eventsOf(session), (log) => ({
    log,
    responses: dataOf(log, "turn.complete").map((t) => t.response),
    errors: dataOf(log, "provider.error").map((e) => e.message),
    tools: dataOf(log, "tool_call.result").map((r) => ({ tool: r.tool, result: r.result, is_error: r.is_error, source: r.source }))
  }))

const say = (agent: AgentId, text: string) =>
  Effect.gen(function*() {
    const o = yield* Orchestrator
    yield* o.send({ agent, text, sync: false })
    yield* o.awaitIdle
  })

describe("acp provider (test ACP agent, bwrap, network off)", () => {
  it.scoped("maps chunks, tool calls, plans, auto permissions, fs and terminals; the MCP server is passed in session/new", () =>
    Effect.gen(function*() {
      const { home, provider, layer } = yield* setup("acp-map-")
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "a", instructions: "AGENT=a", provider })
        for (const c of ["CHUNKS", "TOOL", "PLAN", "PERMIT", "WRITE /workspace/sub/out.txt written by acp", "READ /workspace/sub/out.txt", "TERM echo hi; ls /workspace/sub; exit 4", "HISTORY"]) {
          yield* say(a.id, c)
        }
        const t = yield* turns(a.session_id)
        expect(t.errors).toEqual([])
        expect(t.responses.slice(0, 7)).toEqual([
          "Hello world",
          "tools done",
          "planned",
          "permission: yes",
          "wrote",
          "written by acp",
          "exit 4: hi\nout.txt"
        ])
        expect(t.responses[7]).toMatch(/^prompts so far: 8; mcp: substrat: \S+node .* --socket \/run\/substrat\/agent\.sock$/)
        // A call announced with an empty input whose input comes only in its permission request
        // (as Qwen Code does): the ⚙ line has the input; the request's content is not its result.
        yield* say(a.id, "ASKED")
        expect((yield* turns(a.session_id)).responses.at(-1)).toBe("asked: yes")
        const invoked = dataOf(yield* eventsOf(a.session_id), "tool_call.invoked").filter((c) => c.call_id === "q1")
        expect(invoked.map((c) => [c.tool, c.arguments])).toEqual([["Write /workspace/q.txt", { file_path: "/workspace/q.txt", content: "hi" }]])
        expect(t.tools).toEqual([
          { tool: "Read notes.txt", result: { lines: 3 }, is_error: false, source: "provider" },
          { tool: "Run make", result: "make: no rule", is_error: true, source: "provider" },
          { tool: "plan", result: "[x] read the code\n[ ] write the fix", is_error: false, source: "provider" },
          { tool: "permission", result: "allow_once (policy auto)", is_error: false, source: "provider" }
        ])
        // The instructions (with the tool guidance) opened the first prompt only.
        const prompts = JSON.parse(Fs.readFileSync(Path.join(home, "agents", a.session_id, "home", "acp-sessions.json"), "utf8")) as Record<string, { prompts: Array<string> }>
        const ps = Object.values(prompts)[0]!.prompts
        expect(ps[0]).toContain("AGENT=a")
        expect(ps[0]).toContain("substrat")
        expect(ps[1]).toMatch(/\):\nTOOL$/)
        expect(ps[1]).not.toContain("AGENT=a")
        expect(Fs.readFileSync(Path.join(home, "agents", a.session_id, "workspace", "sub", "out.txt"), "utf8")).toBe("written by acp")
      }).pipe(Effect.provide(layer))
    }), { timeout: 120_000 })

  it.scoped("attack: fs requests outside the workspace, by any spelling or through a planted link, are refused with a clear error", () =>
    Effect.gen(function*() {
      const { home, provider, layer } = yield* setup("acp-fs-")
      const secret = Path.join(home, "secret.txt")
      Fs.writeFileSync(secret, "TOP-SECRET")
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "fs", instructions: "AGENT=fs", provider })
        const ws = Path.join(home, "agents", a.session_id, "workspace")
        yield* say(a.id, "CHUNKS")
        Fs.symlinkSync(home, Path.join(ws, "link"))
        Fs.symlinkSync(secret, Path.join(ws, "secret-link"))
        const attacks = [
          `READ ${secret}`,
          `READ /workspace/../${secret}`,
          "READ /workspace/link/secret.txt",
          "READ /workspace/secret-link",
          "READ workspace/x",
          "READ /workspace//link/secret.txt",
          "READ /home/agent/acp-sessions.json",
          `WRITE /workspace/../../${home}/owned.txt pwned`,
          "WRITE /workspace/link/owned.txt pwned",
          "WRITE /workspace/./x pwned"
        ]
        for (const c of attacks) yield* say(a.id, c)
        const t = yield* turns(a.session_id)
        expect(t.errors).toEqual([])
        const answers = t.responses.slice(1)
        expect(answers.length).toBe(attacks.length)
        for (const [i, r] of answers.entries()) {
          expect({ attack: attacks[i], r }).toEqual({ attack: attacks[i], r: expect.stringMatching(/^error: refused: /) })
        }
        expect(Fs.readFileSync(secret, "utf8")).toBe("TOP-SECRET")
        expect(Fs.existsSync(Path.join(home, "owned.txt"))).toBe(false)
        expect(Fs.lstatSync(Path.join(ws, "secret-link")).isSymbolicLink()).toBe(true)
        expect(Fs.existsSync(Path.join(ws, "x"))).toBe(false)
        // Writing a link inside the workspace replaces the link; the file it pointed to is untouched.
        yield* say(a.id, "WRITE /workspace/secret-link replaced")
        expect((yield* turns(a.session_id)).responses.at(-1)).toBe("wrote")
        expect(Fs.lstatSync(Path.join(ws, "secret-link")).isFile()).toBe(true)
        expect(Fs.readFileSync(secret, "utf8")).toBe("TOP-SECRET")
      }).pipe(Effect.provide(layer))
    }), { timeout: 120_000 })

  it.scopedLive("permission policy reject; cancel mid-turn; a crash mid-turn and malformed output fail the turn clearly, the next turn runs", () =>
    Effect.gen(function*() {
      const { home, provider, layer } = yield* setup("acp-fail-", { approve: "reject" })
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "f", instructions: "AGENT=f", provider })
        yield* say(a.id, "PERMIT")
        // Cancel mid-turn: the turn is stopped while the agent waits.
        yield* o.send({ agent: a.id, text: "HANG", sync: false })
        const hanging = yield* Effect.fork(o.awaitIdle)
        const kept = Path.join(home, "agents", a.session_id, "home", "acp-sessions.json")
        for (let i = 0; i < 400 && !(Fs.existsSync(kept) && Fs.readFileSync(kept, "utf8").includes("HANG")); i++) yield* Effect.sleep("50 millis")
        yield* o.stopTurn(a.id, "stopped by the test")
        yield* Fiber.join(hanging)
        yield* say(a.id, "CRASH")
        yield* say(a.id, "HISTORY")
        yield* say(a.id, "GARBAGE")
        yield* say(a.id, "BADUPDATE")
        yield* say(a.id, "HUGE 5000000")
        yield* say(a.id, "CHUNKS")
        const t = yield* turns(a.session_id)
        expect(t.tools[0]).toEqual({ tool: "permission", result: "reject_once (policy reject)", is_error: true, source: "provider" })
        // After the crash a new process continued the same session (session/load): 4 prompts so far.
        // Malformed lines are answered with a parse error and ignored; a line past the limit fails the turn.
        expect(t.responses).toEqual([
          "permission: no",
          expect.stringMatching(/^prompts so far: 4;/),
          "after garbage",
          "after bad update",
          "Hello world"
        ])
        expect(t.errors).toEqual([
          "stopped by the test",
          "ACP turn failed: the ACP agent process exited with code 3; stderr: acp-test-agent: crashing on purpose",
          expect.stringMatching(/^ACP turn failed: .*4194304 byte limit/)
        ])
      }).pipe(Effect.provide(layer))
    }), { timeout: 120_000 })

  it.scoped("one slot, two agents: each process is released on eviction and the next one continues its session via session/load", () =>
    Effect.gen(function*() {
      const { provider, layer } = yield* setup("acp-evict-", undefined, 1)
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "a", instructions: "AGENT=a", provider })
        const b = yield* o.createRoot({ name: "b", instructions: "AGENT=b", provider })
        for (const r of [1, 2]) {
          yield* say(a.id, `round ${r}`)
          yield* say(b.id, `round ${r}`)
        }
        yield* say(a.id, "HISTORY")
        const ta = yield* turns(a.session_id)
        expect(ta.errors).toEqual([])
        expect(ta.responses[2]).toMatch(/^prompts so far: 3;/)
        expect(dataOf(ta.log, "suspend.result").length).toBeGreaterThanOrEqual(1)
        const tb = yield* turns(b.session_id)
        expect(tb.responses[1]).toMatch(/^echo: Message from USER .*\nround 2$/s)
      }).pipe(Effect.provide(layer))
    }), { timeout: 120_000 })
})
