// requires: bwrap, git, postgres
// Cluster mode with the REAL Claude Code binary (sandboxed, against the scripted Anthropic
// endpoint): a claude agent on runner B is told a code word; B is killed -9; runner A takes the
// tree over (its provider state — claude's session file and resume id — unpacked from Postgres,
// docs/cluster.md "What moves with a tree") and the agent's next answer on A uses the code word:
// claude resumed its conversation (the model request on A carries the earlier turn).
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, kill9, startDaemon, waitFor } from "../integration/daemon.support.js"
import { freePort, freshDatabase, postgresPerFile } from "../support/postgres.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { claudeMeteredHome, claudeMeterEnvKeys, daemonTestScope, withLlm } from "./support.js"
import * as Postgres from "../../src/storage/Postgres.js"
import { SqlClient } from "@effect/sql"
import { Redacted } from "effect"

const envKeys = [...claudeMeterEnvKeys, "SUBSTRAT_CLUSTER_LEASE_MS", "SUBSTRAT_CLUSTER_WORKSPACE_REMOTE"]
const { ds, homes } = daemonTestScope(envKeys)
const pg = postgresPerFile()
const dir = makeTmpDir("substrat-cluster-claude-")
afterAll(() => removeDir(dir))

const query = (url: string, text: string) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(text)).pipe(
      Effect.provide(Postgres.layer({ url: Redacted.make(url), maxConnections: 1 }))
    )
  )

interface Status {
  readonly held: number
  readonly runners: ReadonlyArray<{ readonly healthy: boolean; readonly shards: number; readonly self: boolean }>
}

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
      const remote = join(dir, "remote.git")
      execFileSync("git", ["init", "--quiet", "--bare", remote])
      process.env["SUBSTRAT_CLUSTER_LEASE_MS"] = "3000"
      process.env["SUBSTRAT_CLUSTER_WORKSPACE_REMOTE"] = remote
      const url = await freshDatabase(pg.server())
      const [pa, pb] = [await freePort(), await freePort()]
      ds.track(await startDaemon(homeA, ["--cluster", url, "--listen", `127.0.0.1:${pa}`]))
      const b = await startDaemon(homeB, ["--cluster", url, "--listen", `127.0.0.1:${pb}`])
      ds.track(b)
      for (const home of [homeA, homeB]) {
        await waitFor(`${home}: both runners healthy, its shards held`, async () => {
          const s = await cliJson<Status>(home, ["cluster", "status"])
          return s.runners.filter((r) => r.healthy).length === 2 && s.held > 0 && s.held === s.runners.find((r) => r.self)?.shards ? s : undefined
        }, 60_000)
      }
      let moving: Agent | undefined
      for (let i = 0; i < 24 && moving === undefined; i++) {
        const created = await cliJson<Agent>(homeA, ["agent", "create", "--name", `c${i}`, "--provider", "claude", "--instructions", "AGENT=moved"])
        const row = await query(url, `SELECT runner FROM substrat_trees WHERE root_id = '${created.id}'`)
        if (row[0]?.["runner"] === `127.0.0.1:${pb}`) moving = created
      }
      expect(moving).toBeDefined()
      const tree = moving!

      const told = await cli(homeA, ["agent", "send", tree.name, "remember the code word: PELICAN", "--wait"])
      expect(told.code, told.stderr).toBe(0)
      expect(told.stdout).toContain("Noted.")
      await kill9(b)
      await waitFor("the tree recorded on A", async () => {
        const row = await query(url, `SELECT runner FROM substrat_trees WHERE root_id = '${tree.id}'`)
        return row[0]?.["runner"] === `127.0.0.1:${pa}` ? true : undefined
      }, 90_000)

      const asked = await cli(homeA, ["agent", "send", tree.name, "what was the code word?", "--wait"])
      expect(asked.code, asked.stderr).toBe(0)
      expect(asked.stdout).toContain("The code word was PELICAN.")
      const labels = (await Effect.runPromise(llm.modelRequests)).map((r) => r.label)
      expect(labels).toContain("resumed")
      expect(labels).not.toContain("fresh")
    }), 300_000)
})
