// The reliability suite anyone can run: `npm run chaos [-- --cycles N --frames N --only a,b]`
// (not part of `npm test`; docs/reliability.md records a run). Four experiments against the
// built daemon (dist/, via scripts/substrat.js), each in its own temporary home, each bounded
// in time and count, loopback and Unix sockets only; each prints its figures:
//   kill9     kill -9 cycles under a load of concurrent sends: acked / lost / duplicated, restart time per cycle
//   frames    malformed frames on the admin socket and on a sandboxed agent's agent.sock: replies, daemon alive
//   diskfull  a home on a small tmpfs filled to the last byte (root only): refusals, reads, read-only start, lost
//   sandbox   a claude agent (offline, scripted endpoint) that forks, fills /tmp and its workspace: what the limits let through
//   security  every attack of the threat model (scripts/chaos-security/): fails when any gets through
import { Effect } from "effect"
import * as Child from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import * as ScriptedLlm from "../src/testing/ScriptedLlm.js"
import { Reply } from "../src/testing/ScriptedLlm.js"
import { cli, cliJson, isAlive, rawConnection, repoRoot, sleep, waitFor } from "../test/integration/daemon.support.js"
import { prng } from "../test/support/fuzz.js"
import { makeTmpDir, removeDir } from "../test/support/tmp.js"
import { allAttacks, runAttacks } from "./chaos-security/index.js"

/** The native Claude Code binary (devDependency; runs offline against the scripted endpoint). */
const claudeBin = join(repoRoot, "node_modules/@anthropic-ai/claude-code/bin/claude.exe")

/** The last tool result a model request carries (what the agent's last Bash call printed). */
const toolOutput = (r: ScriptedLlm.RecordedRequest): string => {
  const blocks = ((r.body as { messages?: ReadonlyArray<{ content: unknown }> }).messages ?? []).flatMap((m) =>
    Array.isArray(m.content) ? m.content.filter((b: { type?: string }) => b.type === "tool_result") : []
  ) as ReadonlyArray<{ readonly content?: unknown }>
  return JSON.stringify(blocks.at(-1)?.content ?? null)
}

const argv = process.argv.slice(2)
const flag = (name: string, def: number) => {
  const i = argv.indexOf(`--${name}`)
  return i >= 0 ? Number(argv[i + 1]) : def
}
const only = (() => {
  const i = argv.indexOf("--only")
  return i >= 0 ? new Set((argv[i + 1] ?? "").split(",")) : null
})()
const CYCLES = flag("cycles", 20)
const FRAMES = flag("frames", 2000)
const SEED = flag("seed", 0x5eed)
const random = prng(SEED)

interface Agent {
  readonly id: string
  readonly name: string
  readonly session_id: string
}

const started: Array<number> = []
const startDaemon = async (home: string): Promise<{ pid: number; ms: number }> => {
  const t0 = performance.now()
  const r = await cliJson<{ pid: number }>(home, ["daemon", "start"])
  started.push(r.pid)
  return { pid: r.pid, ms: Math.round(performance.now() - t0) }
}
const kill9 = async (pid: number) => {
  process.kill(pid, "SIGKILL")
  await waitFor(`pid ${pid} dead`, () => (isAlive(pid) ? undefined : true))
}
const linesOf = (home: string, session: string): Array<{ event: string; data: Record<string, unknown> }> => {
  const f = join(home, "agents", session, "events.jsonl")
  if (!fs.existsSync(f)) return []
  return fs.readFileSync(f, "utf8").split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as { event: string; data: Record<string, unknown> })
}
const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? 0 : s[Math.floor(s.length / 2)]!
}
const report = (name: string, figures: Record<string, unknown>) => {
  console.log(`\n== ${name}`)
  for (const [k, v] of Object.entries(figures)) console.log(`  ${k.padEnd(26)} ${typeof v === "string" ? v : JSON.stringify(v)}`)
}

