// requires: bwrap
// Egress with the REAL Claude Code binary, sandboxed (bwrap, network off), through the daemon and
// CLI, against the scripted Anthropic endpoint. The agent's own Bash tool runs `npm install` of a
// package from a fake registry on 127.0.0.1 through the daemon's egress proxy: the daemon is
// started with `egress.testResolve` (SUBSTRAT_EGRESS_TEST_RESOLVE, tests only: names under
// .substrat-test) so the registry's test-only names resolve to 127.0.0.1, and the `npm` preset
// (SUBSTRAT_EGRESS_NPM) is the registry's host:port, so `--allow npm` is what lets it through.
//   1. `npm install` lands the package's bytes in the agent's workspace; every request the
//      registry served is one allowed `egress.request` with the bytes it sent; a host the policy
//      does not name gets a 403 naming the policy, one denied event and one inbox item; `agent
//      logs` shows the Bash call and the egress lines.
//   2. Approval across kill -9: a host approved before the kill stays allowed after it; a request
//      still pending at the kill is in the inbox after the restart, and approving it then lets
//      the agent's next try through.
//   3. Over HTTP (the dashboard's routes, TCP with the token rule): the egress items are in
//      `GET /v1/inbox` and each request is an `egress.request` entry of `GET /v1/events`; neither
//      a request without the token nor a session-cookie write from a foreign Origin can approve
//      (401, policy unchanged); the cookie from the daemon's own Origin approves one host
//      (allowlisted), the bearer token dismisses the other (not allowlisted, item gone).
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, kill9, startDaemon, waitQuiet } from "../integration/daemon.support.js"
import { request, sse, type Target } from "../integration/http.support.js"
import { type FakeRegistry, NPM_PACKAGE, startFakeRegistry } from "../support/fakeRegistry.js"
import { makeTmpDir } from "../support/tmp.js"
import { agentEvents, claudeMeteredHome, claudeMeterEnvKeys, daemonTestScope, dataNamed, withLlm } from "./support.js"

const NPM = "npm.substrat-test"
const FILES = "files.substrat-test"
const MIRROR = "mirror.substrat-test"
const envKeys = [...claudeMeterEnvKeys, "SUBSTRAT_EGRESS_TEST_RESOLVE", "SUBSTRAT_EGRESS_NPM"] as const
const { ds, homes } = daemonTestScope(envKeys)

const bash = (command: string) => Reply.toolCall("Bash", { command, description: "egress" })

/** A fake registry in a scratch directory (removed with the homes), its names resolved to it. */
const registry = async (): Promise<FakeRegistry> => {
  const dir = makeTmpDir("egc-reg-")
  homes.push(dir)
  const reg = await startFakeRegistry(dir, NPM, "pypi.substrat-test")
  process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"] = [NPM, FILES, MIRROR].map((n) => `${n}=127.0.0.1`).join(",")
  process.env["SUBSTRAT_EGRESS_NPM"] = `${NPM}:${reg.port}`
  return reg
}

const bashResults = (home: string, sid: string) =>
  dataNamed(agentEvents(home, sid), "tool_call.result").filter((d) => d["tool"] === "Bash").map((d) => JSON.stringify(d["result"] ?? ""))

interface InboxItem {
  readonly id: string
  readonly kind: string
  readonly text: string
}
const egressItems = async (home: string) =>
  (await cliJson<{ items: ReadonlyArray<InboxItem> }>(home, ["inbox"])).items.filter((i) => i.kind === "egress")

const workspaceOf = async (home: string, id: string) =>
  (await cliJson<{ workspaces: ReadonlyArray<{ id: string; root_path: string; egress: { hosts: ReadonlyArray<string> } }> }>(home, ["workspace", "list"]))
    .workspaces.find((w) => w.id === id)!

