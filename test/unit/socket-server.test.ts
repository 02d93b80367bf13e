// listenScoped (src/sandbox/SocketServer.ts), the one place the daemon serves an owner-only
// Unix socket for a scope (the model forwarder's and the egress proxy's): a stale socket file is
// replaced, anything else at the path is refused and left alone, the socket is 0600 in a 0700
// directory, and closing the scope runs `beforeClose`, ends open connections and removes the file.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Path from "node:path"
import { listenScoped } from "../../src/sandbox/SocketServer.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const get = (socketPath: string) =>
  new Promise<string>((resolve, reject) => {
    Http.get({ socketPath, path: "/" }, (res) => {
      let out = ""
      res.on("data", (b: Buffer) => (out += b.toString()))
      res.on("end", () => resolve(out))
    }).on("error", reject)
  })

describe("listenScoped", () => {
  it("replaces a stale socket, serves 0600, and on scope close ends connections, runs beforeClose, removes the file", async () => {
    const dir = makeTmpDir("sockserver-")
    try {
      const socketPath = Path.join(dir, "sub", "x.sock")
      Fs.mkdirSync(Path.dirname(socketPath))
      // A stale socket file (bound by a process that is gone; node would unlink its own on close).
      execFileSync("/usr/bin/python3", ["-c", "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", socketPath])
      expect(Fs.lstatSync(socketPath).isSocket()).toBe(true)

      const held = new Set<Net.Socket>()
      let before = 0
      const server = Http.createServer((_q, res) => res.end("ok"))
      server.on("connection", (s) => held.add(s))
      const scope = await Effect.runPromise(Scope.make())
      const r = await Effect.runPromise(Effect.either(listenScoped(server, socketPath, () => before++).pipe(Scope.extend(scope))))
      expect(r._tag).toBe("Right")
      expect(Fs.statSync(socketPath).mode & 0o777).toBe(0o600)
      expect(await get(socketPath)).toBe("ok")
      const open = Net.connect(socketPath)
      const closed = new Promise<void>((r) => open.on("close", () => r()))
      await new Promise<void>((r) => open.on("connect", () => r()))
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await closed
      expect(before).toBe(1)
      expect(Fs.existsSync(socketPath)).toBe(false)
    } finally {
      removeDir(dir)
    }
  })

  it("refuses a path that holds anything but a socket, and leaves it as it was", async () => {
    const dir = makeTmpDir("sockserver-")
    try {
      const file = Path.join(dir, "x.sock")
      Fs.writeFileSync(file, "keep me")
      const link = Path.join(dir, "l.sock")
      Fs.symlinkSync(file, link)
      for (const p of [file, link]) {
        const r = await Effect.runPromise(Effect.either(Effect.scoped(listenScoped(Http.createServer(), p))))
        expect(r._tag).toBe("Left")
        if (r._tag === "Left") expect(r.left.message).toContain("is not a socket")
      }
      expect(Fs.readFileSync(file, "utf8")).toBe("keep me")
      expect(Fs.lstatSync(link).isSymbolicLink()).toBe(true)
    } finally {
      removeDir(dir)
    }
  })
})
