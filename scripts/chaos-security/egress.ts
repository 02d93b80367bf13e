// Attacks on the egress surface, replayed by `npm run chaos -- --only security`: a sandboxed
// claude agent (real binary) whose workspace allows the npm preset (mapped to a fake registry on
// 127.0.0.1 through the test-only resolver override) uses its egress proxy to reach back in: a
// loopback address, an allowlisted name that resolves to loopback (no override for it), and a
// CONNECT to a port its policy does not name. Each must get a 403 and never reach the registry.
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { agentEvents, claudeMeteredHome, dataNamed, withLlm } from "../../test/e2e/daemon-claude.support.js"
import { type Agent, cli, cliJson, daemons, startDaemon, waitQuiet } from "../../test/integration/daemon.support.js"
import { startFakeRegistry } from "../../test/support/fakeRegistry.js"
import { makeTmpDir, removeDir } from "../../test/support/tmp.js"
import type { Attack } from "./attack.js"

const NPM = "npm.substrat-test"

const backIn: Attack = {
  name: "25 egress proxy as a way back in (loopback address, allowlisted name resolving to loopback, CONNECT to an unnamed port)",
  run: async () => {
    const owned = daemons()
    const dir = makeTmpDir("sec-egress-")
    const homes: Array<string> = []
    const saved = { r: process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"], n: process.env["SUBSTRAT_EGRESS_NPM"] }
    const reg = await startFakeRegistry(dir, NPM, "pypi.substrat-test")
    try {
      process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"] = `${NPM}=127.0.0.1`
      process.env["SUBSTRAT_EGRESS_NPM"] = `${NPM}:${reg.port}`
      const via = "--noproxy '' -x http://127.0.0.1:3128 -s -o /dev/null"
      const command = [
        `curl ${via} -w 'loopback %{http_code}\\n' http://127.0.0.1:${reg.port}/blob/1`,
        `curl ${via} -w 'localhost %{http_code}\\n' http://localhost:${reg.port}/blob/2`,
        `curl ${via} -p -w 'port22 %{http_connect}\\n' https://${NPM}:22/`,
        `curl ${via} -w 'allowed %{http_code}\\n' http://${NPM}:${reg.port}/blob/3`
      ].join("; ")
      return await withLlm([
        { match: { system: "AGENT=intruder" }, reply: ScriptedLlm.Reply.toolCall("Bash", { command, description: "egress" }), label: "bash" },
        { match: { system: "AGENT=intruder" }, reply: ScriptedLlm.Reply.text("done"), label: "done" }
      ], async (llm) => {
        const home = claudeMeteredHome(llm, homes, "sce-")
        owned.track(await startDaemon(home))
        const a = await cliJson<Agent>(home, [
          "agent", "create", "--provider", "claude", "--name", "intruder", "--instructions", "AGENT=intruder Work.", "--allow", "npm",
          "--allow-host", `localhost:${reg.port}`
        ])
        await cli(home, ["agent", "send", "intruder", "Go."])
        await waitQuiet(home)
        const out = dataNamed(agentEvents(home, a.session_id), "tool_call.result").map((d) => JSON.stringify(d["result"] ?? "")).join("\n")
        const code = (label: string) => new RegExp(`${label} (\\d{3})`).exec(out)?.[1] ?? "none"
        const codes = { loopback: code("loopback"), localhost: code("localhost"), port22: code("port22"), allowed: code("allowed") }
        const reached = reg.requests().filter((r) => r.url === "/blob/1" || r.url === "/blob/2").length
        const denied = dataNamed(agentEvents(home, a.session_id), "egress.request").filter((e) => e["allowed"] === false).length
        return {
          // The allowed request is the control: the proxy works, so the refusals are its own.
          breached: codes.loopback !== "403" || codes.localhost !== "403" || codes.port22 !== "403" || codes.allowed !== "200" || reached > 0,
          detail: `codes ${JSON.stringify(codes)}; requests that reached the local service: ${reached}; denied egress.request events: ${denied}`
        }
      })
    } finally {
      await owned.killAll()
      for (const h of homes) removeDir(h)
      await reg.close()
      removeDir(dir)
      for (const [k, v] of [["SUBSTRAT_EGRESS_TEST_RESOLVE", saved.r], ["SUBSTRAT_EGRESS_NPM", saved.n]] as const) {
        if (v === undefined) delete process.env[k]
        else process.env[k] = v
      }
    }
  }
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
  run: async () => {
    const owned = daemons()
    const dir = makeTmpDir("sec-egress-flood-")
    const homes: Array<string> = []
    const saved = { r: process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"], n: process.env["SUBSTRAT_EGRESS_NPM"] }
    const reg = await startFakeRegistry(dir, NPM, "pypi.substrat-test")
    try {
      process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"] = `${NPM}=127.0.0.1`
      process.env["SUBSTRAT_EGRESS_NPM"] = `${NPM}:${reg.port}`
      return await withLlm([
        { match: { system: "AGENT=flooder" }, reply: ScriptedLlm.Reply.toolCall("Bash", { command: floodScript(reg.port), description: "flood" }), label: "bash" },
        { match: { system: "AGENT=flooder" }, reply: ScriptedLlm.Reply.text("done"), label: "done" }
      ], async (llm) => {
        const home = claudeMeteredHome(llm, homes, "scf-")
        owned.track(await startDaemon(home))
        const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "flooder", "--instructions", "AGENT=flooder Work.", "--allow", "npm"])
        await cli(home, ["agent", "send", "flooder", "Go."])
        await waitQuiet(home)
        const out = dataNamed(agentEvents(home, a.session_id), "tool_call.result").map((d) => JSON.stringify(d["result"] ?? "")).join("\n")
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
    } finally {
      await owned.killAll()
      for (const h of homes) removeDir(h)
      await reg.close()
      removeDir(dir)
      for (const [k, v] of [["SUBSTRAT_EGRESS_TEST_RESOLVE", saved.r], ["SUBSTRAT_EGRESS_NPM", saved.n]] as const) {
        if (v === undefined) delete process.env[k]
        else process.env[k] = v
      }
    }
  }
}

export const attacks: ReadonlyArray<Attack> = [backIn, flood]
