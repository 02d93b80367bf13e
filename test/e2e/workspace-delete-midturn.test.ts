// `workspace delete --force` while a sandboxed agent (real Claude Code in bwrap, offline
// against a scripted endpoint) is mid-turn in it: the turn is stopped first (it ends as failed,
// its sandbox is gone), then the workspace is deleted; the agent's next turn fails with a clear
// error naming the deleted workspace — not a SandboxPathError about a missing root.
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, startDaemon, waitFor } from "../integration/daemon.support.js"
import { claudeBin, daemonTestScope } from "./support.js"

type Entry = { readonly event: string; readonly data: Record<string, unknown> }
const events = (home: string, sid: string): ReadonlyArray<Entry> =>
  Fs.readFileSync(Path.join(home, "agents", sid, "events.jsonl"), "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Entry)
const errorsOf = (home: string, sid: string) => events(home, sid).filter((e) => e.event === "provider.error").map((e) => e.data)

const { ds, homes } = daemonTestScope(["SUBSTRAT_ANTHROPIC_UPSTREAM", "ANTHROPIC_API_KEY", "SUBSTRAT_CLAUDE_BIN"])

describe("workspace delete --force mid-turn", () => {
  it("stops the agent's turn first, deletes, and the next turn fails with a clear error", () =>
    Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [{ match: { system: "AGENT=w" }, reply: Reply.text("never seen"), delayMs: 600_000, label: "hang" }]
      })
      yield* Effect.promise(async () => {
        const home = makeTmpDir("swd-")
        homes.push(home)
        process.env["SUBSTRAT_ANTHROPIC_UPSTREAM"] = llm.baseUrl
        process.env["ANTHROPIC_API_KEY"] = "sk-test-daemon-only"
        process.env["SUBSTRAT_CLAUDE_BIN"] = claudeBin
        const pid = await startDaemon(home)
        ds.track(pid)
        const ws = await cliJson<{ id: string; root_path: string }>(home, ["workspace", "create", "--name", "doomed"])
        const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "w", "--workspace", ws.id, "--instructions", "AGENT=w"])
        await cli(home, ["agent", "send", "w", "work on it", "--notify"])
        await Effect.runPromise(llm.awaitRequests(1, (r) => r.label === "hang"))
        expect(events(home, a.session_id).filter((e) => e.event === "turn.start").length).toBe(1)

        const del = await cliJson<{ deleted: boolean }>(home, ["workspace", "delete", ws.id, "--force"])
        expect(del.deleted).toBe(true)
        expect(Fs.existsSync(ws.root_path)).toBe(false)
        // The running turn ended before the delete answered: failed, saying why.
        const first = errorsOf(home, a.session_id)
        expect(first.length).toBe(1)
        expect(first[0]).toMatchObject({ reason: "TurnStopped" })
        expect(String(first[0]!["message"])).toContain(`workspace ${ws.id} is being deleted`)
        const list = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
        expect(list.agents.find((x) => x.id === a.id)?.state).toBe("idle")

        // The next turn: a clear error about the deleted workspace.
        await cli(home, ["agent", "send", "w", "again", "--notify"])
        const second = await waitFor("second turn's error", () => {
          const es = errorsOf(home, a.session_id)
          return es.length >= 2 ? es[1] : undefined
        }, 60_000)
        expect(String(second["message"])).toContain(`workspace ${ws.id} no longer exists`)
        expect(String(second["reason"])).not.toBe("SandboxPathError")
        expect(String(second["message"])).not.toContain("does not exist")
      })
    }))), 180_000)
})