/** What the last start-up logged in daemon.log: recovery's and the transcript regeneration's figures. */
const startFigures = (home: string) => {
  const log = fs.existsSync(join(home, "daemon.log")) ? fs.readFileSync(join(home, "daemon.log"), "utf8") : ""
  const rec = [...log.matchAll(/agent\(s\) in (\d+) ms; .*? (\d+) log line\(s\) read, .*? (\d+) message\(s\) re-injected, .*? (\d+) turn\(s\) queued/g)].at(-1)
  const tr = [...log.matchAll(/rewritten in (\d+) ms/g)].at(-1)
  const held = [...log.matchAll(/(\d+) agent\(s\) quarantined/g)].at(-1)
  return {
    recoveryMs: Number(rec?.[1] ?? NaN),
    lines: Number(rec?.[2] ?? NaN),
    reinjected: Number(rec?.[3] ?? NaN),
    turns: Number(rec?.[4] ?? NaN),
    quarantined: Number(held?.[1] ?? NaN),
    transcriptMs: Number(tr?.[1] ?? NaN)
  }
}

/** The next reply line, or null once the connection is closed (a killed daemon) or after 10 s. */
const nextOrClosed = async (c: Awaited<ReturnType<typeof rawConnection>>): Promise<string | null> => {
  let done = false
  const closed = (async () => {
    while (!done && !c.closed()) await sleep(50)
    return null
  })()
  try {
    return await Promise.race([c.next(10_000).catch(() => null), closed])
  } finally {
    done = true
  }
}

/** kill -9 cycles under load: 4 workers send over raw RPC connections while the daemon is killed at random moments. */
const kill9Cycles = async () => {
  const dir = makeTmpDir("substrat-chaos-k9-")
  const home = join(dir, "home")
  try {
    let { pid, ms } = await startDaemon(home)
    const firstStart = ms
    const sink = await cliJson<Agent>(home, ["agent", "create", "--name", "sink", "--provider", "scripted"])
    const acked = new Set<string>()
    let attempts = 0
    let refused = 0
    const restarts: Array<number> = []
    const cycles: Array<{ ms: number; acked: number } & ReturnType<typeof startFigures>> = []
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      let stop = false
      const ackedBefore = acked.size
      const workers = Array.from({ length: 4 }, async (_, w) => {
        const c = await rawConnection(join(home, "daemon.sock")).catch(() => null)
        if (c === null) return
        for (let i = 0; !stop && !c.closed(); i++) {
          attempts++
          const params = { agent: sink.id, text: `c${cycle}-w${w}-${i}`, sync: w % 2 === 0 }
          c.write(JSON.stringify({ jsonrpc: "2.0", id: i, method: "agent.send", params }) + "\n")
          const line = await nextOrClosed(c)
          if (line === null) break // in flight at the kill: neither acked nor refused
          const reply = JSON.parse(line) as { result?: { message_id: string } }
          if (reply.result !== undefined) acked.add(reply.result.message_id)
          else refused++
        }
        c.close()
      })
      await sleep(300 + Math.floor(random() * 1200))
      await kill9(pid)
      stop = true
      await Promise.all(workers)
      ;({ pid, ms } = await startDaemon(home))
      restarts.push(ms)
      cycles.push({ ms, acked: acked.size - ackedBefore, ...startFigures(home) })
    }
    const logged = linesOf(home, sink.session_id).filter((l) => l.event === "message.enqueued").map((l) => String(l.data["id"]))
    const seen = new Map<string, number>()
    for (const id of logged) seen.set(id, (seen.get(id) ?? 0) + 1)
    const lost = [...acked].filter((id) => !seen.has(id)).length
    const duplicated = [...seen.values()].filter((n) => n > 1).length
    const alive = isAlive(pid) && (await cli(home, ["daemon", "status"])).code === 0
    const tenth = Math.max(1, Math.floor(CYCLES / 10))
    report(`kill9: ${CYCLES} kill -9 cycles under load (4 RPC workers, half sync requests)`, {
      "sends attempted": attempts,
      "acked": acked.size,
      "lost (acked, not in log)": lost,
      "duplicated (ids logged 2×)": duplicated,
      "refused (error reply)": refused,
      "in flight at a kill": attempts - acked.size - refused,
      "daemon alive at the end": alive,
      "first start ms": firstStart,
      "restart ms, first cycles": median(restarts.slice(0, tenth)),
      "restart ms, last cycles": median(restarts.slice(-tenth)),
      "restart ms, all": restarts.join(" "),
      "acked per cycle": cycles.map((c) => c.acked).join(" "),
      "per cycle (ms recovery/transcripts, lines read, re-injected, turns queued, quarantined)": cycles
        .map((c) => `${c.ms}:${c.recoveryMs}/${c.transcriptMs} ${c.lines} ${c.reinjected} ${c.turns} ${c.quarantined}`).join(" | "),
      "events in the sink's log": linesOf(home, sink.session_id).length
    })
    await cli(home, ["daemon", "stop"])
  } finally {
    removeDir(dir)
  }
}

