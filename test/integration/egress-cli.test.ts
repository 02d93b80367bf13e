// Egress policy through the real CLI and daemon: --allow/--allow-host on workspace create and
// agent create, workspace allow/deny/inspect/list, a child never wider than its parent, and bad
// input refused with exit 2 and nothing changed; the policy survives a kill -9 of the daemon.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { cli, cliJson, daemons, startDaemon } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-egress-cli-")
const home = join(dir, "home")

interface Ws {
  readonly id: string
  readonly network_access: boolean
  readonly egress: { readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string> }
}

beforeAll(async () => {
  fs.mkdirSync(home, { recursive: true })
  owned.track(await startDaemon(home))
}, 60_000)

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

describe("egress policy (CLI)", () => {
  it("create, allow, deny, inspect; children never wider; bad input exit 2 with nothing changed; durable across kill -9", async () => {
    const web = await cliJson<Ws>(home, ["workspace", "create", "--name", "web", "--allow", "npm", "--allow-host", "*.Example.org"])
    expect(web.egress).toMatchObject({ presets: ["npm"], hosts: ["*.example.org"] })
    expect(web.network_access).toBe(false)
    const plain = await cliJson<Ws>(home, ["workspace", "create", "--name", "plain"])
    expect(plain.egress).toMatchObject({ presets: [], hosts: [] })

    // Bad input: exit 2, named, nothing created or changed.
    for (const args of [
      ["workspace", "create", "--name", "bad1", "--allow-host", "*"],
      ["workspace", "create", "--name", "bad2", "--allow-host", "http://x.org"],
      ["workspace", "create", "--name", "bad3", "--allow", "rubygems"],
      ["workspace", "allow", "web", "x.org:99999"],
      ["workspace", "deny", "web", "not-there.org"],
      ["workspace", "allow", "web"]
    ]) {
      const r = await cli(home, args)
      expect([args.join(" "), r.code]).toEqual([args.join(" "), 2])
    }
    const names = (await cliJson<{ workspaces: ReadonlyArray<{ name: string | null }> }>(home, ["workspace", "list"])).workspaces.map((w) => w.name)
    expect(names.filter((n) => n !== null && n.startsWith("bad"))).toEqual([])

    // A child: within the parent's policy, or refused.
    const child = await cliJson<Ws>(home, ["workspace", "create", "--parent", "web", "--name", "tests", "--allow-host", "a.example.org"])
    expect(child.egress.hosts).toEqual(["a.example.org"])
    const wider = await cli(home, ["workspace", "create", "--parent", "web", "--name", "wide", "--allow", "pypi"])
    expect(wider.code).toBe(2)
    expect(wider.stderr).toContain("preset pypi")
    const widerAllow = await cli(home, ["workspace", "allow", "tests", "other.org"])
    expect(widerAllow.code).toBe(2)
    const inherited = await cliJson<Ws>(home, ["workspace", "create", "--parent", "web", "--name", "inherits"])
    expect(inherited.egress).toMatchObject({ presets: ["npm"], hosts: ["*.example.org"] })

    // allow / deny
    const allowed = await cliJson<Ws>(home, ["workspace", "allow", "web", "files.example.com:8443", "--preset", "pypi"])
    expect(allowed.egress).toMatchObject({ presets: ["npm", "pypi"], hosts: ["*.example.org", "files.example.com:8443"] })
    const denied = await cliJson<Ws>(home, ["workspace", "deny", "web", "*.example.org"])
    expect(denied.egress.hosts).toEqual(["files.example.com:8443"])
    const list = await cli(home, ["workspace", "list"])
    expect(list.stdout).toContain("@npm,@pypi,files.example.com:8443")
    const inspect = await cli(home, ["workspace", "inspect", "web"])
    expect(inspect.code).toBe(0)
    expect(inspect.stdout).toContain("files.example.com:8443")

    // agent create --allow: into the agent's own (default) workspace.
    const agent = await cliJson<{ workspace_id: string }>(home, ["agent", "create", "--name", "coder", "--allow", "go"])
    const agentWs = (await cliJson<{ workspaces: ReadonlyArray<Ws> }>(home, ["workspace", "list"])).workspaces.find((w) => w.id === agent.workspace_id)
    expect(agentWs?.egress.presets).toEqual(["go"])
    const badAgent = await cli(home, ["agent", "create", "--name", "coder2", "--allow", "nope"])
    expect(badAgent.code).toBe(2)
    expect((await cliJson<{ agents: ReadonlyArray<{ name: string }> }>(home, ["agent", "list"])).agents.map((a) => a.name)).not.toContain("coder2")

    // kill -9: the policy is on disk.
    await owned.killAll() // SIGKILL
    owned.track(await startDaemon(home))
    const after = (await cliJson<{ workspaces: ReadonlyArray<Ws & { name: string | null }> }>(home, ["workspace", "list"])).workspaces.find((w) => w.name === "web")
    expect(after?.egress).toMatchObject({ presets: ["npm", "pypi"], hosts: ["files.example.com:8443"] })
  }, 180_000)
})
