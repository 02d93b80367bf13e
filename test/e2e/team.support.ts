// The team scenario shared by test/e2e/team-claude.test.ts and team-codex.test.ts (the README's
// "Running a real Claude Code team", and the same with codex): the words, the model script
// (only the coder's write and the reviewer's read are each CLI's own tools), the end state both
// reach whatever the provider, and the kill -9 of the daemon while the reviewer's turn runs.
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { expect } from "vitest"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, isAlive, spawnCli, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { agentEvents as events, dataNamed as of } from "./support.js"

export * from "./team-script.support.js"
import { FILE_BYTES, FINAL, HELD, LEAD, LEAD_INSTRUCTIONS, ORDER, TASK } from "./team-script.support.js"

export type AgentWs = Agent & { readonly workspace_id: string | null }

/**
 * The end state of the team, whatever its provider: three agents in lead's default workspace,
 * the file with the exact bytes, the reviewer's answer, no failed turn; each message enqueued
 * once, each of the 3 requests answered once, exactly one answer (the final text) to the user.
 */
export const checkTeamEndState = async (home: string) => {
  const agents = (await waitQuiet(home)) as ReadonlyArray<AgentWs>
  const by = Object.fromEntries(agents.map((a) => [a.name, a]))
  expect(Object.keys(by).sort()).toEqual(["coder", "lead", "reviewer"])
  const lead = by["lead"]!

  // The file, in lead's default workspace on disk; the children work there too.
  expect(lead.workspace_id).not.toBeNull()
  expect(by["coder"]!.workspace_id).toBe(lead.workspace_id)
  expect(by["reviewer"]!.workspace_id).toBe(lead.workspace_id)
  const ws = (await cliJson<{ workspaces: ReadonlyArray<{ id: string; root_path: string; default_for: string | null }> }>(home, ["workspace", "list"]))
    .workspaces.find((w) => w.id === lead.workspace_id)!
  expect(ws.default_for).toBe("lead")
  expect(Fs.readFileSync(Path.join(ws.root_path, "version.ts"), "utf8")).toBe(FILE_BYTES)

  // The reviewer read what the coder wrote; nobody's turn failed.
  expect(of(events(home, by["reviewer"]!.session_id), "turn.complete").map((d) => d["response"])).toEqual(["Approved. It sets 1.2.3."])
  for (const a of agents) expect(of(events(home, a.session_id), "provider.error"), a.name).toEqual([])

  // No message lost or doubled: each id enqueued once across the team; each request answered once.
  const all = agents.flatMap((a) => of(events(home, a.session_id), "message.enqueued"))
  const ids = all.map((m) => String(m["id"]))
  expect(new Set(ids).size).toBe(ids.length)
  const requests = all.filter((m) => m["kind"] === "request")
  // USER's request to lead, lead's to coder and to reviewer.
  expect(requests.map((m) => m["payload"])).toEqual(expect.arrayContaining([TASK, "Write /workspace/version.ts.", "Review /workspace/version.ts."]))
  expect(requests.length).toBe(3)
  const answers = all.filter((m) => m["kind"] === "response")
  for (const r of requests) expect(answers.filter((a) => a["reply_to"] === r["id"]).length, String(r["payload"])).toBe(1)
  const toUser = of(events(home, lead.session_id), "message.enqueued").filter((m) => m["recipient"] === "USER")
  expect(toUser.filter((m) => m["kind"] === "response").map((m) => m["payload"])).toEqual([FINAL])
  expect(toUser.filter((m) => m["progress"] === true).map((m) => m["payload"])).toEqual(["Asked coder; waiting.", "Asked reviewer; waiting."])
  return { agents, by }
}

/**
 * Part 2 of the scenario up to the restart: the reviewer's first request is held, lead (on
 * `provider`) gets the task with `send --wait`, the daemon is SIGKILLed while the request is
 * held. The `--wait` that lost its daemon exits 3, prints no answer and names the command that
 * waits again for its request; returns that request's id.
 */