describe("egress with a real sandboxed claude", () => {
  it("its Bash runs npm install through the proxy: bytes in the workspace, one event per request; a host not allowed gets a 403 and one inbox item", async () => {
    const reg = await registry()
    const install = [
      "cd /workspace",
      `npm install ${NPM_PACKAGE} --registry http://${NPM}:${reg.port}/ --no-audit --no-fund --no-update-notifier --fetch-retries 0 > /tmp/npm.log 2>&1; echo NPM-EXIT $?`,
      `curl -sS -w 'CODE %{http_code}\\n' http://${FILES}:${reg.port}/blob/10`
    ].join("; ")
    await withLlm([
      { match: { system: "AGENT=coder" }, reply: bash(install), label: "bash" },
      { match: { system: "AGENT=coder" }, reply: Reply.text("installed"), label: "done" }
    ], async (llm) => {
      const home = claudeMeteredHome(llm, homes, "egc-")
      ds.track(await startDaemon(home))
      const coder = await cliJson<Agent & { workspace_id: string }>(home, [
        "agent", "create", "--provider", "claude", "--name", "coder", "--instructions", "AGENT=coder Work.", "--allow", "npm"
      ])
      const before = reg.requests().length
      await cli(home, ["agent", "send", "coder", "Install the package."])
      await waitQuiet(home)

      // The package's bytes, in the agent's workspace on disk.
      const ws = await workspaceOf(home, coder.workspace_id)
      const out = bashResults(home, coder.session_id).join("\n")
      expect(out).toContain("NPM-EXIT 0")
      expect(Fs.readFileSync(Path.join(ws.root_path, "node_modules", NPM_PACKAGE, "index.js"), "utf8")).toBe("module.exports = 42\n")
      expect(JSON.parse(Fs.readFileSync(Path.join(ws.root_path, "node_modules", NPM_PACKAGE, "package.json"), "utf8")).version).toBe("1.0.0")

      // One allowed event per request the registry served for npm, with the bytes it sent.
      const served = reg.requests().slice(before).filter((r) => r.host === `${NPM}:${reg.port}`)
      expect(served.map((r) => r.url).sort()).toEqual([`/${NPM_PACKAGE}`, `/${NPM_PACKAGE}/-/${NPM_PACKAGE}-1.0.0.tgz`])
      const events = dataNamed(agentEvents(home, coder.session_id), "egress.request")
      const allowed = events.filter((e) => e["allowed"] === true)
      expect(allowed.length).toBe(served.length)
      expect(allowed.every((e) => e["host"] === NPM && e["port"] === reg.port && e["rule"] === "preset npm" && e["status"] === 200)).toBe(true)
      expect(allowed.map((e) => e["bytes_down"]).sort()).toEqual(served.map((r) => r.bytes).sort())

      // The host not allowed: a 403 naming the policy, never reached, one denied event, one inbox item.
      expect(out).toContain("CODE 403")
      expect(out).toContain(`${FILES}:${reg.port} is not in the egress policy`)
      expect(reg.requests().some((r) => r.host.startsWith(FILES))).toBe(false)
      const refused = events.filter((e) => e["allowed"] === false)
      expect(refused.map((e) => [e["host"], e["status"]])).toEqual([[FILES, 403]])
      const items = await egressItems(home)
      expect(items.length).toBe(1)
      expect(items[0]!.text).toContain(`coder asked for ${FILES}:${reg.port}`)
      expect(refused[0]!["item_id"]).toBe(items[0]!.id)

      // The transcript: the Bash call and one line per egress request.
      const logs = await cli(home, ["agent", "logs", "coder"])
      expect(logs.stdout).toMatch(/coder ⚙ Bash .*npm install/)
      expect(logs.stdout.match(/⇄ egress /g)?.length).toBe(allowed.length)
      expect(logs.stdout).toContain(`⊘ egress GET ${FILES}:${reg.port} denied`)
    })
    await reg.close()
  }, 240_000)

  it("approval across kill -9: an approval made before the kill holds; a request pending at the kill is approved after the restart and the next try gets through", async () => {
    const reg = await registry()
    const fetch = (n: number) =>
      [FILES, MIRROR].map((h) => `curl -sS -o /dev/null -w '${h} %{http_code}\\n' http://${h}:${reg.port}/blob/${n}`).join("; ")
    await withLlm([
      { match: { system: "AGENT=coder", lastUser: "First try." }, reply: bash(fetch(11)), label: "try1" },
      { match: { system: "AGENT=coder", lastUser: "Second try." }, reply: bash(fetch(22)), label: "try2" },
      { match: { system: "AGENT=coder" }, reply: Reply.text("tried"), times: 2, label: "done" }
    ], async (llm) => {
      const home = claudeMeteredHome(llm, homes, "egk-")
      const pid = await startDaemon(home)
      ds.track(pid)
      const coder = await cliJson<Agent & { workspace_id: string }>(home, [
        "agent", "create", "--provider", "claude", "--name", "coder", "--instructions", "AGENT=coder Work.", "--allow", "npm"
      ])
      await cli(home, ["agent", "send", "coder", "First try."])
      await waitQuiet(home)
      expect(bashResults(home, coder.session_id).join("\n")).toMatch(new RegExp(`${FILES} 403.*${MIRROR} 403`, "s"))
      const asked = await egressItems(home)
      const itemFor = (h: string) => asked.find((i) => i.text.includes(`coder asked for ${h}:${reg.port}`))!
      expect(asked.length).toBe(2)

      // files: approved before the kill; mirror: still pending when the daemon is killed.
      expect((await cli(home, ["inbox", "answer", itemFor(FILES).id, "approve"])).code).toBe(0)
      await kill9(pid)
      ds.track(await startDaemon(home))

      expect((await workspaceOf(home, coder.workspace_id)).egress.hosts).toEqual([`${FILES}:${reg.port}`])
      const pending = await egressItems(home)
      expect(pending.map((i) => i.id)).toEqual([itemFor(MIRROR).id])
      const ok = await cli(home, ["inbox", "answer", itemFor(MIRROR).id, "approve"])
      expect(ok.code, ok.stderr).toBe(0)
      expect(await egressItems(home)).toEqual([])

      await cli(home, ["agent", "send", "coder", "Second try."])
      await waitQuiet(home)
      const second = bashResults(home, coder.session_id).slice(-1)[0] ?? ""
      expect(second).toContain(`${FILES} 200`)
      expect(second).toContain(`${MIRROR} 200`)
      const got = reg.requests().filter((r) => r.url === "/blob/22").map((r) => r.host.split(":")[0]).sort()
      expect(got).toEqual([FILES, MIRROR])
      const allowed = dataNamed(agentEvents(home, coder.session_id), "egress.request").filter((e) => e["allowed"] === true)
      expect(allowed.map((e) => [e["host"], e["rule"], e["bytes_down"]]).sort()).toEqual([
        [FILES, `${FILES}:${reg.port}`, 22],
        [MIRROR, `${MIRROR}:${reg.port}`, 22]
      ])
    })
    await reg.close()
  }, 300_000)

  it("over HTTP: egress items and events are served; no token or a foreign Origin cannot approve; the owner's cookie approves, the token dismisses", async () => {
    const reg = await registry()
    const fetch = [FILES, MIRROR].map((h) => `curl -sS -o /dev/null -w '${h} %{http_code}\\n' http://${h}:${reg.port}/blob/7`).join("; ")
    await withLlm([
      { match: { system: "AGENT=coder", lastUser: "Try." }, reply: bash(fetch), label: "try" },
      { match: { system: "AGENT=coder" }, reply: Reply.text("tried"), label: "done" }
    ], async (llm) => {
      const home = claudeMeteredHome(llm, homes, "egh-")
      ds.track(await startDaemon(home, ["--http", "127.0.0.1:0"]))
      const base = Fs.readFileSync(Path.join(home, "http.url"), "utf8").trim()
      const own = new URL(base).origin
      const tcp: Target = { base }
      const authed: Target = { base, token: Fs.readFileSync(Path.join(home, "http.token"), "utf8").trim() }
      const coder = await cliJson<Agent & { workspace_id: string }>(home, [
        "agent", "create", "--provider", "claude", "--name", "coder", "--instructions", "AGENT=coder Work.", "--allow", "npm"
      ])
      await cli(home, ["agent", "send", "coder", "Try."])
      await waitQuiet(home)

      const listed = await request(authed, "GET", "/v1/inbox")
      expect(listed.status).toBe(200)
      const items = listed.json<{ items: ReadonlyArray<InboxItem & { agent_name: string }> }>().items.filter((i) => i.kind === "egress")
      const itemFor = (h: string) => items.find((i) => i.text.includes(`coder asked for ${h}:${reg.port}`))!
      expect(items.length).toBe(2)
      expect(itemFor(FILES).agent_name).toBe("coder")

      // The transcript feed carries each request as an egress.request entry.
      const feed = sse(authed, "/v1/events?agent=coder")
      const denied = (): ReadonlyArray<string> => feed.frames.map((f) => f.data).filter((d) => d.includes('"egress.request"'))
      for (let i = 0; i < 200 && denied().length < 2; i++) await new Promise((r) => setTimeout(r, 50))
      feed.close()
      expect(denied().length).toBe(2)
      expect(denied().every((d) => d.includes('"allowed":false'))).toBe(true)

      // Not the owner: no token; a session cookie but a foreign Origin. Nothing changes.
      const approve = { text: "approve" }
      expect((await request(tcp, "POST", `/v1/inbox/${itemFor(FILES).id}/answer`, approve)).status).toBe(401)
      const { url } = await cliJson<{ url: string }>(home, ["ui", "--no-open"])
      const code = decodeURIComponent(/#code=([^&]+)$/.exec(url)![1]!)
      const login = await request(tcp, "POST", "/login", { code })
      expect(login.status).toBe(204)
      const cookie = String(login.headers["set-cookie"]).split(";")[0]!
      const foreign = await request(tcp, "POST", `/v1/inbox/${itemFor(FILES).id}/answer`, approve, { cookie, origin: "http://evil.example" })
      expect(foreign.status).toBe(401)
      expect((await workspaceOf(home, coder.workspace_id)).egress.hosts).toEqual([])
      expect((await egressItems(home)).length).toBe(2)

      // The owner: the dashboard's cookie from its own Origin approves; the token dismisses.
      const ok = await request(tcp, "POST", `/v1/inbox/${itemFor(FILES).id}/answer`, approve, { cookie, origin: own })
      expect(ok.status, ok.body).toBe(200)
      expect(ok.json<{ kind: string }>().kind).toBe("approve")
      const gone = await request(authed, "POST", `/v1/inbox/${itemFor(MIRROR).id}/answer`, { text: "dismiss" })
      expect(gone.status, gone.body).toBe(200)
      expect(gone.json<{ kind: string }>().kind).toBe("dismiss")
      expect((await workspaceOf(home, coder.workspace_id)).egress.hosts).toEqual([`${FILES}:${reg.port}`])
      expect(await egressItems(home)).toEqual([])
    })
    await reg.close()
  }, 240_000)
})
