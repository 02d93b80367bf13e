// A budget breach parks the work instead of failing it (the real daemon and CLI; an `openai` root
// against the scripted Chat Completions endpoint on loopback, a 1,500-token budget): the root's
// first model request spends it (1,600 tokens), the next one is refused, and the turn is parked —
// no answer to USER, `agent send --wait` says on stderr that the request waits on the human (the
// budget's inbox id) and keeps waiting. `budget set` higher re-runs the interrupted turn (the same
// message, with a note that it was paused) and --wait prints its answer, the only one USER got.
// Stopping the subtree instead (`inbox answer <id> stop`) ends the request with one failure.
// A kill -9 of the daemon while the turn is parked keeps it parked: after the restart nobody was
// answered, the budget item is still open, and the raise re-runs it as it would have before.
import { describe, expect, it } from "vitest"
import type { ScriptEntry } from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, isAlive, rpcOnce, spawnCli, startDaemon, waitFor } from "../integration/daemon.support.js"
import { agentEvents, dataNamed, daemonTestScope, withLlm } from "./support.js"

type Item = { readonly id: string; readonly kind: string; readonly agent_name: string; readonly text: string }

const envKeys = ["SUBSTRAT_OPENAI_BASE_URL", "SUBSTRAT_OPENAI_API_KEY", "SUBSTRAT_OPENAI_MODEL", "OPENAI_API_KEY", "OPENROUTER_API_KEY"]
const { ds, homes } = daemonTestScope(envKeys)

const script: ReadonlyArray<ScriptEntry> = [
  { match: { system: "AGENT=lead", lastUser: "was paused" }, reply: { _tag: "Message", content: [{ type: "text", text: "Done after the raise." }], usage: { input_tokens: 50, output_tokens: 5 } }, label: "rerun" },
  {
    match: { system: "AGENT=lead", lastUser: "Do the work" },
    reply: { _tag: "Message", content: [{ type: "tool_use", name: "check_inbox", input: {} }], usage: { input_tokens: 1000, output_tokens: 600 } },
    label: "first"
  }
]

const setUp = async (baseUrl: string) => {
  const home = makeTmpDir("sbp-")
  homes.push(home)
  for (const k of envKeys) delete process.env[k]
  process.env["SUBSTRAT_OPENAI_BASE_URL"] = `${baseUrl}/v1`
  process.env["SUBSTRAT_OPENAI_API_KEY"] = "sk-openai-budget-park"
  const pid = await startDaemon(home)
  ds.track(pid)
  const lead = await cliJson<Agent>(home, ["agent", "create", "--provider", "openai:e2e-model", "--name", "lead", "--instructions", "AGENT=lead You lead.", "--budget-tokens", "1500"])
  return { home, lead, pid }
}

const breach = (home: string) =>
  waitFor("the budget item", async () => (await rpcOnce<{ items: ReadonlyArray<Item> }>(home, "inbox.list")).items.find((i) => i.kind === "budget"))

/** What lead sent USER: [kind, text]. */
const toUser = (home: string, sid: string) =>
  dataNamed(agentEvents(home, sid), "message.enqueued").filter((m) => m["recipient"] === "USER").map((m) => [m["kind"], m["payload"]])

