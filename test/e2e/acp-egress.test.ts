// requires: bwrap
// Egress for ACP agents (daemon + CLI): the in-repo ACP test agent (test/fixtures/acp-agent.ts) in
// its bwrap sandbox, network off, in a workspace that allows one host of the local fake registry.
// Its process lives across turns, so the proxy is served as long as it does:
//   - the agent process itself GETs the allowed host through HTTP_PROXY (turn 1 and turn 2: the
//     same process, still served); a host not allowed gets the policy's 403 and one inbox item;
//   - a command in a client terminal (`terminal/create`, a sandbox run of its own) gets the proxy
//     settings too;
//   - each request is one `egress.request` line in the agent's log; only allowed ones reach the registry;
//   - the per-turn byte limit counts per turn, not per process: a turn under the limit after one
//     that reached it gets through.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, daemons, startDaemon } from "../integration/daemon.support.js"
import { bundleAcpAgent } from "../support/acpAgent.js"
import { startFakeRegistry } from "../support/fakeRegistry.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const FILES = "files.substrat-test"
const OTHER = "other.substrat-test"
const owned = daemons()
const dirs: Array<string> = []
const saved = { resolve: process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"], perTurn: process.env["SUBSTRAT_EGRESS_BYTES_PER_TURN"] }
afterAll(async () => {
  await owned.killAll()
  for (const d of dirs) removeDir(d)
  for (const [k, v] of [["SUBSTRAT_EGRESS_TEST_RESOLVE", saved.resolve], ["SUBSTRAT_EGRESS_BYTES_PER_TURN", saved.perTurn]] as const) {
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
})

describe("egress for an ACP agent (its process lives across turns)", () => {
  it("the agent's process and its terminals reach the allowed host through the proxy, turn after turn; another host gets the policy's 403; the byte limit counts per turn", async () => {
    const h = makeTmpDir("sacpeg-")
    dirs.push(h)
    Fs.chmodSync(h, 0o755)
    const reg = await startFakeRegistry(Path.join(h, "reg"), "npm.substrat-test", "pypi.substrat-test")
    try {
      process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"] = [FILES, OTHER].map((n) => `${n}=127.0.0.1`).join(",")
      process.env["SUBSTRAT_EGRESS_BYTES_PER_TURN"] = "50000"
      owned.track(await startDaemon(h))
      const provider = `acp:/usr/bin/node ${bundleAcpAgent(h)}`
      await cliJson<Agent>(h, ["agent", "create", "--provider", provider, "--name", "acpnet", "--allow-host", `${FILES}:${reg.port}`])
      const ask = async (text: string) => {
        const r = await cli(h, ["agent", "send", "--wait", "acpnet", text])
        expect(r.code, r.stderr).toBe(0)
        return r.stdout.trim()
      }
      const allowed = `http://${FILES}:${reg.port}/blob/7`
      // Turn 1 and 2: the same process, the proxy still served.
      expect(await ask(`FETCH ${allowed}`)).toBe("fetch 200 7: xxxxxxx")
      expect(await ask(`FETCH ${allowed}`)).toBe("fetch 200 7: xxxxxxx")
      // A host the workspace does not allow: the policy's 403, naming how a human allows it.
      const denied = await ask(`FETCH http://${OTHER}:${reg.port}/blob/5`)
      expect(denied).toMatch(/^fetch 403 \d+: substrat egress: other\.substrat-test:\d+ is not in the egress policy/)
      // A client terminal (a sandbox run of its own) gets the proxy settings too.
      expect(await ask(`TERM curl -sS ${allowed}`)).toBe("exit 0: xxxxxxx")
      // Past the per-turn limit: this turn's download is cut; the next turn's small one gets through.
      // (a 429, or the connection ended before or during the body)
      expect(await ask(`FETCH http://${FILES}:${reg.port}/blob/400000`)).toMatch(/^fetch (429 |200 cut after \d+ bytes$|error: socket hang up$)/)
      expect(await ask(`FETCH ${allowed}`)).toBe("fetch 200 7: xxxxxxx")

      const logs = (await cli(h, ["agent", "logs", "acpnet"])).stdout
      const lines = logs.split("\n").filter((l) => l.includes("egress"))
      expect(lines.filter((l) => l.includes(`GET ${FILES}:${reg.port}`)).length).toBe(5)
      expect(lines.filter((l) => l.includes(`GET ${OTHER}:${reg.port}`) && l.includes("denied")).length).toBe(1)
      expect(lines.some((l) => l.includes("egress.bytesPerTurn"))).toBe(true)
      // Only allowed requests reached the registry.
      expect(reg.requests().filter((r) => r.host.startsWith(OTHER))).toEqual([])
      expect(reg.requests().filter((r) => r.url === "/blob/7").length).toBe(4)
      const items = (await cliJson<{ items: ReadonlyArray<{ kind: string; text: string }> }>(h, ["inbox"])).items
      expect(items.filter((i) => i.kind === "egress" && i.text.includes(`acpnet asked for ${OTHER}:${reg.port}`)).length).toBe(1)
    } finally {
      await reg.close()
    }
  }, 180_000)
})
