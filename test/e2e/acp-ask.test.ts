// requires: bwrap
// `acp.approve = "ask"` through the real daemon and CLI with the in-repo ACP test agent
// (test/fixtures/acp-agent.ts) in bwrap: the agent's `session/request_permission` becomes a
// `permission` item in `substrat inbox` while the turn waits; `substrat inbox answer <id>
// allow|allow-always|reject` answers it with the matching ACP option. Questions and answers are
// logged: kill -9 while the question is open — after the restart the interrupted turn is re-run,
// the agent asks again and it is the same inbox item (same id), whose answer finishes the turn
// once; kill -9 after the answer, before the turn ends — the re-run's same question is answered
// with the logged choice, nobody is asked twice. `acp.ask_timeout_seconds` rejects an unanswered
// request and says so.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, daemons, kill9, rpcOnce, spawnCli, startDaemon, waitFor } from "../integration/daemon.support.js"
import { bundleAcpAgent } from "../support/acpAgent.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { agentEvents as events, dataNamed as of } from "./support.js"

type Item = { readonly id: string; readonly kind: string; readonly agent_id: string; readonly agent_name: string; readonly text: string; readonly ts: string }

const owned = daemons()
const dirs: Array<string> = []
afterAll(async () => {
  await owned.killAll()
  for (const d of dirs) removeDir(d)
})

const setup = (toml: string, book?: (provider: string) => unknown) => {
  const h = makeTmpDir("sacpask-")
  dirs.push(h)
  Fs.chmodSync(h, 0o755)
  Fs.writeFileSync(Path.join(h, "config.toml"), toml)
  const provider = `acp:/usr/bin/node ${bundleAcpAgent(h)}`
  if (book !== undefined) {
    Fs.mkdirSync(Path.join(h, "scripts"))
    Fs.writeFileSync(Path.join(h, "scripts", "b.json"), JSON.stringify(book(provider)))
  }
  return { h, provider }
}

const permissions = async (h: string) =>
  (await cliJson<{ items: ReadonlyArray<Item> }>(h, ["inbox"])).items.filter((i) => i.kind === "permission")
/** The same list over the admin socket (what `inbox --json` prints), for polls: no CLI process each. */
const permissionsRpc = async (h: string) =>
  (await rpcOnce<{ items: ReadonlyArray<Item> }>(h, "inbox.list")).items.filter((i) => i.kind === "permission")
const asked = (h: string, not: ReadonlyArray<string> = []) =>
  waitFor("the permission request in the inbox", async () => (await permissionsRpc(h)).find((i) => !not.includes(i.id)), 60_000)

/** The ⚙ permission lines of an agent's log. */
const permissionLines = (h: string, sid: string) =>
  of(events(h, sid), "tool_call.result").filter((r) => r["tool"] === "permission").map((r) => [r["result"], r["is_error"]])

