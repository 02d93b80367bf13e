// Attacks on the egress surface, replayed by `npm run chaos -- --only security`: a sandboxed
// claude agent (real binary) whose workspace allows the npm preset (mapped to a fake registry on
// 127.0.0.1 through the test-only resolver override) uses its egress proxy to reach back in (a
// loopback address, an allowlisted name that resolves to loopback, a CONNECT to a port its policy
// does not name), to flood it (connections past the limit, an oversized head), to hold it with
// slow connections (slowloris), to download past the daily byte limit, and to make the daemon
// buffer (a huge response read slowly, a huge response header). `withEgressRegistry` is the
// set-up they share: the registry, the resolver override, the scripted endpoint, the daemon and
// one agent whose Bash runs the attack's commands in one turn.
import * as Fs from "node:fs"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { agentEvents, claudeMeteredHome, dataNamed, withLlm } from "../../test/e2e/daemon-claude.support.js"
import { type Agent, cli, cliJson, daemons, isAlive, startDaemon, waitQuiet } from "../../test/integration/daemon.support.js"
import { type FakeRegistry, startFakeRegistry } from "../../test/support/fakeRegistry.js"
import { makeTmpDir, removeDir } from "../../test/support/tmp.js"
import type { Attack, AttackResult } from "./attack.js"

const NPM = "npm.substrat-test"

/** What an egress attack sees once its agent's turn is over. */
export interface EgressRun {
  readonly home: string
  readonly pid: number
  readonly agent: Agent
  readonly reg: FakeRegistry
  /** Everything the agent's Bash calls printed. */
  readonly out: string
  /** The agent's `egress.request` events. */
  readonly requests: ReadonlyArray<Record<string, unknown>>
  /** What `during` returned (it ran while the turn did). */
  readonly during: unknown
}

export interface EgressSetup {
  /** The Bash command(s) of the agent's one turn (one tool call each), given the registry's port. */
  readonly commands: (reg: FakeRegistry) => ReadonlyArray<string>
  /** Extra configuration for the daemon (environment variables, restored afterwards). */
  readonly env?: Readonly<Record<string, string>>
  /** Extra `agent create` flags (besides `--allow npm`). */
  readonly flags?: (reg: FakeRegistry) => ReadonlyArray<string>
  /** Runs on the host while the turn runs (started right after the agent was asked), e.g. probing the daemon. */
  readonly during?: (home: string, pid: number, turnOver: () => boolean) => Promise<unknown>
  /** Just before the agent is asked (the daemon is up, the agent created). */
  readonly before?: (home: string, pid: number) => void
}

/**
 * A fake registry reached as `npm.substrat-test` (preset npm), a daemon with one sandboxed claude
 * agent allowed `--allow npm`, whose one turn runs `commands` with its Bash tool; `f` judges the run.
 */
export const withEgressRegistry = async (prefix: string, setup: EgressSetup, f: (r: EgressRun) => Promise<AttackResult> | AttackResult): Promise<AttackResult> => {
  const owned = daemons()
  const dir = makeTmpDir(`sec-${prefix}-`)
  const homes: Array<string> = []
  const env: Record<string, string> = { SUBSTRAT_EGRESS_TEST_RESOLVE: `${NPM}=127.0.0.1`, ...setup.env }
  const reg = await startFakeRegistry(dir, NPM, "pypi.substrat-test")
  env["SUBSTRAT_EGRESS_NPM"] = `${NPM}:${reg.port}`
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]))
  try {
    Object.assign(process.env, env)
    const commands = setup.commands(reg)
    const done = (r: { readonly raw: string }) => (r.raw.match(/"type":"tool_result"/g) ?? []).length
    return await withLlm([
      ...commands.map((command, k): ScriptedLlm.ScriptEntry => ({
        match: { system: "AGENT=attacker", where: (r) => done(r) === k },
        reply: ScriptedLlm.Reply.toolCall("Bash", { command, description: `attack ${k}`, timeout: 300_000 }),
        label: `bash${k}`
      })),
      { match: { system: "AGENT=attacker", where: (r) => done(r) >= commands.length }, reply: ScriptedLlm.Reply.text("done"), label: "done" }
    ], async (llm) => {
      const home = claudeMeteredHome(llm, homes, `${prefix.slice(0, 4)}-`)
      const pid = await startDaemon(home)
      owned.track(pid)
      const agent = await cliJson<Agent>(home, [
        "agent", "create", "--provider", "claude", "--name", "attacker", "--instructions", "AGENT=attacker Work.", "--allow", "npm", ...(setup.flags?.(reg) ?? [])
      ])
      setup.before?.(home, pid)
      await cli(home, ["agent", "send", "attacker", "Go."])
      let over = false
      const during = setup.during?.(home, pid, () => over) ?? Promise.resolve(null)
      try {
        await waitQuiet(home).catch(async () => {
          // A long attack (slowloris) outlasts waitQuiet's minute: wait for the turn's end in the log.
          for (let i = 0; i < 600 && !agentEvents(home, agent.session_id).some((e) => e.event === "turn.complete" || e.event === "provider.error"); i++) {
            await new Promise((r) => setTimeout(r, 500))
          }
        })
      } finally {
        over = true
      }
      const events = agentEvents(home, agent.session_id)
      return await f({
        home,
        pid,
        agent,
        reg,
        out: dataNamed(events, "tool_call.result").map((d) => JSON.stringify(d["result"] ?? "")).join("\n"),
        requests: dataNamed(events, "egress.request"),
        during: await during
      })
    })
  } finally {
    await owned.killAll()
    for (const h of homes) removeDir(h)
    await reg.close()
    removeDir(dir)
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  }
}

