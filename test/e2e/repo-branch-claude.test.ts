// requires: bwrap, git
// A `branch` child with the REAL claude binary, sandboxed, against the scripted Anthropic
// endpoint, on a repository nobody here wrote (test/support/foreignRepo.ts): lead (made with
// `agent create --repo`) spawns coder with `workspace: "branch"` and asks it to write version.ts;
// coder writes it with claude's Write tool in its own clone; its answer puts its branch in lead's
// merge queue, which merges it once lead's turn is over: substrat/lead in the user's repository
// carries coder's turn commit with its trailers, lead's clone has the file, lead gets the SYSTEM
// note naming the commit, the user's checkout is untouched. Run twice: without a check, and with
// `--check` (run in a sandbox on the merged tree). With SUBSTRAT_FIGURES set, the time from
// coder's answer to the merged commit of each run is written there.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import { type Match, Reply, type Reply as ReplyT, type ScriptEntry } from "../../src/testing/ScriptedLlm.js"
import { cli, cliJson, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { gitIn, makeForeignRepo, userState } from "../support/foreignRepo.js"
import { agentEvents, claudeMeteredHome, claudeMeterEnvKeys, dataNamed, daemonTestScope, withLlm } from "./support.js"
import type { AgentWs } from "./team.support.js"

const { ds, homes } = daemonTestScope(claudeMeterEnvKeys)
const usage = { input_tokens: 10, output_tokens: 2, cache_read_tokens: 0, cache_write_tokens: 0 }
const LEAD = "You lead one coder on a branch"
const FILE = "export const version = \"1.2.3\"\n"
const FINAL = "coder wrote version.ts on its branch."

const script = (): Array<ScriptEntry> => {
  const e = (label: string, match: Match, reply: ReplyT): ScriptEntry => ({ match, reply: reply._tag === "Message" ? { ...reply, usage } : reply, label })
  return [
    e("lead-final", { system: LEAD, lastUser: "Reply from coder" }, Reply.text(FINAL)),
    e("lead-merged", { system: LEAD, lastUser: "Merged coder's branch" }, Reply.text("Noted the merge.")),
    e("lead-spawn", { system: LEAD }, Reply.toolCall("mcp__substrat__spawn_agent", { name: "coder", instructions: "AGENT=coder You write code.", workspace: "branch" })),
    e("lead-ask", { system: LEAD }, Reply.toolCall("mcp__substrat__send_message", { recipient: "coder", text: "Write /workspace/version.ts.", sync: true })),
    e("lead-wait", { system: LEAD }, Reply.text("Asked coder; waiting.")),
    e("coder-write", { system: "AGENT=coder", lastUser: "Write /workspace/version.ts." }, Reply.toolCall("Write", { file_path: "/workspace/version.ts", content: FILE })),
    e("coder-done", { system: "AGENT=coder" }, Reply.text("Wrote /workspace/version.ts."))
  ]
}

interface Ws {
  readonly id: string
  readonly root_path: string
  readonly fork_of: string | null
  readonly repo: { readonly branch: string } | null
}

const figures: Record<string, number> = {}

describe("a real Claude Code branch child on the user's repository", () => {
  it("coder's branch is merged into substrat/lead through the queue, without and with a check", () =>
    withLlm([...script(), ...script()], async (llm) => {
      for (const check of [null, "test -f version.ts && grep -q 1.2.3 version.ts"] as const) {
        const home = claudeMeteredHome(llm, homes, check === null ? "stbr-" : "stbc-")
        const repo = Path.join(home, "..", `${Path.basename(home)}-user-repo`)
        homes.push(repo)
        const base = makeForeignRepo(repo)
        const before = userState(repo)
        ds.track(await startDaemon(home))
        const lead = await cliJson<AgentWs>(home, [
          "agent", "create", "--provider", "claude", "--name", "lead", "--instructions", `${LEAD}.`, "--repo", repo,
          ...(check === null ? [] : ["--check", check])
        ])
        const sent = await cli(home, ["agent", "send", "--wait", "lead", "Add a version file."])
        expect(sent.stderr).toBe("")
        expect(sent.stdout).toBe(`${FINAL}\n`)
        const merged = await waitFor("coder's branch merged", () => dataNamed(agentEvents(home, lead.session_id), "merge.merged")[0], 120_000)
        const agents = (await waitQuiet(home)) as ReadonlyArray<AgentWs>
        const coder = agents.find((a) => a.name === "coder")!
        const spaces = (await cliJson<{ workspaces: ReadonlyArray<Ws> }>(home, ["workspace", "list"])).workspaces
        const coderWs = spaces.find((w) => w.id === coder.workspace_id)!
        const leadWs = spaces.find((w) => w.id === lead.workspace_id)!
        expect(coderWs.fork_of).toBe(leadWs.id)
        expect(coderWs.repo?.branch).toBe("substrat/lead/coder")

        // The merge: coder's turn commit (with its trailers) is substrat/lead in the user's repository.
        expect(merged["paths"]).toEqual(["version.ts"])
        expect(merged["checked"]).toBe(check !== null)
        expect(dataNamed(agentEvents(home, lead.session_id), "merge.failed")).toEqual([])
        const commit = String(merged["commit"])
        await waitFor("substrat/lead published", () => gitIn(repo, ["rev-parse", "refs/heads/substrat/lead"]).trim() === commit || undefined)
        expect(gitIn(repo, ["show", `${commit}:version.ts`])).toBe(FILE)
        expect(gitIn(repo, ["diff", "--name-only", base, "substrat/lead"])).toBe("version.ts\n")
        const body = gitIn(repo, ["log", "--format=%an%x1f%B%x1e", `${base}..substrat/lead`])
        expect(body).toMatch(/^coder\x1f/m)
        expect(body).toContain("Substrat-Agent: coder")
        expect(body).toContain(`Substrat-Workspace: ${coderWs.id}`)
        expect(body).toMatch(/Substrat-Turn: [0-9a-f-]{36}/)
        // lead's clone has the file; lead was told once; the user's checkout is as it was.
        expect(Fs.readFileSync(Path.join(leadWs.root_path, "version.ts"), "utf8")).toBe(FILE)
        const notes = agentEvents(home, lead.session_id)
          .filter((e) => e.event === "message.enqueued" && e.data["sender"] === "SYSTEM" && String(e.data["payload"]).startsWith("Merged coder's branch"))
        expect(notes).toHaveLength(1)
        expect(String(notes[0]!.data["payload"])).toContain(commit.slice(0, 12))
        expect({ ...userState(repo), branches: [] }).toEqual({ ...before, branches: [] })
        expect(gitIn(repo, ["status", "--porcelain"])).toBe("")

        const ts = (session: string, name: string) =>
          Date.parse((agentEvents(home, session) as unknown as ReadonlyArray<{ readonly event: string; readonly ts: string }>).filter((e) => e.event === name).at(-1)!.ts)
        const key = check === null ? "no_check" : "with_check"
        figures[`reply_to_merged_ms_${key}`] = ts(lead.session_id, "merge.merged") - ts(coder.session_id, "turn.complete")
        figures[`queued_to_merged_ms_${key}`] = Number(merged["queued_ms"])
        await ds.killAll()
      }
      if (process.env["SUBSTRAT_FIGURES"] !== undefined) Fs.writeFileSync(process.env["SUBSTRAT_FIGURES"], JSON.stringify(figures, null, 2) + "\n")
    }), 400_000)
})