/** Random bytes, truncated JSON, deep nesting, wrong types, huge lines: count the replies and check the daemon lives. */
const malformed = (i: number): string => {
  const r = random()
  const id = i + 1
  if (r < 0.15) return Array.from({ length: 1 + Math.floor(random() * 200) }, () => String.fromCharCode(Math.floor(random() * 256))).join("").replace(/\n/g, " ") + "\n"
  if (r < 0.3) return `{"jsonrpc":"2.0","id":${id},"method":"agent.create","params":{"name":${"[".repeat(3000 + Math.floor(random() * 100_000))}1${"]".repeat(3000)}}}\n`
  if (r < 0.45) return `{"jsonrpc":"2.0","id":${id},"method":"agent.send","params":{"agent":${JSON.stringify(random())},"text":[1,2]}}\n`
  if (r < 0.6) return `{"jsonrpc":"2.0","id":${id},"method":"no.such.method","params":{}}\n`
  if (r < 0.75) return `{"jsonrpc":"2.0","id":${id},"method":"send_message","params":{"recipient":{},"text":null}}\n`
  if (r < 0.9) return `{"jsonrpc":"2.0","id":${id},"method":"agent.inspect","par` + "\n"
  return `[${"{}".repeat(Math.floor(random() * 50))}]\n`
}

const fuzzSocket = async (path: string, frames: number) => {
  let replies = 0
  let errors = 0
  let reconnects = 0
  let conn = await rawConnection(path)
  for (let i = 0; i < frames; i++) {
    if (conn.closed()) {
      reconnects++
      conn = await rawConnection(path)
    }
    conn.write(malformed(i))
    const line = await conn.next(5000).catch(() => null)
    if (line === null) continue
    replies++
    try {
      if ((JSON.parse(line) as { error?: unknown }).error !== undefined) errors++
    } catch {
      // not JSON: counted as a reply only
    }
  }
  conn.close()
  return { frames, replies, errors, reconnects }
}

const withLlm = async <A>(script: ReadonlyArray<ScriptedLlm.ScriptEntry>, f: (llm: ScriptedLlm.ScriptedLlmServer) => Promise<A>): Promise<A> =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(ScriptedLlm.make({ listen: { port: 0 }, script }), (llm) => Effect.promise(() => f(llm)))))

const claudeEnv = (llm: ScriptedLlm.ScriptedLlmServer) => {
  process.env["SUBSTRAT_ANTHROPIC_UPSTREAM"] = llm.baseUrl
  process.env["ANTHROPIC_API_KEY"] = "sk-chaos-daemon-only"
  process.env["SUBSTRAT_CLAUDE_BIN"] = claudeBin
}

/** Malformed frames on daemon.sock and on a live sandboxed agent's agent.sock. */
const frames = () =>
  withLlm([{ match: { system: "AGENT=f" }, reply: Reply.text("idle"), label: "f" }], async (llm) => {
    const home = makeTmpDir("scf-")
    try {
      claudeEnv(llm)
      const { pid } = await startDaemon(home)
      const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "f", "--instructions", "AGENT=f"])
      await cliJson(home, ["agent", "send", "f", "hello"])
      const agentSock = join(home, "agents", a.session_id, "agent.sock")
      await waitFor("agent.sock", () => (fs.existsSync(agentSock) ? true : undefined), 60_000)
      const admin = await fuzzSocket(join(home, "daemon.sock"), FRAMES)
      const agent = await fuzzSocket(agentSock, FRAMES)
      const list = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
      report(`frames: ${FRAMES} malformed frames per socket (seed ${SEED})`, {
        "admin: replies/errors": `${admin.replies}/${admin.errors} (reconnects ${admin.reconnects})`,
        "agent.sock: replies/errors": `${agent.replies}/${agent.errors} (reconnects ${agent.reconnects})`,
        "daemon alive": isAlive(pid),
        "tree unchanged": list.agents.map((x) => x.name).join(",") === "f"
      })
      await cli(home, ["daemon", "stop"])
    } finally {
      removeDir(home)
    }
  })