const backIn: Attack = {
  name: "25 egress proxy as a way back in (loopback address, allowlisted name resolving to loopback, CONNECT to an unnamed port)",
  run: () =>
    withEgressRegistry("egress", {
      flags: (reg) => ["--allow-host", `localhost:${reg.port}`],
      commands: (reg) => {
        const via = "--noproxy '' -x http://127.0.0.1:3128 -s -o /dev/null"
        return [[
          `curl ${via} -w 'loopback %{http_code}\\n' http://127.0.0.1:${reg.port}/blob/1`,
          `curl ${via} -w 'localhost %{http_code}\\n' http://localhost:${reg.port}/blob/2`,
          `curl ${via} -p -w 'port22 %{http_connect}\\n' https://${NPM}:22/`,
          `curl ${via} -w 'allowed %{http_code}\\n' http://${NPM}:${reg.port}/blob/3`
        ].join("; ")]
      }
    }, ({ out, reg, requests }) => {
      const code = (label: string) => new RegExp(`${label} (\\d{3})`).exec(out)?.[1] ?? "none"
      const codes = { loopback: code("loopback"), localhost: code("localhost"), port22: code("port22"), allowed: code("allowed") }
      const reached = reg.requests().filter((r) => r.url === "/blob/1" || r.url === "/blob/2").length
      const denied = requests.filter((e) => e["allowed"] === false).length
      return {
        // The allowed request is the control: the proxy works, so the refusals are its own.
        breached: codes.loopback !== "403" || codes.localhost !== "403" || codes.port22 !== "403" || codes.allowed !== "200" || reached > 0,
        detail: `codes ${JSON.stringify(codes)}; requests that reached the local service: ${reached}; denied egress.request events: ${denied}`
      }
    })
}

/** The python the flooding agent's Bash runs: 100 CONNECTs held open at once, then one oversized head. */
const floodScript = (port: number) => `python3 - <<'PY'
import socket
socks, ok, refused = [], 0, 0
for i in range(100):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
        s.sendall(b"CONNECT ${NPM}:${port} HTTP/1.1\\r\\nHost: ${NPM}:${port}\\r\\n\\r\\n")
        socks.append(s)
    except Exception:
        refused += 1
for s in socks:
    try:
        line = s.recv(200).split(b"\\r\\n")[0]
        if b" 200" in line: ok += 1
        else: refused += 1
    except Exception:
        refused += 1
print("FLOOD ok=%d refused=%d" % (ok, refused))
for s in socks: s.close()
big = socket.create_connection(("127.0.0.1", 3128), timeout=20)
try:
    big.sendall(b"GET http://${NPM}:${port}/blob/5 HTTP/1.1\\r\\nHost: ${NPM}:${port}\\r\\nX-Big: " + b"a" * 65536 + b"\\r\\n\\r\\n")
    head = big.recv(200).split(b"\\r\\n")[0].decode() or "closed"
except Exception:
    head = "closed"
print("BIG " + head)
PY`

