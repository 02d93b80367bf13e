// The per-turn workspace growth budget on a real sandboxed turn (Claude Code in bwrap, offline
// against a scripted endpoint): the agent's Bash call fills /workspace past
// SUBSTRAT_SANDBOX_WORKSPACE_GROWTH_BYTES; the turn's sandbox is killed and the turn fails with a
// provider.error naming the limit and how to raise it; the daemon stays up and the next turn works.
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

const { ds, homes } = daemonTestScope([
  "SUBSTRAT_ANTHROPIC_UPSTREAM",
  "ANTHROPIC_API_KEY",
  "SUBSTRAT_CLAUDE_BIN",
  "SUBSTRAT_SANDBOX_WORKSPACE_GROWTH_BYTES"
])

const MB = 1024 * 1024
const filler = "mkdir -p grow; i=0; while [ $i -lt 400 ]; do head -c 1000000 /dev/zero > grow/f$i; i=$((i+1)); done; echo FILLED"

describe("workspace growth per turn", () => {
  it("a turn that writes past the budget fails naming the limit; the daemon stays up; the next turn works", () =>
    Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const toolResults = (r: { readonly raw: string }) => (r.raw.match(/"type":"tool_result"/g) ?? []).length
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          {
            match: { system: "AGENT=g", where: (r) => toolResults(r) === 0 && r.raw.includes("fill it") },
            reply: Reply.toolCall("Bash", { command: filler, description: "fill" }),
            label: "fill"
          },
          { match: { system: "AGENT=g", where: (r) => toolResults(r) > 0 }, reply: Reply.text("filled"), label: "after-fill" },
          { match: { system: "AGENT=g" }, reply: Reply.text("second turn fine"), label: "second" }
        ]
      })
      yield* Effect.promise(async () => {
        const home = makeTmpDir("swg-")
        homes.push(home)
        process.env["SUBSTRAT_ANTHROPIC_UPSTREAM"] = llm.baseUrl
        process.env["ANTHROPIC_API_KEY"] = "sk-test-daemon-only"
        process.env["SUBSTRAT_CLAUDE_BIN"] = claudeBin
        process.env["SUBSTRAT_SANDBOX_WORKSPACE_GROWTH_BYTES"] = String(16 * MB)
        const pid = await startDaemon(home)
        ds.track(pid)
        const ws = await cliJson<{ id: string; root_path: string }>(home, ["workspace", "create", "--name", "growth"])
        const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "g", "--workspace", ws.id, "--instructions", "AGENT=g"])
        await cli(home, ["agent", "send", "g", "fill it", "--notify"])
        const err = await waitFor("the first turn's error", () => events(home, a.session_id).find((e) => e.event === "provider.error")?.data, 120_000)
        expect(String(err["message"])).toMatch(/workspace-growth limit \(16777216 bytes\) exceeded: the command grew \/workspace by \d+ bytes and was killed/)
        expect(String(err["message"])).toContain("sandbox.workspace_growth_bytes")
        expect(String(err["message"])).toContain("SUBSTRAT_SANDBOX_WORKSPACE_GROWTH_BYTES")
        // Stopped well before the 400 files of the script.
        expect(Fs.readdirSync(Path.join(ws.root_path, "grow")).length).toBeLessThan(400)
        expect((await Effect.runPromise(llm.requests)).some((r) => r.label === "after-fill")).toBe(false)

        // What the killed turn wrote is recorded like any failed turn's changes (so it can be reverted).
        const diff = await waitFor("the first turn's workspace.diff", () => events(home, a.session_id).find((e) => e.event === "workspace.diff")?.data, 60_000)
        expect((diff["paths"] as ReadonlyArray<{ readonly path: string }>).some((p) => p.path.startsWith("grow/"))).toBe(true)

        // The daemon is up and the agent's next turn completes.
        process.kill(pid, 0)
        await cli(home, ["agent", "send", "g", "are you there", "--notify"])
        await waitFor("the second turn", () =>
          events(home, a.session_id).filter((e) => e.event === "turn.complete").length >= 1 ? true : undefined, 120_000)
        expect((await Effect.runPromise(llm.requests)).some((r) => r.label === "second")).toBe(true)
        // A clean stop: the second turn's history hook (git) is done before the home is removed.
        await cli(home, ["daemon", "stop"])
      })
    }))), 300_000)
})