describe("acp.approve = ask: permission requests in the human inbox (daemon + CLI)", () => {
  it("the turn waits on the inbox item; allow-always / reject map to the ACP options; kill -9 re-runs the turn: an open question is the same item, an answered one is answered from the log", async () => {
    const { h, provider } = setup("[acp]\napprove = \"ask\"\n")
    const pid = await startDaemon(h)
    owned.track(pid)
    const a = await cliJson<Agent>(h, ["agent", "create", "--provider", provider, "--name", "asker"])

    // allow-always → the agent's allow_always option.
    const first = spawnCli(h, ["agent", "send", "--wait", "asker", "PERMIT"])
    const q1 = await asked(h)
    expect(q1).toMatchObject({ agent_id: a.id, agent_name: "asker" })
    expect(q1.text).toContain("asker asks permission: Write /workspace/x")
    expect(q1.text).toContain("allow_once (Allow), allow_always (Always), reject_once (Reject)")
    // A word that is not a choice answers nothing.
    const bad = await cli(h, ["inbox", "answer", q1.id, "approve"])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain(`item ${q1.id} is a permission request of asker: answer "allow", "allow-always" or "reject"`)
    expect((await permissions(h)).map((i) => i.id)).toEqual([q1.id])
    const ans = await cliJson<{ kind: string; agent_name: string }>(h, ["inbox", "answer", q1.id, "allow-always"])
    expect(ans).toMatchObject({ kind: "allow-always", agent_name: "asker" })
    expect(await first.exit).toBe(0)
    expect(first.out()).toBe("permission: always\n")
    expect(await permissions(h)).toEqual([])

    // kill -9 while the question is open.
    const second = spawnCli(h, ["agent", "send", "--wait", "asker", "PERMIT"])
    const q2 = await asked(h)
    await kill9(pid)
    await second.exit
    const pid2 = await startDaemon(h)
    owned.track(pid2)
    // Recovery re-runs the interrupted turn: the agent asks again — the same item, the same id.
    const q3 = await asked(h)
    expect(q3).toEqual({ ...q2, ts: q3.ts })
    expect((await cliJson<{ kind: string }>(h, ["inbox", "answer", q2.id, "reject"])).kind).toBe("reject")
    const waited = await cli(h, ["agent", "wait", "asker"])
    expect(waited.stdout).toBe("permission: no\n")
    expect(await permissions(h)).toEqual([])

    // kill -9 after the answer, while the turn still runs (the agent stalls once after it).
    const third = spawnCli(h, ["agent", "send", "--wait", "asker", "PERMIT STALL"])
    const q4 = await asked(h)
    expect((await cliJson<{ kind: string }>(h, ["inbox", "answer", q4.id, "allow"])).kind).toBe("allow")
    const stalled = Path.join(h, "agents", a.session_id, "home", "stalled")
    await waitFor("the agent got the answer", () => (Fs.existsSync(stalled) ? Fs.readFileSync(stalled, "utf8") : undefined), 60_000)
    await kill9(pid2)
    await third.exit
    owned.track(await startDaemon(h))
    // The re-run turn's same question is answered with the logged choice: no inbox item.
    const rerun = await cli(h, ["agent", "wait", "asker"])
    expect(rerun.stdout).toBe("permission: yes\n")
    expect(await permissions(h)).toEqual([])

    // One answer per request, in the agent's log: the re-run turn answered once.
    expect(permissionLines(h, a.session_id)).toEqual([
      ["allow_always (the human)", false],
      ["reject_once (the human)", true],
      ["allow_once (the human)", false],
      ["allow_once (the human, answered before the restart)", false]
    ])
    const responses = of(events(h, a.session_id), "turn.complete").map((t) => t["response"])
    expect(responses).toEqual(["permission: always", "permission: no", "permission: yes"])
    // Three questions asked, each logged once with its one answer.
    const log = events(h, a.session_id)
    expect(of(log, "permission.asked").map((q) => q["item_id"])).toEqual([q1.id, q2.id, q4.id])
    expect(of(log, "permission.answered").map((x) => [x["item_id"], x["choice"]])).toEqual([[q1.id, "allow-always"], [q2.id, "reject"], [q4.id, "allow"]])
  }, 240_000)

  it("acp.ask_timeout_seconds: an unanswered request is rejected, and the turn says so", async () => {
    const { h, provider } = setup("[acp]\napprove = \"ask\"\nask_timeout_seconds = 1\n")
    owned.track(await startDaemon(h))
    const a = await cliJson<Agent>(h, ["agent", "create", "--provider", provider, "--name", "asker"])
    const r = await cli(h, ["agent", "send", "--wait", "asker", "PERMIT"])
    expect(r.stdout).toBe("permission: no\n")
    expect(permissionLines(h, a.session_id)).toEqual([["reject_once (no answer within 1s (acp.ask_timeout_seconds))", true]])
    expect(await permissions(h)).toEqual([])
  }, 120_000)

  it("agent create --approve: ask and auto over the config's reject; a spawned child inherits it; kept across a restart and shown by agent inspect", async () => {
    const { h, provider } = setup("[acp]\napprove = \"reject\"\n", (kidProvider) => ({
      // The scripted lead spawns an ACP child (its provider given in the call).
      lead: { steps: [{ tools: [{ tool: "spawn_agent", args: { name: "kid", instructions: "You are kid.", provider: kidProvider } }], text: "spawned" }], after: "echo" }
    }))
    const pid = await startDaemon(h)
    owned.track(pid)
    const plain = await cliJson<Agent & { approve?: string }>(h, ["agent", "create", "--provider", provider, "--name", "plain"])
    const auto = await cliJson<Agent & { approve?: string }>(h, ["agent", "create", "--provider", provider, "--name", "auto", "--approve", "auto"])
    const lead = await cliJson<Agent & { approve?: string }>(h, ["agent", "create", "--provider", "scripted:b", "--name", "lead", "--approve", "ask"])
    expect([plain.approve, auto.approve, lead.approve]).toEqual([undefined, "auto", "ask"])
    const bad = await cli(h, ["agent", "create", "--provider", provider, "--name", "x", "--approve", "maybe"])
    expect(bad.code).not.toBe(0)

    // No policy of its own: the config's reject. auto: allowed, nobody asked.
    expect((await cli(h, ["agent", "send", "--wait", "plain", "PERMIT"])).stdout).toBe("permission: no\n")
    expect((await cli(h, ["agent", "send", "--wait", "auto", "PERMIT"])).stdout).toBe("permission: yes\n")
    expect(await permissions(h)).toEqual([])
    expect(permissionLines(h, auto.session_id)).toEqual([["allow_once (policy auto)", false]])

    // The lead's child asks as the lead does: the question is in the inbox.
    expect((await cli(h, ["agent", "send", "--wait", "lead", "go"])).stdout).toBe("spawned\n")
    const kid = (await cliJson<{ agent: Agent & { approve?: string; provider: string } }>(h, ["agent", "inspect", "kid"])).agent
    expect([kid.provider, kid.approve]).toEqual([provider, "ask"])
    const ask = async (answer: string) => {
      const turn = spawnCli(h, ["agent", "send", "--wait", "kid", "PERMIT"])
      const q = await asked(h)
      expect(q).toMatchObject({ agent_id: kid.id, agent_name: "kid" })
      expect((await cliJson<{ kind: string }>(h, ["inbox", "answer", q.id, answer])).kind).toBe(answer)
      expect(await turn.exit).toBe(0)
      return turn.out()
    }
    expect(await ask("allow")).toBe("permission: yes\n")

    // Durable: after a restart (recovery rebuilds the tree from the logs) the policies hold.
    await kill9(pid)
    owned.track(await startDaemon(h))
    const shown = await cli(h, ["agent", "inspect", "kid"])
    expect(shown.stdout).toMatch(/approve\s+ask/)
    expect((await cli(h, ["agent", "inspect", "plain"])).stdout).toMatch(/approve\s+- \(config acp.approve\)/)
    expect(await ask("reject")).toBe("permission: no\n")
    expect((await cli(h, ["agent", "send", "--wait", "auto", "PERMIT"])).stdout).toBe("permission: yes\n")
    expect(of(events(h, kid.session_id), "agent.created").map((c) => c["approve"])).toEqual(["ask"])
    expect(of(events(h, plain.session_id), "agent.created").map((c) => c["approve"])).toEqual([undefined])
  }, 240_000)
})