const flood: Attack = {
  name: "25 egress proxy flood: 100 CONNECTs held at once past the workspace's connection limit (32), then a 64 KiB request head",
  run: () =>
    withEgressRegistry("egress-flood", { commands: (reg) => [floodScript(reg.port)] }, async ({ out, reg, home }) => {
      const m = /FLOOD ok=(\d+) refused=(\d+)/.exec(out)
      const ok = Number(m?.[1] ?? -1)
      const big = /BIG ([^\\"]*)/.exec(out)?.[1] ?? "none"
      const bigReached = reg.requests().some((r) => r.url === "/blob/5")
      const up = (await cli(home, ["agent", "list"])).code === 0
      return {
        // ok > 0 is the control: the proxy tunnels, so the refusals past the limit are its own.
        breached: m === null || ok <= 0 || ok > 32 || bigReached || /^HTTP\/1\.1 2/.test(big) || !up,
        detail: `tunnels opened ${m?.[1] ?? "?"} of 100 (limit 32), refused ${m?.[2] ?? "?"}; 64 KiB head: ${big}, reached the registry: ${bigReached}; daemon answering after: ${up}`
      }
    })
}

/** The proxy socket bound into the sandbox (the relay on 127.0.0.1:3128 leads to it too). */
const SOCK = "/run/substrat/egress.sock"

/**
 * 200 connections on the proxy's socket, each sending a request head one byte at a time (every
 * 2 s), until the proxy has closed them all (at most 150 s): how many it accepted at once, how
 * many it closed at once (past its connection limit), how long the slowest stayed open.
 */
const slowlorisScript = (port: number) => `python3 - <<'PY'
import socket, time
def gone(s):
    s.setblocking(False)
    try:
        s.recv(4096)
        return True
    except BlockingIOError:
        return False
    except Exception:
        return True
socks, refused = [], 0
for i in range(200):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect("${SOCK}")
        s.sendall(b"GET http://${NPM}:${port}/blob/1 HTTP/1.1\\r\\nX-Slow: ")
        socks.append(s)
    except Exception:
        refused += 1
time.sleep(1)
alive = [s for s in socks if not gone(s)]
print("SLOW opened=%d refused=%d held=%d" % (len(socks), refused, len(alive)), flush=True)
t0 = time.time()
while alive and time.time() - t0 < 150:
    time.sleep(2)
    nxt = []
    for s in alive:
        try:
            s.setblocking(True)
            s.settimeout(1)
            s.sendall(b"a")
            if not gone(s):
                nxt.append(s)
        except Exception:
            pass
    alive = nxt
print("SLOWEND open=%d seconds=%d" % (len(alive), int(time.time() - t0)))
PY`

const slowloris: Attack = {
  name: "25 egress slowloris: 200 connections on the proxy socket each trickling a request head, while the daemon is asked for its agents",
  run: () =>
    withEgressRegistry("egress-slow", {
      commands: (reg) => [slowlorisScript(reg.port)],
      // While the turn holds its connections: the daemon answers `agent list` (how slowly, at worst).
      during: async (home, _pid, over) => {
        let asked = 0
        let failed = 0
        let worst = 0
        for (let i = 0; i < 400 && !over(); i++) {
          const t0 = performance.now()
          const r = await cli(home, ["agent", "list", "--json"])
          worst = Math.max(worst, Math.round(performance.now() - t0))
          asked++
          if (r.code !== 0) failed++
          await new Promise((res) => setTimeout(res, 500))
        }
        return { asked, failed, worst }
      }
    }, ({ out, during, pid }) => {
      const m = /SLOW opened=(\d+) refused=(\d+) held=(\d+)/.exec(out)
      const end = /SLOWEND open=(\d+) seconds=(\d+)/.exec(out)
      const held = Number(m?.[3] ?? -1)
      const d = during as { asked: number; failed: number; worst: number }
      return {
        // Bounded: at most the socket's 64 at once, every one closed by the proxy's header timeout.
        breached: m === null || end === null || held > 64 || held <= 0 || Number(end[1]) > 0 || d.asked === 0 || d.failed > 0 || !isAlive(pid),
        detail: `connections opened ${m?.[1] ?? "?"} (refused at connect ${m?.[2] ?? "?"}), held open by the proxy ${m?.[3] ?? "?"} (limit 64); ` +
          `still open at the end ${end?.[1] ?? "?"}, the last closed after ~${end?.[2] ?? "?"} s; agent list during the attack: ${d.asked} asked, ${d.failed} failed, slowest ${d.worst} ms`
      }
    })
}

const DAY_LIMIT = 3_000_000

const dailyLimit: Attack = {
  name: "25 egress daily byte limit reached mid-download (egress.bytesPerDay 3 MB, three 2 MB downloads)",
  run: () =>
    withEgressRegistry("egress-day", {
      env: { SUBSTRAT_EGRESS_BYTES_PER_DAY: String(DAY_LIMIT) },
      commands: (reg) => [[1, 2, 3].map((n) => `curl -s -o /dev/null -w 'get${n} %{size_download}\\n' http://${NPM}:${reg.port}/blob/2000000`).join("; ")]
    }, async ({ out, requests, home }) => {
      const got = [1, 2, 3].map((n) => Number(new RegExp(`get${n} (\\d+)`).exec(out)?.[1] ?? -1))
      const ended = requests.filter((e) => String(e["reason"] ?? "").includes("egress.bytesPerDay"))
      const moved = requests.reduce((n, e) => n + Number(e["bytes_down"] ?? 0) + Number(e["bytes_up"] ?? 0), 0)
      const inbox = await cli(home, ["inbox", "--json"])
      const item = inbox.stdout.includes("egress.bytesPerDay")
      return {
        // The first download is the control (under the limit); the second passes the limit mid-way.
        breached: got[0] !== 2_000_000 || got[1]! >= 2_000_000 || got[2]! >= 2_000_000 || ended.length === 0 || moved > DAY_LIMIT + 1_100_000 || !item,
        detail: `bytes downloaded ${got.join(" / ")} (limit ${DAY_LIMIT} a day); requests ended by egress.bytesPerDay: ${ended.length}; bytes through the proxy: ${moved}; inbox item: ${item}`
      }
    })
}

/** VmHWM (peak resident set) of a process, in KiB. */
const peakKiB = (pid: number) => Number(/VmHWM:\s+(\d+)/.exec(Fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? NaN)

const HUGE = 256 * 1024 * 1024

/** A 256 MiB response requested and not read for 8 s (the registry sends as fast as it can), then read; then a 1 MiB response header. */
const memoryScript = (port: number) => `python3 - <<'PY'
import socket, time
s = socket.socket(socket.AF_UNIX)
s.connect("${SOCK}")
s.sendall(b"GET http://${NPM}:${port}/blob/${HUGE} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
time.sleep(8)
n = 0
while True:
    b = s.recv(1 << 20)
    if not b:
        break
    n += len(b)
print("HUGE got=%d" % n)
h = socket.socket(socket.AF_UNIX)
h.connect("${SOCK}")
h.sendall(b"GET http://${NPM}:${port}/bigheader/1048576 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
line = h.recv(200).split(b"\\r\\n")[0].decode() or "closed"
print("HDR " + line)
PY`

const memory: Attack = {
  name: "25 egress memory: a 256 MiB response the agent does not read for 8 s, and a 1 MiB response header, through the proxy",
  run: async () => {
    let before = 0
    return withEgressRegistry("egress-mem", {
      commands: (reg) => [memoryScript(reg.port)],
      before: (_home, pid) => {
        before = peakKiB(pid)
      }
    }, ({ out, pid }) => {
      const got = Number(/HUGE got=(\d+)/.exec(out)?.[1] ?? -1)
      const hdr = /HDR ([^\\"]*)/.exec(out)?.[1] ?? "none"
      const grew = Math.round((peakKiB(pid) - before) / 1024)
      return {
        // The whole body arriving is the control (the proxy relayed it); its peak memory may not follow it.
        breached: got < HUGE || grew > 96 || /^HTTP\/1\.1 2/.test(hdr) || !isAlive(pid),
        detail: `body relayed ${got} of ${HUGE} bytes; the daemon's peak resident memory grew by ${grew} MiB (allowed 96); 1 MiB response header: ${hdr}`
      }
    })
  }
}

export const attacks: ReadonlyArray<Attack> = [backIn, flood, slowloris, dailyLimit, memory]