/** A home on a 12 MiB tmpfs, filled to the last byte (needs root for mount). */
const diskFull = async () => {
  if (process.getuid?.() !== 0) return report("diskfull", { skipped: "needs root to mount a tmpfs" })
  const dir = makeTmpDir("substrat-chaos-df-")
  const mnt = join(dir, "mnt")
  fs.mkdirSync(mnt)
  if (Child.spawnSync("mount", ["-t", "tmpfs", "-o", "size=12m", "tmpfs", mnt]).status !== 0) {
    removeDir(dir)
    return report("diskfull", { skipped: "mount -t tmpfs failed" })
  }
  const home = join(mnt, "home")
  const saved = process.env["SUBSTRAT_MIN_FREE_BYTES"]
  process.env["SUBSTRAT_MIN_FREE_BYTES"] = "0"
  try {
    let { pid } = await startDaemon(home)
    const a = await cliJson<Agent>(home, ["agent", "create", "--name", "a", "--provider", "scripted"])
    const acked: Array<string> = []
    const codes = new Map<number, number>()
    // Send until the disk refuses, well past the point where it filled up.
    let filler = 0
    for (let i = 0; i < 400; i++) {
      if (i === 50) {
        const fd = fs.openSync(join(mnt, "filler"), "a")
        try {
          for (;;) filler += fs.writeSync(fd, Buffer.alloc(4096))
        } catch {
          // ENOSPC
        } finally {
          fs.closeSync(fd)
        }
      }
      const r = await cli(home, ["agent", "send", "a", `m${i} ${"x".repeat(200)}`, "--notify", "--json"])
      codes.set(r.code, (codes.get(r.code) ?? 0) + 1)
      if (r.code === 0) acked.push((JSON.parse(r.stdout) as { message_id: string }).message_id)
      if (i > 50 && r.code !== 0 && (codes.get(r.code) ?? 0) >= 20) break
    }
    const aliveFull = isAlive(pid)
    const reads = (await cli(home, ["agent", "list"])).code === 0
    const tmps = fs.readdirSync(home, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".tmp")).length
    await kill9(pid)
    const t0 = performance.now()
    const restart = await cli(home, ["daemon", "start", "--json"])
    const restartMs = Math.round(performance.now() - t0)
    if (restart.code === 0) pid = (JSON.parse(restart.stdout) as { pid: number }).pid
    if (restart.code === 0) started.push(pid)
    const status = restart.code === 0 ? await cliJson<{ storage?: { mode: string } }>(home, ["daemon", "status"]) : null
    fs.rmSync(join(mnt, "filler"))
    if (restart.code === 0) {
      await cli(home, ["daemon", "stop"])
      await waitFor("stopped", () => (isAlive(pid) ? undefined : true))
    }
    ;({ pid } = await startDaemon(home))
    const logged = new Set(linesOf(home, a.session_id).filter((l) => l.event === "message.enqueued").map((l) => String(l.data["id"])))
    report("diskfull: home on a 12 MiB tmpfs, filled after 50 sends", {
      "filler bytes": filler,
      "send exit codes": Object.fromEntries(codes),
      "acked": acked.length,
      "lost (acked, not in log)": acked.filter((id) => !logged.has(id)).length,
      "daemon alive when full": aliveFull,
      "reads served when full": reads,
      "*.tmp left behind": tmps,
      "start on the full disk": restart.code === 0 ? `ok in ${restartMs} ms, storage ${status?.storage?.mode}` : `failed: ${restart.stderr.trim()}`
    })
    await cli(home, ["daemon", "stop"])
    await waitFor("stopped", () => (isAlive(pid) ? undefined : true))
  } finally {
    if (saved === undefined) delete process.env["SUBSTRAT_MIN_FREE_BYTES"]
    else process.env["SUBSTRAT_MIN_FREE_BYTES"] = saved
    Child.spawnSync("umount", ["-l", mnt])
    removeDir(dir)
  }
}

