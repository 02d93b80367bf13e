#!/usr/bin/env node
// llm-forward: give a TCP-only client (Codex) a model endpoint that is really a Unix socket.
//
//   node llm-forward.mjs --socket /run/llm.sock [--port 0] [--keep-args] -- codex exec ... {port} ...
//
// Listens on 127.0.0.1:<port> (0 = any free port), relays every connection byte-for-byte to the
// Unix socket, then runs the command with `{port}` in its arguments replaced by the real port
// (and SUBSTRAT_LLM_PORT set; with --keep-args nothing is replaced: the egress relay wraps
// commands that may hold another relay's `{port}`), stdio inherited. Exits with the command's exit code (128+n on a
// signal); SIGTERM/SIGINT/SIGHUP are passed on to the command. Plain JS with no dependencies, so
// it runs inside a bwrap sandbox with only `node` available. Inside `--unshare-net` the sandbox
// has its own loopback, so the listener is invisible to the host and to other sandboxes.
// It runs as a separate script inside the sandbox, so it passes its own environment on to the
// command (the one exception to "only src/config/Config.ts reads process.env").
import { spawn } from "node:child_process"
import * as net from "node:net"
import { constants } from "node:os"

const argv = process.argv.slice(2)
const sep = argv.indexOf("--")
const opts = sep < 0 ? argv : argv.slice(0, sep)
const command = sep < 0 ? [] : argv.slice(sep + 1)
const opt = (name) => {
  const i = opts.indexOf(name)
  return i >= 0 ? opts[i + 1] : undefined
}
const socketPath = opt("--socket")
const port = Number(opt("--port") ?? "0")
const keepArgs = opts.includes("--keep-args")
if (socketPath === undefined || command.length === 0) {
  process.stderr.write("usage: llm-forward --socket PATH [--port N] -- command args... ({port} is substituted)\n")
  process.exit(2)
}

const server = net.createServer((client) => {
  const upstream = net.createConnection(socketPath)
  client.pipe(upstream)
  upstream.pipe(client)
  const close = () => {
    client.destroy()
    upstream.destroy()
  }
  client.on("error", close)
  upstream.on("error", close)
  client.on("close", close)
  upstream.on("close", close)
})

server.on("error", (e) => {
  process.stderr.write(`llm-forward: ${e.message}\n`)
  process.exit(70)
})

server.listen(port, "127.0.0.1", () => {
  const actual = String(server.address().port)
  const args = keepArgs ? command : command.map((a) => a.split("{port}").join(actual))
  const child = spawn(args[0], args.slice(1), {
    stdio: "inherit",
    env: keepArgs ? process.env : { ...process.env, SUBSTRAT_LLM_PORT: actual }
  })
  for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(sig, () => child.kill(sig))
  child.on("error", (e) => {
    process.stderr.write(`llm-forward: cannot run ${args[0]}: ${e.message}\n`)
    process.exit(127)
  })
  child.on("exit", (code, signal) => {
    server.close()
    process.exit(code ?? 128 + (signal === null ? 0 : (constants.signals[signal] ?? 0)))
  })
})
