// A fake package registry on 127.0.0.1 for the egress tests (offline): an npm package (metadata
// + tarball) and a PyPI simple index + wheel, plus /blob/<n> (n bytes), /bigheader/<n> (a response
// whose head carries an n-byte header) and a raw TCP listener that holds connections open. It
// counts every request and the body bytes it sent.
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Path from "node:path"

export interface FakeRegistry {
  readonly port: number
  /** A TCP listener that accepts and holds connections (for connection floods). */
  readonly holdPort: number
  readonly requests: () => ReadonlyArray<{ readonly method: string; readonly url: string; readonly host: string; readonly bytes: number }>
  readonly close: () => Promise<void>
}

export const NPM_PACKAGE = "substrat-fake-pkg"
export const PY_PACKAGE = "substratfakepy"

const wheelOf = (dir: string): Buffer => {
  const out = Path.join(dir, `${PY_PACKAGE}-1.0.0-py3-none-any.whl`)
  const py = [
    "import zipfile, sys",
    "z = zipfile.ZipFile(sys.argv[1], 'w')",
    `z.writestr('${PY_PACKAGE}/__init__.py', 'VALUE = 42\\n')`,
    `z.writestr('${PY_PACKAGE}-1.0.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: ${PY_PACKAGE}\\nVersion: 1.0.0\\n')`,
    `z.writestr('${PY_PACKAGE}-1.0.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')`,
    `z.writestr('${PY_PACKAGE}-1.0.0.dist-info/RECORD', '')`,
    "z.close()"
  ].join("\n")
  execFileSync("/usr/bin/python3", ["-c", py, out])
  return Fs.readFileSync(out)
}

const tarballOf = (dir: string): Buffer => {
  const pkg = Path.join(dir, "package")
  Fs.mkdirSync(pkg, { recursive: true })
  Fs.writeFileSync(Path.join(pkg, "package.json"), JSON.stringify({ name: NPM_PACKAGE, version: "1.0.0", main: "index.js" }))
  Fs.writeFileSync(Path.join(pkg, "index.js"), "module.exports = 42\n")
  const out = Path.join(dir, "pkg.tgz")
  execFileSync("tar", ["czf", out, "-C", dir, "package"])
  return Fs.readFileSync(out)
}

/** `npmHost`/`pyHost`: the names the tarball and file URLs use (resolved by the test's resolver override). */
export const startFakeRegistry = async (dir: string, npmHost: string, pyHost: string): Promise<FakeRegistry> => {
  const tgz = tarballOf(dir)
  const whl = wheelOf(dir)
  const log: Array<{ method: string; url: string; host: string; bytes: number }> = []
  let port = 0
  // Heads up to 1 MiB are taken (more than Node's default 16 KiB), so an oversized request head
  // the egress proxy let through shows up here as a request, not as the registry's own 431.
  const server = Http.createServer({ maxHeaderSize: 1024 * 1024 }, (req, res) => {
    const url = req.url ?? "/"
    const entry = { method: req.method ?? "GET", url, host: String(req.headers.host ?? ""), bytes: 0 }
    log.push(entry)
    const send = (status: number, type: string, body: Buffer | string) => {
      const b = typeof body === "string" ? Buffer.from(body) : body
      entry.bytes = b.length
      res.writeHead(status, { "content-type": type, "content-length": b.length })
      res.end(b)
    }
    req.resume()
    if (url === `/${NPM_PACKAGE}`) {
      const tarball = `http://${npmHost}:${port}/${NPM_PACKAGE}/-/${NPM_PACKAGE}-1.0.0.tgz`
      return send(200, "application/json", JSON.stringify({
        name: NPM_PACKAGE,
        "dist-tags": { latest: "1.0.0" },
        versions: {
          "1.0.0": {
            name: NPM_PACKAGE,
            version: "1.0.0",
            main: "index.js",
            dist: {
              tarball,
              shasum: createHash("sha1").update(tgz).digest("hex"),
              integrity: `sha512-${createHash("sha512").update(tgz).digest("base64")}`
            }
          }
        }
      }))
    }
    if (url === `/${NPM_PACKAGE}/-/${NPM_PACKAGE}-1.0.0.tgz`) return send(200, "application/octet-stream", tgz)
    if (url === `/simple/${PY_PACKAGE}/`) {
      const sha = createHash("sha256").update(whl).digest("hex")
      return send(200, "text/html", `<!DOCTYPE html><html><body><a href="http://${pyHost}:${port}/files/${PY_PACKAGE}-1.0.0-py3-none-any.whl#sha256=${sha}">${PY_PACKAGE}-1.0.0-py3-none-any.whl</a></body></html>`)
    }
    if (url === `/files/${PY_PACKAGE}-1.0.0-py3-none-any.whl`) return send(200, "application/octet-stream", whl)
    const blob = /^\/blob\/(\d+)$/.exec(url)
    if (blob !== null) {
      const n = Number(blob[1])
      entry.bytes = n
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": n })
      const chunk = Buffer.alloc(64 * 1024, 120)
      let left = n
      const pump = () => {
        while (left > 0) {
          const c = chunk.subarray(0, Math.min(left, chunk.length))
          left -= c.length
          if (!res.write(c)) return res.once("drain", pump)
        }
        res.end()
      }
      return pump()
    }
    const bigHeader = /^\/bigheader\/(\d+)$/.exec(url)
    if (bigHeader !== null) {
      res.writeHead(200, { "content-type": "text/plain", "x-big": "a".repeat(Number(bigHeader[1])), "content-length": 3 })
      return res.end("ok\n")
    }
    send(404, "text/plain", "not found\n")
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  port = (server.address() as Net.AddressInfo).port
  const held = new Set<Net.Socket>()
  const hold = Net.createServer((s) => {
    held.add(s)
    s.on("close", () => held.delete(s))
    s.on("error", () => s.destroy())
  })
  await new Promise<void>((r) => hold.listen(0, "127.0.0.1", r))
  return {
    port,
    holdPort: (hold.address() as Net.AddressInfo).port,
    requests: () => log,
    close: async () => {
      for (const s of held) s.destroy()
      server.closeAllConnections()
      await Promise.all([new Promise((r) => server.close(r)), new Promise((r) => hold.close(r))])
    }
  }
}
