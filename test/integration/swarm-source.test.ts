// GET /swarm/agents/{id}/source: a swarm node's lines of its file, for the owner only (the HTTP
// token), read no-follow within the swarm's root and at most 1 MiB. Attacks: no token, a symlink
// an agent plants in the code tree in place of a node's file, `..` and encoded spellings of the
// node id, a file over the limit — none answers with a byte of the host file.
import * as fs from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { cli, startDaemon } from "./daemon.support.js"
import { request, type Target } from "./http.support.js"
import { rawHttp } from "./raw-http.support.js"
import { swarmScope, write } from "./swarm.support.js"

const { owned, fresh } = swarmScope("substrat-swarm-source-")
const SECRET = "host-secret-" + "7f3a9c"

describe("swarm node source over HTTP", () => {
  it("shows a node's lines to the token holder; refuses no token, planted links, path spellings, big files", async () => {
    const { home, repo } = fresh()
    const outside = join(home, "..", "secret.py")
    fs.writeFileSync(outside, `def leak():\n    return "${SECRET}"\n`)
    write(repo, "x.py", "import os\n\ndef a():\n    return 1\n\ndef b():\n    return 2\n")
    write(repo, "y.py", "def c():\n    return 3\n")
    write(repo, "big.py", "def big():\n    return 0\n" + "# pad\n".repeat(200_000))
    owned.track(await startDaemon(home, ["--http", "127.0.0.1:0"]))
    const unix: Target = { socketPath: join(home, "http.sock") }
    const port = Number(new URL(fs.readFileSync(join(home, "http.url"), "utf8").trim()).port)
    const token = fs.readFileSync(join(home, "http.token"), "utf8").trim()
    expect((await request(unix, "POST", "/swarm/start", { path: repo, provider: "scripted:echo" })).status).toBe(200)
    const agents = (JSON.parse((await request(unix, "GET", "/swarm/agents")).body) as { agents: ReadonlyArray<{ node_id: string; path: string; kind: string }> }).agents
    const idOf = (path: string, kind: string) => agents.find((a) => a.path === path && a.kind === kind)!.node_id
    const fnB = agents.find((a) => a.path === "x.py" && a.node_id.endsWith(":b"))!.node_id
    const src = (id: string) => "/swarm/agents/" + encodeURIComponent(id) + "/source"

    // The owner: the function's own lines, and a file node's whole file.
    const b = await request(unix, "GET", src(fnB))
    expect(b.status).toBe(200)
    expect(JSON.parse(b.body)).toEqual({ node_id: fnB, path: "x.py", first_line: 6, text: "def b():\n    return 2" })
    const tcp = await rawHttp(port, "GET", src(idOf("y.py", "file")), { token })
    expect(tcp.status).toBe(200)
    expect(JSON.parse(tcp.body)).toMatchObject({ path: "y.py", first_line: 1, text: "def c():\n    return 3" })

    // The CLI: numbered lines, by node id or by the symbol as find: routes it; --json is the RPC's answer.
    const shown = await cli(home, ["swarm", "source", fnB])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toBe(`${fnB}  x.py:6-7\n6  def b():\n7      return 2\n`)
    const bySymbol = await cli(home, ["swarm", "source", "--json", "x.py:b"])
    expect(bySymbol.code, bySymbol.stderr).toBe(0)
    expect(JSON.parse(bySymbol.stdout)).toEqual({ node_id: fnB, path: "x.py", first_line: 6, text: "def b():\n    return 2" })

    // No token on TCP: 401, nothing read.
    const anon = await rawHttp(port, "GET", src(fnB))
    expect(anon.status).toBe(401)
    expect(anon.body).not.toContain("return 2")

    // Over the limit (1 MiB): refused, nothing of it sent.
    const big = await request(unix, "GET", src(idOf("big.py", "file")))
    expect(big.status).toBeGreaterThanOrEqual(400)
    expect(big.body).not.toContain("# pad")
    expect(big.body).toContain("too-large")

    // Spellings of a path instead of a node id: refused before routing or unknown nodes.
    for (const p of [
      "/swarm/agents/..%2F..%2Fsecret.py/source",
      "/swarm/agents/%2e%2e%2fsecret.py/source",
      "/swarm/agents/x.py/../../secret.py/source",
      "/swarm/agents/" + encodeURIComponent(outside) + "/source",
      "/swarm/agents/x.py%23function%3Ab%2F..%2F..%2Fsecret.py/source",
      "/swarm/agents/x.py%2523function%253Ab/source"
    ]) {
      const r = await rawHttp(port, "GET", p, { token })
      expect(r.status, p).toBeGreaterThanOrEqual(400)
      expect(r.body, p).not.toContain(SECRET)
    }

    // An agent swaps y.py for a link to a host file: the node's source is refused, never the host file.
    fs.rmSync(join(repo, "y.py"))
    fs.symlinkSync(outside, join(repo, "y.py"))
    const linked = await request(unix, "GET", src(idOf("y.py", "file")))
    expect(linked.status).toBeGreaterThanOrEqual(400)
    expect(linked.body).not.toContain(SECRET)
    const linkedCli = await cli(home, ["swarm", "source", idOf("y.py", "file")])
    expect(linkedCli.code).not.toBe(0)
    expect(linkedCli.stdout + linkedCli.stderr).not.toContain(SECRET)
    // Refused as a link, or (once the watcher has seen the file go) as an orphaned node.
    expect(linkedCli.stderr).toMatch(/link|orphaned/)
  }, 120_000)
})
