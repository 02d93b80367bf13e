// `find:<symbol>` in a real swarm (docs/swarm.md, "find:"): a node agent's send_message to
// `find:deep` travels hop by hop through the code tree, each hop a message in the hop agent's log;
// the daemon is killed -9 mid-search (hops slowed by `swarm.find_hop_delay_ms`), restarted, and
// the search completes exactly once: one found copy, one turn of the found agent, one answer.
import * as fs from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { cli, cliJson, kill9, startDaemon, waitFor } from "./daemon.support.js"
import { allLogs, type LogLine, type SwarmAgent, swarmScope, write } from "./swarm.support.js"

const { owned, fresh } = swarmScope("substrat-swarm-find-")

interface Envelope {
  readonly id: string
  readonly sender: string
  readonly recipient: string
  readonly kind: string
  readonly reply_to: string | null
  readonly payload: string
  readonly find?: { readonly symbol: string; readonly origin: string; readonly hops: number; readonly state: string; readonly path: ReadonlyArray<string> }
}
const enqueued = (lines: ReadonlyArray<LogLine>) => lines.filter((l) => l.event === "message.enqueued").map((l) => l.data as unknown as Envelope)


describe("find:<symbol> in a swarm (real daemon, kill -9 mid-search)", () => {
  it("hop by hop through the code tree; killed mid-search, restarted, the search completes exactly once", async () => {
    const { home, repo } = fresh()
    write(repo, "a/x.ts", "export function caller(): number {\n  return 1\n}\n")
    write(repo, "b/c/y.ts", "export class Target {\n  deep(): number {\n    return 2\n  }\n}\n")
    fs.mkdirSync(join(home, "scripts"), { recursive: true, mode: 0o700 })
    fs.writeFileSync(join(home, "scripts", "find.json"), JSON.stringify({
      func_caller: {
        steps: [{ tools: [{ tool: "send_message", args: { recipient: "find:deep", text: "who returns 2?", sync: true } }], text: "asked" }],
        after: "echo"
      },
      method_target_deep: { steps: [{ text: "deep here: I return 2" }], after: "echo" },
      "*": { steps: [], after: "echo" }
    }))
    // Slow hops, so the kill lands mid-search.
    fs.writeFileSync(join(home, "config.toml"), "[swarm]\nfind_hop_delay_ms = 700\n")
    let pid = await startDaemon(home)
    owned.track(pid)
    await cliJson(home, ["swarm", "start", repo, "--provider", "scripted:find"])
    const agents = new Map((await cliJson<{ agents: ReadonlyArray<SwarmAgent> }>(home, ["swarm", "agents"])).agents.map((a) => [a.node_id, a]))
    const caller = agents.get("a/x.ts#function:caller")!
    const deep = agents.get("b/c/y.ts#method:Target.deep")!
    // The path: up from the caller to the root directory, down to the method.
    const pathNodes = ["a/x.ts#file", "a#dir", ".#dir", "b#dir", "b/c#dir", "b/c/y.ts#file", "b/c/y.ts#class:Target"]
    const pathAgents = pathNodes.map((n) => agents.get(n)!)

    const chat = await cli(home, ["swarm", "chat", caller.node_id, "go"])
    expect(chat.code).toBe(0)
    // Wait until the search is under way (three hops logged), then kill -9.
    const hopsLogged = () => [...allLogs(home).values()].flatMap(enqueued).filter((e) => e.find?.state === "hop")
    await waitFor("three hops logged", () => hopsLogged().length >= 3 ? true : undefined, 60_000)
    await kill9(pid)
    const before = hopsLogged()
    expect(before.length).toBeLessThan(pathNodes.length)
    const origin = before[0]!.find!.origin
    expect(enqueued(allLogs(home).get(deep.session_id) ?? []).filter((e) => e.id === origin)).toEqual([])

    fs.writeFileSync(join(home, "config.toml"), "[swarm]\nfind_hop_delay_ms = 0\n")
    pid = await startDaemon(home)
    owned.track(pid)
    // The searcher gets the found agent's answer (a response to the search's id).
    const answer = await waitFor("the answer in the caller's log", () =>
      enqueued(allLogs(home).get(caller.session_id) ?? []).find((e) => e.kind === "response" && e.reply_to === origin), 60_000)
    expect(answer).toMatchObject({ sender: deep.agent_id, payload: "deep here: I return 2" })

    const logs = allLogs(home)
    // Exactly one found copy, one turn of the found agent.
    const deepLog = logs.get(deep.session_id)!
    const found = enqueued(deepLog).filter((e) => e.id === origin)
    expect(found).toHaveLength(1)
    expect(found[0]).toMatchObject({ sender: caller.agent_id, kind: "request", payload: "who returns 2?", find: { state: "found", hops: 8 } })
    expect(deepLog.filter((l) => l.event === "turn.start")).toHaveLength(1)
    // Every path agent: exactly one hop (hop i from the previous agent), forwarded once to the next; no turn.
    let from = caller.agent_id
    for (let i = 0; i < pathAgents.length; i++) {
      const a = pathAgents[i]!
      const lines = logs.get(a.session_id)!
      const hops = enqueued(lines).filter((e) => e.find?.state === "hop" && e.find.origin === origin)
      expect(hops.map((h) => [h.sender, h.find!.hops])).toEqual([[from, i + 1]])
      const fw = lines.filter((l) => l.event === "message.forwarded").map((l) => l.data)
      const next = i + 1 < pathAgents.length ? pathAgents[i + 1]!.agent_id : deep.agent_id
      expect(fw).toEqual([{ message_id: hops[0]!.id, to: next, next_message_id: i + 1 < pathAgents.length ? expect.any(String) : origin }])
      if (a.node_id !== ".#dir") expect(lines.filter((l) => l.event === "turn.start")).toHaveLength(0)
      from = a.agent_id
    }
    // Nothing else got a hop of this search.
    const hopCount = [...logs.values()].flatMap(enqueued).filter((e) => e.find?.state === "hop" && e.find.origin === origin).length
    expect(hopCount).toBe(pathAgents.length)
  }, 180_000)
})
