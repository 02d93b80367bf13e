// References resolved from the daemon's indexes (src/daemon/Resolver.ts, src/agent/Tree.ts, the
// SessionStore's records in memory): live and terminated agents by name, id, id prefix and
// session id; an unknown name; a name both a live and a terminated agent had; a deleted session's
// agent; `session list` owners and `daemon status` counts kept up to date as agents come and go.
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, daemons, rpcOnce, startDaemon } from "./daemon.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-resolve-")
const home = join(dir, "home")

beforeAll(async () => {
  owned.track(await startDaemon(home))
})

afterAll(async () => {
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  removeDir(dir)
})

interface Inspected {
  readonly agent: Agent
  readonly session: { readonly id: string; readonly agent_name: string | null } | null
  readonly children: ReadonlyArray<Agent>
}
interface SessionRow {
  readonly id: string
  readonly agent_id: string | null
  readonly agent_name: string | null
}

describe("reference resolution from the indexes", () => {
  it("live, terminated, unknown, reused and deleted names; session list and daemon status follow", async () => {
    const a = await cliJson<Agent>(home, ["agent", "create", "--name", "alpha", "--provider", "scripted"])
    const b1 = await cliJson<Agent>(home, ["agent", "create", "--name", "beta", "--provider", "scripted"])
    const status0 = await cliJson<{ agents: number; sessions: number }>(home, ["daemon", "status"])
    expect([status0.agents, status0.sessions]).toEqual([2, 2])

    // Live: by name, id, id prefix, session id.
    for (const ref of ["alpha", a.id, a.id.slice(0, 8), a.session_id]) {
      expect((await cliJson<Inspected>(home, ["agent", "inspect", ref])).agent.id).toBe(a.id)
    }

    await cliJson(home, ["agent", "terminate", "beta"])
    // Terminated: inspect still finds it by name and by session id, as terminated.
    const gone = await cliJson<Inspected>(home, ["agent", "inspect", "beta"])
    expect(gone.agent).toMatchObject({ id: b1.id, state: "terminated" })
    expect(gone.session?.agent_name).toBe("beta")
    expect((await cliJson<Inspected>(home, ["agent", "inspect", b1.session_id])).agent.id).toBe(b1.id)
    // A live agent is needed to send: refused with what the name is.
    const send = await cli(home, ["agent", "send", "beta", "hi"])
    expect(send.code).not.toBe(0)
    expect(send.stderr).toContain("is terminated")

    // A new agent with the same name: the live one is preferred; the old one by its id.
    const b2 = await cliJson<Agent>(home, ["agent", "create", "--name", "beta", "--provider", "scripted"])
    expect((await cliJson<Inspected>(home, ["agent", "inspect", "beta"])).agent.id).toBe(b2.id)
    expect((await cliJson<Inspected>(home, ["agent", "inspect", b1.id])).agent).toMatchObject({ id: b1.id, state: "terminated" })

    // Unknown: NotFound, nothing else.
    const unknown = await cli(home, ["agent", "inspect", "no-such-agent"])
    expect(unknown.code).not.toBe(0)
    expect(unknown.stderr).toContain("no agent \"no-such-agent\"")

    const sessions = (await cliJson<{ sessions: ReadonlyArray<SessionRow> }>(home, ["session", "list"])).sessions
    expect(sessions.map((s) => [s.id, s.agent_id, s.agent_name]).sort()).toEqual(
      [[a.session_id, a.id, "alpha"], [b1.session_id, b1.id, "beta"], [b2.session_id, b2.id, "beta"]].sort()
    )
    const status1 = await cliJson<{ agents: number; sessions: number }>(home, ["daemon", "status"])
    expect([status1.agents, status1.sessions]).toEqual([2, 3])

    // The terminated agent's session deleted: it is gone from every lookup.
    await cliJson(home, ["session", "delete", b1.session_id])
    const deleted = await cli(home, ["agent", "inspect", b1.id])
    expect(deleted.code).not.toBe(0)
    expect(deleted.stderr).toContain(`no agent "${b1.id}"`)
    const status2 = await cliJson<{ agents: number; sessions: number }>(home, ["daemon", "status"])
    expect([status2.agents, status2.sessions]).toEqual([2, 2])
    expect((await cliJson<{ sessions: ReadonlyArray<SessionRow> }>(home, ["session", "list"])).sessions.map((s) => s.id).sort())
      .toEqual([a.session_id, b2.session_id].sort())
  }, 240_000)

  it("session list pages: oldest first, pages join to the whole list, a new session lands on the last page", async () => {
    // Over the admin socket (no CLI process each): the command under test is `session list`.
    for (const n of ["p1", "p2", "p3", "p4", "p5"]) await rpcOnce<Agent>(home, "agent.create", { name: n, provider: "scripted" })
    type Page = { readonly sessions: ReadonlyArray<SessionRow & { readonly created_at: string }>; readonly next?: string }
    const whole = (await cliJson<Page>(home, ["session", "list"])).sessions
    expect(whole.length).toBeGreaterThanOrEqual(5)
    const keys = whole.map((s) => `${s.created_at} ${s.id}`)
    expect(keys).toEqual([...keys].sort())
    expect(whole.slice(-5).map((s) => s.agent_name)).toEqual(["p1", "p2", "p3", "p4", "p5"])

    // Pages of 2 through the whole list: the same ids in the same order, `next` absent at the end.
    const seen: Array<string> = []
    let after: string | undefined
    for (let i = 0; i < 20; i++) {
      const page = await cliJson<Page>(home, ["session", "list", "--limit", "2", ...(after === undefined ? [] : ["--after", after])])
      expect(page.sessions.length).toBeLessThanOrEqual(2)
      seen.push(...page.sessions.map((s) => s.id))
      after = page.next
      if (after === undefined) break
      expect(after).toBe(page.sessions[page.sessions.length - 1]!.id)
    }
    expect(after).toBeUndefined()
    expect(seen).toEqual(whole.map((s) => s.id))

    // Text output: the page on stdout, where the next one starts on stderr.
    const text = await cli(home, ["session", "ls", "--limit", "1", "-q"])
    expect(text.code).toBe(0)
    expect(text.stdout.trim()).toBe(whole[0]!.id)
    expect(text.stderr).toContain(`more: --after ${whole[0]!.id}`)

    // A session created after the list was read: on the last page, after the previous last.
    const late = await cliJson<Agent>(home, ["agent", "create", "--name", "p6", "--provider", "scripted"])
    const tail = await cliJson<Page>(home, ["session", "list", "--after", whole[whole.length - 1]!.id])
    expect(tail.sessions.map((s) => s.id)).toEqual([late.session_id])
    expect(tail.next).toBeUndefined()

    // The session a page ended at is deleted before the next page is asked: that page starts
    // where the deleted one was (its id is no session any more).
    const qs: Array<Agent> = []
    for (const n of ["q1", "q2", "q3"]) qs.push(await rpcOnce<Agent>(home, "agent.create", { name: n, provider: "scripted" }))
    const upToQ1 = await rpcOnce<Page>(home, "session.list", { limit: 1, after: late.session_id })
    expect(upToQ1.sessions.map((s) => s.id)).toEqual([qs[0]!.session_id])
    expect(upToQ1.next).toBe(qs[0]!.session_id)
    const deleted = await cli(home, ["session", "delete", qs[0]!.session_id])
    expect(deleted.code).toBe(0)
    expect((await cliJson<Page>(home, ["session", "list"])).sessions.map((s) => s.id)).not.toContain(qs[0]!.session_id)
    const afterDeleted = await rpcOnce<Page>(home, "session.list", { limit: 5, after: qs[0]!.session_id })
    expect(afterDeleted.sessions.map((s) => s.id)).toEqual([qs[1]!.session_id, qs[2]!.session_id])
    expect(afterDeleted.next).toBeUndefined()

    // An `after` no session has: refused, naming the field.
    const bad = await cli(home, ["session", "list", "--limit", "2", "--after", "00000000-0000-4000-8000-000000000000"])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toContain("no session 00000000-0000-4000-8000-000000000000 to continue after")
  }, 240_000)
})