export const killDuringReview = async (
  home: string,
  llm: ScriptedLlm.ScriptedLlmServer,
  provider: string,
  script: ReadonlyArray<ScriptedLlm.ScriptEntry>,
  track: (pid: number) => void
): Promise<string> => {
  await Effect.runPromise(llm.replace([
    { match: { system: "AGENT=reviewer" }, reply: Reply.text("never seen"), delayMs: 600_000, label: HELD },
    ...script
  ]))
  const pid = await startDaemon(home)
  track(pid)
  await cliJson<AgentWs>(home, ["agent", "create", "--provider", provider, "--name", "lead", "--instructions", LEAD_INSTRUCTIONS])
  const waiting = spawnCli(home, ["agent", "send", "--wait", "lead", TASK])
  await Effect.runPromise(llm.awaitRequests(1, (r) => r.label === HELD).pipe(
    Effect.timeoutFail({ duration: "150 seconds", onTimeout: () => new Error("the reviewer's first request never came") })
  ))
  process.kill(pid, "SIGKILL")
  await waitFor("daemon gone", () => (isAlive(pid) ? undefined : true), 10_000)
  // The waiting CLI lost its daemon: exit 3 (docs/cli.md), no answer printed.
  expect(await waiting.exit).toBe(3)
  expect(waiting.err()).toMatch(/^substrat: lost the connection to the daemon/)
  expect(waiting.out()).not.toContain(FINAL)
  const again = /wait again with: substrat agent wait lead ([0-9a-f-]{36})\n/.exec(waiting.err())
  expect(again, waiting.err()).not.toBeNull()
  return again![1]!
}

/**
 * After the restart: `agent wait lead <request>` prints lead's final answer once it comes, and
 * that request is the one USER sent lead.
 */
export const rewait = async (home: string, request: string): Promise<void> => {
  const r = await cli(home, ["agent", "wait", "lead", request])
  expect(r.stderr).toBe("")
  expect(r.code).toBe(0)
  expect(r.stdout).toBe(`${FINAL}\n`)
}

/**
 * Part 1 up to the answer: a daemon, lead (on `provider`, no --workspace: its own default one),
 * the task with `send --wait`, which prints lead's final text and exits 0.
 */
export const sendTheTask = async (home: string, provider: string, track: (pid: number) => void): Promise<void> => {
  track(await startDaemon(home))
  const created = await cliJson<AgentWs>(home, ["agent", "create", "--provider", provider, "--name", "lead", "--instructions", LEAD_INSTRUCTIONS])
  expect(created.workspace_id).not.toBeNull()
  const sent = await cli(home, ["agent", "send", "--wait", "lead", TASK])
  expect(sent.stderr).toBe("")
  expect(sent.code).toBe(0)
  expect(sent.stdout).toBe(`${FINAL}\n`)
}

/** Each agent's requests came in ORDER (agents run concurrently, so only per agent). */
export const expectOrder = (reqs: ReadonlyArray<{ readonly label?: string | undefined }>): void => {
  for (const who of ["lead", "coder", "reviewer"]) {
    expect(reqs.map((r) => r.label ?? "").filter((l) => l.startsWith(who))).toEqual(ORDER.filter((l) => l.startsWith(who)))
  }
}

/**
 * Agent `a`'s per-request `usage` events: one per request the endpoint answered for it (a
 * request the daemon died under got no response: nothing to meter), each `expected` at `price`.
 */
export const perRequestUsage = (
  home: string,
  a: AgentWs,
  reqs: ReadonlyArray<ScriptedLlm.RecordedRequest>,
  expected: Record<string, unknown>,
  price: number
): Array<Record<string, unknown>> => {
  const perRequest = of(events(home, a.session_id), "usage").filter((u) => u["source"] === "request")
  const mine = reqs.filter((r) => r.label !== HELD && (r.system ?? "").includes(a.name === "lead" ? LEAD : `AGENT=${a.name}`))
  expect(perRequest.length, a.name).toBe(mine.length)
  for (const u of perRequest) {
    expect(u).toMatchObject(expected)
    expect(u["cost_usd"]).toBeCloseTo(price, 12)
  }
  return perRequest
}
