// requires: bwrap, git, postgres
// Cluster mode with the REAL Claude Code binary (sandboxed, against the scripted Anthropic
// endpoint): a claude agent on runner B is told a code word; B is killed -9; runner A takes the
// tree over (its provider state — claude's session file and resume id — unpacked from Postgres,
// docs/cluster.md "What moves with a tree") and the agent's next answer on A uses the code word:
// claude resumed its conversation (the model request on A carries the earlier turn).
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { cli, kill9, waitFor } from "../integration/daemon.support.js"
import { clusterFile, createOn, runnerOf, startRunner, waitRunnerReady } from "../support/cluster.js"
import { freePort, freshDatabase } from "../support/postgres.js"
import { claudeMeteredHome, claudeMeterEnvKeys, daemonTestScope, withLlm } from "./support.js"

const { ds, homes } = daemonTestScope(claudeMeterEnvKeys)
const { pg, dir } = clusterFile("substrat-cluster-claude-", (dir) => ({ SUBSTRAT_CLUSTER_WORKSPACE_REMOTE: join(dir, "remote.git") }))

describe("cluster mode with a real claude", () => {
  it("a claude agent moved by kill -9 of its runner continues its conversation on the runner that takes it over", () =>
    withLlm([
      {
        match: { system: "AGENT=moved", lastUser: "what was the code word", anywhere: "PELICAN" },
        reply: Reply.text("The code word was PELICAN."),
        label: "resumed"
      },
      { match: { system: "AGENT=moved", lastUser: "what was the code word" }, reply: Reply.text("I was never told a code word."), label: "fresh" },
      { match: { system: "AGENT=moved", lastUser: "remember the code word" }, reply: Reply.text("Noted."), label: "told" },
      // Claude Code's side requests (titles, probes).
      { reply: Reply.text("ok"), times: Infinity, label: "side" }
    ], async (llm) => {
      const [homeA, homeB] = [claudeMeteredHome(llm, homes, "scca-"), claudeMeteredHome(llm, homes, "sccb-")]
      execFileSync("git", ["init", "--quiet", "--bare", join(dir, "remote.git")])
      const url = await freshDatabase(pg.server())
      const [pa, pb] = [await freePort(), await freePort()]
      await startRunner(ds, homeA, url, pa, 1)
      const b = await startRunner(ds, homeB, url, pb, 2)
      await waitRunnerReady(homeA, 2)
      const tree = await createOn(url, homeA, `127.0.0.1:${pb}`, "c", ["--provider", "claude", "--instructions", "AGENT=moved"])

      const told = await cli(homeA, ["agent", "send", tree.name, "remember the code word: PELICAN", "--wait"])
      expect(told.code, told.stderr).toBe(0)
      expect(told.stdout).toContain("Noted.")
      await kill9(b)
      await waitFor("the tree recorded on A", async () => (await runnerOf(url, tree.id)) === `127.0.0.1:${pa}` ? true : undefined, 90_000)

      const asked = await cli(homeA, ["agent", "send", tree.name, "what was the code word?", "--wait"])
      expect(asked.code, asked.stderr).toBe(0)
      expect(asked.stdout).toContain("The code word was PELICAN.")
      const labels = (await Effect.runPromise(llm.modelRequests)).map((r) => r.label)
      expect(labels).toContain("resumed")
      expect(labels).not.toContain("fresh")
    }), 300_000)
})
