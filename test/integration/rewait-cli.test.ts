// `substrat agent wait <agent> [<message-id>] [--timeout S]` through the real CLI and daemon:
// `agent send --wait` loses its daemon to kill -9 mid-turn (exit 3) and names the command that
// waits again; after a restart that command prints the answer once it comes (recovery re-runs
// the interrupted turn), and at once when it already came; the request is answered exactly once.
// Also: without an id (the latest open request, else the last answered), an id prefix, an
// unknown id (exit 4), --timeout (exit 5), a failed answer (exit 7), and
// GET /v1/agents/{ref}/messages/{id}/answer.
import * as fs from "node:fs"
import * as http from "node:http"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, daemons, isAlive, sleep, spawnCli, startDaemon, waitFor, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-rewait-")
const home = join(dir, "home")

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

type Logged = { readonly event: string; readonly data: Record<string, unknown> }
const logOf = (session: string): ReadonlyArray<Logged> =>
  fs.readFileSync(join(home, "agents", session, "events.jsonl"), "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Logged)
const enqueued = (session: string) => logOf(session).filter((e) => e.event === "message.enqueued").map((e) => e.data)

/** GET over the daemon's Unix socket (the HTTP API listens there too). */
const getUnix = (path: string): Promise<{ status: number; body: unknown }> =>
  new Promise((resolve, reject) => {
    const req = http.request({ socketPath: join(home, "http.sock"), path, method: "GET" }, (res) => {
      let text = ""
      res.setEncoding("utf8").on("data", (c: string) => (text += c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as unknown }))
    })
    req.on("error", reject)
    req.end()
  })