/** A sandboxed claude agent whose Bash calls try to exhaust processes, /tmp and the workspace. */
const sandbox = () => {
  const probes = {
    fork: `n=0; for i in $(seq 1 700); do (sleep 20 &) 2>/dev/null && n=$((n+1)); done; sleep 1; echo FORK started=$(ps -e --no-headers 2>/dev/null | wc -l)`,
    tmp: `dd if=/dev/zero of=/tmp/big bs=1M count=300 2>&1 | tail -1; echo TMP $(du -sm /tmp/big 2>/dev/null | cut -f1)MB; rm -f /tmp/big`,
    ws: `dd if=/dev/zero of=big.bin bs=1M count=300 2>&1 | tail -1; echo WS $(du -sm big.bin 2>/dev/null | cut -f1)MB; rm -f big.bin`,
    mem: `node -e "const a=[];try{for(let i=0;i<8;i++)a.push(Buffer.alloc(64*1024*1024,1));console.log('MEM '+a.length*64+'MB')}catch(e){console.log('MEM failed at '+a.length*64+'MB: '+e.message)}" 2>&1 | tail -1`
  }
  // Probe k answers the request that carries k tool results (whatever the previous probe printed).
  const done = (r: { readonly raw: string }) => (r.raw.match(/"type":"tool_result"/g) ?? []).length
  // The process limit ends the turn (LimitExceededError), so the fork probe goes last.
  const steps = [["tmp", probes.tmp], ["ws", probes.ws], ["mem", probes.mem], ["fork", probes.fork]] as const
  return withLlm([
    ...steps.map(([label, command], k): ScriptedLlm.ScriptEntry => ({
      match: { system: "AGENT=x", where: (r) => done(r) === k },
      reply: Reply.toolCall("Bash", { command, description: label }),
      label
    })),
    { match: { system: "AGENT=x", where: (r) => done(r) >= steps.length }, reply: Reply.text("done"), label: "end" }
  ], async (llm) => {
    const home = makeTmpDir("scs-")
    try {
      claudeEnv(llm)
      const { pid } = await startDaemon(home)
      const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "x", "--instructions", "AGENT=x"])
      await cli(home, ["agent", "send", "x", "exhaust the sandbox", "--notify"])
      await waitFor("turn end", () => linesOf(home, a.session_id).some((l) => l.event === "turn.complete" || l.event === "provider.error") ? true : undefined, 240_000)
      const reqs = await Effect.runPromise(llm.modelRequests)
      const out = (label: string) => {
        const i = reqs.findIndex((r) => r.label === label)
        const next = reqs[i + 1]
        return next === undefined ? "(no result)" : toolOutput(next).replace(/\\n/g, " ").slice(0, 200)
      }
      const errors = linesOf(home, a.session_id).filter((l) => l.event === "provider.error").map((l) => `${l.data["reason"]}: ${l.data["message"]}`)
      report("sandbox: a claude agent's Bash tries to exhaust its sandbox", {
        "fork 700 sleepers": out("fork"),
        "300 MB into /tmp": out("tmp"),
        "300 MB into /workspace": out("ws"),
        "512 MB of memory": out("mem"),
        "turn errors": errors.length === 0 ? "none" : errors.join(" | "),
        "daemon alive": isAlive(pid)
      })
      await cli(home, ["daemon", "stop"])
    } finally {
      removeDir(home)
    }
  })
}

const security = async () => {
  const run = await runAttacks(allAttacks)
  console.log(`\n== security: ${run.results.length} attacks`)
  for (const { name, result } of run.results) {
    const line =
      result === "skipped" ? "skipped (needs root)"
      : "error" in result ? `COULD NOT RUN: ${result.error}`
      : `${result.breached ? "BREACHED" : "held"}: ${result.detail}`
    console.log(`  ${name}: ${line}`)
  }
  if (run.breached > 0) throw new Error(`${run.breached} attack(s) got through or could not run`)
}

const experiments: ReadonlyArray<readonly [string, () => Promise<void>]> = [
  ["kill9", kill9Cycles],
  ["frames", frames],
  ["diskfull", diskFull],
  ["sandbox", sandbox],
  ["security", security]
]

const main = async () => {
  console.log(`substrat chaos: cycles=${CYCLES} frames=${FRAMES} seed=${SEED}`)
  let failed = 0
  for (const [name, run] of experiments) {
    if (only !== null && !only.has(name)) continue
    const t0 = performance.now()
    try {
      await run()
    } catch (e) {
      failed++
      console.log(`\n== ${name}: FAILED: ${e instanceof Error ? e.message : String(e)}`)
    }
    console.log(`  (${name} took ${Math.round((performance.now() - t0) / 1000)} s)`)
  }
  for (const pid of started) if (isAlive(pid)) process.kill(pid, "SIGKILL")
  process.exit(failed === 0 ? 0 : 1)
}

void main()
