// Output arrives whole through a pipe and into a file: a swarm big enough that `swarm agents`
// and `agent ls` print far more than a pipe buffer (64 KiB), and a 50 MB transcript through
// `agent logs`, each read by a slow reader at the other end of a real pipe, and each written
// straight into a file. Writes to a pipe are asynchronous in Node; a CLI that exits before they
// drain loses everything past the first 64 KiB and still exits 0.
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { cliJson, launcher, rpcOnce, startDaemon, waitFor } from "./daemon.support.js"
import { type SwarmAgent, swarmScope, write } from "./swarm.support.js"

const { owned, fresh } = swarmScope("substrat-pipe-")

interface Piped {
  readonly code: number
  readonly bytes: Buffer
  readonly stderr: string
}

/** Run the CLI with stdout a pipe whose reader starts late and then reads one chunk at a time. */
const throughSlowPipe = (home: string, args: ReadonlyArray<string>): Promise<Piped> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [launcher, ...args], { env: { ...process.env, SUBSTRAT_HOME: home }, stdio: ["ignore", "pipe", "pipe"] })
    let stderr = ""
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString("utf8")))
    const chunks: Array<Buffer> = []
    const out = child.stdout
    out.pause()
    // A 'readable' listener keeps Node from resuming the pipe when the child exits (its flushStdio
    // resumes a stdio stream nobody listens to, and what then flows out as 'data' is lost here).
    out.on("readable", () => {})
    // A slow reader: nothing for a while (the pipe fills), then a chunk per timer tick.
    const readSome = () => {
      let c: Buffer | null
      for (let i = 0; i < 4 && (c = out.read() as Buffer | null) !== null; i++) chunks.push(c)
      if (!out.readableEnded) setTimeout(readSome, 1)
    }
    setTimeout(readSome, 300)
    let code: number | undefined
    let ended = false
    const done = () => code !== undefined && ended && resolve({ code, bytes: Buffer.concat(chunks), stderr })
    out.on("end", () => {
      ended = true
      done()
    })
    child.on("error", reject)
    child.on("exit", (c, signal) => {
      code = c ?? (signal === null ? 1 : 128)
      // Whatever is still in the pipe after the exit is read out by readSome; `end` follows.
      done()
    })
  })

/** Run the CLI with stdout a file. */
const intoFile = (home: string, args: ReadonlyArray<string>, file: string): Promise<Piped> =>
  new Promise((resolve, reject) => {
    const fd = fs.openSync(file, "w")
    const child = spawn(process.execPath, [launcher, ...args], { env: { ...process.env, SUBSTRAT_HOME: home }, stdio: ["ignore", fd, "pipe"] })
    let stderr = ""
    child.stderr?.on("data", (d: Buffer) => (stderr += d.toString("utf8")))
    child.on("error", reject)
    child.on("exit", (c, signal) => {
      fs.closeSync(fd)
      resolve({ code: c ?? (signal === null ? 1 : 128), bytes: fs.readFileSync(file), stderr })
    })
  })

/** `n` small functions in one Python file. */
const pythonFunctions = (n: number, prefix: string) =>
  Array.from({ length: n }, (_, i) => `def ${prefix}_function_with_a_rather_long_name_${i}():\n    return ${i}\n`).join("\n")

describe("CLI output through a pipe and into a file", () => {
  it("swarm agents and agent ls, text and --json", async () => {
    const { home, repo } = fresh()
    for (let f = 0; f < 6; f++) write(repo, `pkg/mod_${f}.py`, pythonFunctions(100, `m${f}`))
    owned.track(await startDaemon(home))
    await cliJson(home, ["swarm", "start", repo, "--provider", "scripted:echo"])
    const nodes = await waitFor("the swarm's node agents", async () => {
      // Over the admin socket (what `swarm agents --json` prints): the commands under test are below.
      const r = await rpcOnce<{ agents: ReadonlyArray<SwarmAgent> }>(home, "swarm.agents", {})
      return r.agents.length >= 600 ? r.agents.length : undefined
    }, 120_000)

    const swarmJson = await throughSlowPipe(home, ["swarm", "agents", "--json"])
    expect([swarmJson.code, swarmJson.stderr]).toEqual([0, ""])
    expect(swarmJson.bytes.length).toBeGreaterThan(256 * 1024)
    expect((JSON.parse(swarmJson.bytes.toString("utf8")) as { agents: ReadonlyArray<unknown> }).agents).toHaveLength(nodes)

    const swarmText = await throughSlowPipe(home, ["swarm", "agents"])
    expect([swarmText.code, swarmText.stderr]).toEqual([0, ""])
    expect(swarmText.bytes.length).toBeGreaterThan(64 * 1024)
    // The header, one row per node agent, and the final newline.
    expect(swarmText.bytes.toString("utf8").split("\n")).toHaveLength(nodes + 2)

    const lsJson = await throughSlowPipe(home, ["agent", "ls", "--all", "--json"])
    expect([lsJson.code, lsJson.stderr]).toEqual([0, ""])
    expect(lsJson.bytes.length).toBeGreaterThan(128 * 1024)
    expect((JSON.parse(lsJson.bytes.toString("utf8")) as { agents: ReadonlyArray<unknown> }).agents.length).toBeGreaterThanOrEqual(nodes)

    const lsFile = await intoFile(home, ["agent", "ls", "--all", "--json"], join(home, "..", "ls.json"))
    expect([lsFile.code, lsFile.stderr]).toEqual([0, ""])
    expect(lsFile.bytes.equals(lsJson.bytes)).toBe(true)

  }, 300_000)

  it("a 50 MB transcript through agent logs", async () => {
    const { home } = fresh()
    owned.track(await startDaemon(home))
    // An agent's transcript.txt grown on disk, printed by `agent logs`.
    const agent = await cliJson<{ id: string; session_id: string }>(home, ["agent", "create", "--provider", "scripted:echo", "--name", "talker"])
    const transcript = join(home, "agents", agent.session_id, "transcript.txt")
    const line = `[12:00:00] USER → talker: ${"a long line of text ".repeat(500)}\n`
    const lines = Math.ceil(50 * 1024 * 1024 / Buffer.byteLength(line))
    // The daemon's own lines (the agent's creation) first, so nothing is written after ours.
    await waitFor("the transcript's first line", () => fs.existsSync(transcript) && fs.statSync(transcript).size > 0 ? true : undefined)
    fs.appendFileSync(transcript, line.repeat(lines))
    const expected = fs.readFileSync(transcript)
    expect(expected.length).toBeGreaterThan(50 * 1024 * 1024)

    const logsPiped = await throughSlowPipe(home, ["agent", "logs", "talker"])
    expect([logsPiped.code, logsPiped.stderr]).toEqual([0, ""])
    expect(logsPiped.bytes.length).toBe(expected.length)
    expect(logsPiped.bytes.equals(expected)).toBe(true)

    const logsFile = await intoFile(home, ["agent", "logs", "talker"], join(home, "..", "logs.txt"))
    expect([logsFile.code, logsFile.stderr]).toEqual([0, ""])
    expect(logsFile.bytes.equals(expected)).toBe(true)
  }, 300_000)
})