describe("agent wait: waiting again for the answer of a request", () => {
  it("after kill -9 during send --wait: the printed command waits again and prints the answer once; again at once; no id, prefix, unknown id, timeout", async () => {
    fs.mkdirSync(join(home, "scripts"), { recursive: true })
    // slowpoke's turn is held until the test creates `go` (after the restart).
    const go = join(dir, "go")
    fs.writeFileSync(join(home, "scripts", "slow.json"), JSON.stringify({ "*": { steps: [{ text: "slow answer", wait_for: go }], after: "silent" } }))
    fs.writeFileSync(join(home, "scripts", "broken.json"), JSON.stringify({ "*": { steps: [{ error: "the model fell over" }], after: "silent" } }))
    // An answer that does not come while the test runs (the daemon is killed at the end).
    fs.writeFileSync(join(home, "scripts", "never.json"), JSON.stringify({ "*": { steps: [{ text: "late answer", delay_ms: 600_000 }], after: "silent" } }))
    const pid = await startDaemon(home)
    owned.track(pid)
    const slow = await cliJson<Agent>(home, ["agent", "create", "--name", "slowpoke", "--provider", "scripted:slow"])

    // The turn runs (held on `go`) when the daemon is killed; the CLI, which had its
    // send acknowledged before the turn started, is given a moment to be waiting by then.
    const waiting = spawnCli(home, ["agent", "send", "--wait", "slowpoke", "hurry"])
    await waitFor("the turn to start", () => (logOf(slow.session_id).some((e) => e.event === "turn.start") ? true : undefined))
    await sleep(2000)
    process.kill(pid, "SIGKILL")
    await waitFor("daemon gone", () => (isAlive(pid) ? undefined : true), 10_000)
    expect(await waiting.exit).toBe(3)
    expect(waiting.out()).toBe("")
    const err = waiting.err()
    expect(err).toMatch(/^substrat: lost the connection to the daemon/)
    const request = enqueued(slow.session_id).find((m) => m["sender"] === "USER")!["id"] as string
    // The exact commands: start the daemon, then wait again for this request.
    expect(err).toContain(`once the daemon is back (substrat daemon start), wait again with: substrat agent wait slowpoke ${request}\n`)

    owned.track(await startDaemon(home))
    // Waiting while recovery's re-run of the turn is held; then the turn may finish.
    const waitingAgain = cli(home, ["agent", "wait", "slowpoke", request])
    await waitFor("the re-run turn", () => (logOf(slow.session_id).filter((e) => e.event === "turn.start").length === 2 ? true : undefined))
    fs.writeFileSync(go, "")
    const again = await waitingAgain
    expect(again.stderr).toBe("")
    expect(again.code).toBe(0)
    expect(again.stdout).toBe("slow answer\n")

    // Already answered: at once, by full id, by prefix, and without an id (the last answered).
    for (const args of [[request], [request.slice(0, 8)], []]) {
      const r = await cli(home, ["agent", "wait", "slowpoke", ...args, "--timeout", "5"])
      expect({ args, code: r.code, out: r.stdout }).toEqual({ args, code: 0, out: "slow answer\n" })
    }
    const json = await cliJson<{ message_id: string; agent_id: string; answer: { text: string; error: boolean } }>(home, ["agent", "wait", "slowpoke", request])
    expect(json).toMatchObject({ message_id: request, agent_id: slow.id, answer: { text: "slow answer", error: false } })

    // Answered exactly once, though the turn ran twice.
    await waitQuiet(home)
    const answers = enqueued(slow.session_id).filter((m) => m["recipient"] === "USER" && m["kind"] === "response")
    expect(answers.map((m) => [m["reply_to"], m["payload"]])).toEqual([[request, "slow answer"]])
    expect(logOf(slow.session_id).filter((e) => e.event === "turn.start").length).toBe(2)

    // Unknown request: exit 4, in words; an agent USER never asked: exit 4.
    const unknown = await cli(home, ["agent", "wait", "slowpoke", "0000dead"])
    expect(unknown.code).toBe(4)
    expect(unknown.stderr).toBe("substrat: no request \"0000dead\" from USER to slowpoke\n")
    await cliJson<Agent>(home, ["agent", "create", "--name", "quiet", "--provider", "scripted:echo"])
    const none = await cli(home, ["agent", "wait", "quiet"])
    expect(none.code).toBe(4)
    expect(none.stderr).toMatch(/^substrat: USER has no request to quiet to wait for/)

    // Without an id, the latest open request (not the older answered one); --timeout first:
    // exit 5, nothing on stdout, and the words say the answer still comes and how to get it.
    await cliJson<Agent>(home, ["agent", "create", "--name", "sleepy", "--provider", "scripted:never"])
    const first = await cliJson<{ message_id: string }>(home, ["agent", "send", "sleepy", "one"])
    const sent = await cliJson<{ message_id: string }>(home, ["agent", "send", "sleepy", "two"])
    expect(sent.message_id).not.toBe(first.message_id)
    const early = await cli(home, ["agent", "wait", "sleepy", "--timeout", "0.3"])
    expect([early.code, early.stdout]).toEqual([5, ""])
    expect(early.stderr).toBe(`substrat: no answer from sleepy within 0.3 s (message ${sent.message_id}; the answer will still come: agent wait sleepy ${sent.message_id})\n`)

    // An agent that failed to answer: its error answer is printed, exit 7 (as send --wait).
    await cliJson<Agent>(home, ["agent", "create", "--name", "broken", "--provider", "scripted:broken"])
    const doomed = await cliJson<{ message_id: string }>(home, ["agent", "send", "broken", "try"])
    const failed = await cli(home, ["agent", "wait", "broken", doomed.message_id])
    expect(failed.code).toBe(7)
    expect(failed.stdout).toMatch(/^\[error\] broken failed to answer: .*the model fell over/)
    expect(failed.stderr).toBe(`substrat: broken did not answer (message ${doomed.message_id})\n`)

    // HTTP: the same operation.
    const viaHttp = await getUnix(`/v1/agents/slowpoke/messages/${request}/answer?timeout_s=5`)
    expect(viaHttp.status).toBe(200)
    expect(viaHttp.body).toMatchObject({ message_id: request, answer: { text: "slow answer", error: false } })
    const badHttp = await getUnix(`/v1/agents/slowpoke/messages/0000dead/answer`)
    expect(badHttp.status).toBe(404)
  }, 120_000)
})
