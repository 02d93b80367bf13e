// requires: bwrap, git
// `substrat workspace shell` / `agent shell` on a real pseudo-terminal (script(1), SHELL=/bin/sh):
// the shell runs in the workspace's sandbox (no network, /workspace), stdin is a terminal, Ctrl-C
// interrupts the shell's command and not the shell or the CLI, and what the human changed is
// recorded in the workspace history as a turn of "human". A workspace with an egress policy gives
// the shell its proxy (a local fake registry under a test-only name): an allowed host answers, any
// other is refused with the policy's message and an inbox item; the proxy is gone with the shell.
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FakeRegistry, NPM_PACKAGE, startFakeRegistry } from "../support/fakeRegistry.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { cli, cliJson, daemons, launcher, sleep, startDaemon, waitFor } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-shell-")
const home = join(dir, "home")

/** Run `substrat <args>` under script(1), typing `keys` (strings, or pauses in ms) into the terminal. */
const onTerminal = (args: ReadonlyArray<string>, keys: ReadonlyArray<string | number>) =>
  new Promise<{ code: number; out: string }>((resolve) => {
    const command = ["exec", process.execPath, launcher, ...args].map((a) => `'${a}'`).join(" ").replace("'exec'", "exec")
    const child = spawn("script", ["-qec", command, "/dev/null"], {
      env: { ...process.env, SUBSTRAT_HOME: home, SHELL: "/bin/sh", TERM: "dumb" },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let out = ""
    child.stdout.on("data", (d: Buffer) => (out += d.toString("utf8")))
    child.stderr.on("data", (d: Buffer) => (out += d.toString("utf8")))
    child.on("exit", (code) => resolve({ code: code ?? 1, out }))
    void (async () => {
      // Until the shell's prompt is there, what is typed could reach bwrap's setup.
      for (let i = 0; i < 600 && !out.includes("$ "); i++) await sleep(50)
      for (const k of keys) {
        if (typeof k === "number") await sleep(k)
        else child.stdin.write(k)
      }
    })()
  })

interface Workspace {
  readonly id: string
}

const NPM = "npm.substrat-test"
const OTHER = "other.substrat-test"
let reg: FakeRegistry
const saved = process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"]

beforeAll(async () => {
  reg = await startFakeRegistry(dir, NPM, "pypi.substrat-test")
  // Test-only names resolving to the fake registry (the daemon reads it at start).
  process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"] = [NPM, OTHER].map((n) => `${n}=127.0.0.1`).join(",")
  owned.track(await startDaemon(home))
})

afterAll(async () => {
  if (saved === undefined) delete process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"]
  else process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"] = saved
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  await reg.close()
  removeDir(dir)
})

describe("a human's shell in a sandbox", () => {
  it("workspace shell: a terminal, no network, Ctrl-C reaches the shell's command; changes become a human turn", async () => {
    const ws = await cliJson<Workspace>(home, ["workspace", "create", "--name", "web"])
    const r = await onTerminal(["workspace", "shell", ws.id], [
      "[ -t 0 ] && echo IS-A-TERMINAL; pwd\n",
      "echo NET=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,)\n",
      "sleep 60; echo AFTER-SLEEP\n",
      1000,
      "\x03",
      500,
      "echo by hand > notes.txt; echo STILL-HERE\n",
      "exit\n"
    ])
    expect(r.out).toContain(`shell in workspace ${ws.id} (/workspace, no network); exit to return`)
    expect(r.out).toContain("[substrat web] $ ")
    expect(r.out).toContain("IS-A-TERMINAL\r\n/workspace")
    expect(r.out).toContain("NET=lo,")
    expect(r.out).toContain("STILL-HERE")
    expect(r.out).not.toMatch(/^AFTER-SLEEP/m)
    const turn = /recorded 1 changed path\(s\) as turn ([0-9a-f-]{36}) of human \(commit [0-9a-f]{12}\)/.exec(r.out)?.[1]
    expect(turn, r.out).toBeDefined()
    const log = await cliJson<{ turns: ReadonlyArray<{ agent: string; turn_id: string; subject: string }> }>(home, ["workspace", "log", ws.id])
    expect(log.turns[0]).toMatchObject({ agent: "human", turn_id: turn, subject: "human: shell in web" })
    const diff = await cliJson<{ paths: ReadonlyArray<{ path: string; change: string }> }>(home, ["workspace", "diff", ws.id, "--turn", turn!])
    expect(diff.paths).toEqual([{ path: "notes.txt", change: "added" }])
  })

  it("agent shell: the agent's workspace, also the default one of a root created without --workspace", async () => {
    const ws = await cliJson<Workspace>(home, ["workspace", "create", "--name", "team"])
    await cli(home, ["agent", "create", "--name", "beta", "--provider", "scripted:echo", "--workspace", ws.id])
    const r = await onTerminal(["agent", "shell", "beta"], ["exit\n"])
    expect(r.out).toContain(`shell in workspace ${ws.id}`)
    expect(r.out).toContain("[substrat beta] $ ")
    expect(r.out).toContain("no changes to record")
    await cli(home, ["agent", "create", "--name", "loner", "--provider", "scripted:echo"])
    const list = await cliJson<{ workspaces: ReadonlyArray<Workspace & { readonly default_for: string | null }> }>(home, ["workspace", "list"])
    const own = list.workspaces.find((w) => w.default_for === "loner")
    expect(own).toBeDefined()
    const l = await onTerminal(["agent", "shell", "loner"], ["exit\n"])
    expect(l.out).toContain(`shell in workspace ${own!.id}`)
    expect(l.out).toContain("[substrat loner] $ ")
  })
  it("workspace shell with an egress policy: the allowed host answers through the proxy, another is refused and asked about; the proxy ends with the shell", async () => {
    const ws = await cliJson<Workspace>(home, ["workspace", "create", "--name", "deps", "--allow-host", `${NPM}:${reg.port}`])
    // A plain HTTP request through the relay the shell's HTTP_PROXY names (absolute-form, as curl or npm send it).
    const get = (host: string) =>
      `node -e 'const u=new URL(process.env.HTTP_PROXY);require("http").get({host:u.hostname,port:u.port,path:"http://${host}:${reg.port}/${NPM_PACKAGE}"},(r)=>{let b="";r.on("data",(d)=>b+=d);r.on("end",()=>console.log("STATUS="+r.statusCode+" "+b.replace(/\\s+/g," ").slice(0,160)))}).on("error",(e)=>console.log("ERR="+e.message))'\n`
    const before = reg.requests().length
    const r = await onTerminal(["workspace", "shell", ws.id], [get(NPM), 1500, get(OTHER), 1500, "exit\n"])
    expect(r.out).toContain(`(/workspace, egress through the proxy to ${NPM}:${reg.port})`)
    expect(r.out).toMatch(/STATUS=200 \{"name":"substrat-fake-pkg"/)
    expect(r.out).toMatch(new RegExp(`STATUS=403 .*${OTHER.replace(/\./g, "\\.")}:${reg.port} is not in the egress policy of workspace deps`))
    // Only the allowed request reached the registry.
    expect(reg.requests().slice(before).map((q) => q.host)).toEqual([`${NPM}:${reg.port}`])
    // The refusal is an inbox item for the human; both requests are in the daemon's log.
    const inbox = await cliJson<{ items: ReadonlyArray<{ kind: string; text: string }> }>(home, ["inbox"])
    expect(inbox.items.filter((i) => i.kind === "egress").map((i) => i.text)).toEqual([
      expect.stringContaining(`human shell asked for ${OTHER}:${reg.port} (workspace deps)`)
    ])
    const daemonLog = fs.readFileSync(join(home, "daemon.log"), "utf8")
    expect(daemonLog).toContain(`egress (human shell in workspace deps)`)
    expect(daemonLog).toMatch(new RegExp(`"host":"${OTHER.replace(/\./g, "\\.")}".*"allowed":false`))
    // The shell's proxy socket is gone with the shell.
    await waitFor("the shell's proxy socket removed", () => fs.readdirSync(join(home, "workspaces", ws.id)).some((n) => n.endsWith(".sock")) ? undefined : true)
  })
})