describe("a budget breach parks the turn", () => {
  it("parked: no answer to USER; --wait names the budget item; budget set re-runs the turn and --wait prints its answer", () =>
    withLlm(script, async (llm) => {
        const { home, lead } = await setUp(llm.baseUrl)
        const waiting = spawnCli(home, ["agent", "send", "--wait", "lead", "Do the work"])
        const item = await breach(home)
        expect(item.agent_name).toBe("lead")
        await waitFor("the stderr note", () => (waiting.err().includes(item.id) ? true : undefined))
        expect(waiting.err()).toContain(`waiting on you: lead's budget is spent (inbox item ${item.id})`)
        await waitFor("the turn's end", () => (dataNamed(agentEvents(home, lead.session_id), "provider.error").length === 1 ? true : undefined))
        // Parked, not failed: nothing went to USER, the request is still open.
        expect(toUser(home, lead.session_id)).toEqual([])
        expect(waiting.out()).toBe("")
        const show = await cliJson<{ exhausted: string | null }>(home, ["budget", "show", "lead"])
        expect(show.exhausted).toMatch(/token budget spent/)

        expect((await cli(home, ["budget", "set", "lead", "--tokens", "100000"])).code).toBe(0)
        expect(await waiting.exit).toBe(0)
        expect(waiting.out()).toBe("Done after the raise.\n")
        expect(toUser(home, lead.session_id)).toEqual([["response", "Done after the raise."]])
        // The same message again, with the note first.
        const prompts = dataNamed(agentEvents(home, lead.session_id), "turn.start").map((d) => String(d["prompt"]))
        expect(prompts).toHaveLength(2)
        expect(prompts[1]).toMatch(/^\[substrat\] Your previous turn was paused when a budget ran out \(this agent's token budget spent/)
        expect(prompts[1]).toContain(prompts[0])
      }), 180_000)

  it("stop instead of a raise: the request ends with one failure", () =>
    withLlm(script, async (llm) => {
      const { home, lead } = await setUp(llm.baseUrl)
      const waiting = spawnCli(home, ["agent", "send", "--wait", "lead", "Do the work"])
      const item = await breach(home)
      await waitFor("the turn's end", () => (dataNamed(agentEvents(home, lead.session_id), "provider.error").length === 1 ? true : undefined))
      expect(toUser(home, lead.session_id)).toEqual([])
      expect((await cli(home, ["inbox", "answer", item.id, "stop"])).code).toBe(0)
      expect(await waiting.exit).toBe(7)
      const sent = toUser(home, lead.session_id)
      expect(sent).toHaveLength(1)
      expect(sent[0]![0]).toBe("response")
      expect(String(sent[0]![1])).toMatch(/^\[error\] lead was terminated/)
    }), 180_000)

  it("kill -9 while parked: after the restart still parked, nobody answered; the raise re-runs the turn", () =>
    withLlm(script, async (llm) => {
      const { home, lead, pid } = await setUp(llm.baseUrl)
      const waiting = spawnCli(home, ["agent", "send", "--wait", "lead", "Do the work"])
      const item = await breach(home)
      const errors = await waitFor("the turn's end", () => {
        const e = dataNamed(agentEvents(home, lead.session_id), "provider.error")
        return e.length === 1 ? e : undefined
      })
      // Logged as parked, with the reason the re-run's note gives.
      expect(errors[0]!["parked"]).toMatch(/token budget spent/)
      process.kill(pid, "SIGKILL")
      await waitFor("daemon gone", () => (isAlive(pid) ? undefined : true), 10_000)
      expect(await waiting.exit).toBe(3)
      const again = /wait again with: substrat agent wait lead ([0-9a-f-]{36})\n/.exec(waiting.err())
      expect(again, waiting.err()).not.toBeNull()

      ds.track(await startDaemon(home))
      // Recovery is done once the daemon answers: the turn is held (its message waits, one turn
      // queued behind the gate), and no error went to USER.
      const shown = await cliJson<{ inbox: number; queued_turns: number }>(home, ["agent", "inspect", "lead"])
      expect({ inbox: shown.inbox, queued_turns: shown.queued_turns }).toEqual({ inbox: 1, queued_turns: 1 })
      expect(toUser(home, lead.session_id)).toEqual([])
      const items = (await cliJson<{ items: ReadonlyArray<Item> }>(home, ["inbox"])).items
      expect(items.filter((i) => i.kind === "budget").map((i) => i.id)).toEqual([item.id])
      expect(dataNamed(agentEvents(home, lead.session_id), "turn.start")).toHaveLength(1)

      expect((await cli(home, ["budget", "set", "lead", "--tokens", "100000"])).code).toBe(0)
      const r = await cli(home, ["agent", "wait", "lead", again![1]!])
      expect(r.stderr).toBe("")
      expect(r.code).toBe(0)
      expect(r.stdout).toBe("Done after the raise.\n")
      expect(toUser(home, lead.session_id)).toEqual([["response", "Done after the raise."]])
      const prompts = dataNamed(agentEvents(home, lead.session_id), "turn.start").map((d) => String(d["prompt"]))
      expect(prompts).toHaveLength(2)
      expect(prompts[1]).toMatch(/^\[substrat\] Your previous turn was paused when a budget ran out \(this agent's token budget spent/)
      expect(prompts[1]).toContain("Do the work")
    }), 180_000)
})
