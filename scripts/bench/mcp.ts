// MCP server start-up: the provider CLIs spawn `substrat mcp-server` once per turn, so what
// matters is spawn → `initialize` answered → `tools/list` answered → first `tools/call` answered
// (against a live agent socket on an in-memory orchestrator). Measured for the server run from
// source through tsx, as an esbuild bundle (like scripts/build.ts makes), and as that bundle
// through a V8 code cache (like scripts/substrat.js runs dist/cli.cjs); baseline: `node -e 0`.
import { Effect, Layer, ManagedRuntime, Scope, Exit } from "effect"
import * as esbuild from "esbuild"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import * as AgentSocket from "../../src/mcp/AgentSocket.js"
import * as ScriptedProvider from "../../src/provider/scripted/ScriptedProvider.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import type { BenchOptions, BenchResult } from "./types.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { SessionStore } from "../../src/storage/SessionStore.js"

export const name = "mcp"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")

const stubPlugin: esbuild.Plugin = {
  name: "stub-unused",
  setup(build) {
    build.onResolve({ filter: /^(msgpackr|fast-check)$/ }, (args) => ({ path: args.path, namespace: "stub" }))
    build.onLoad({ filter: /.*/, namespace: "stub" }, () => ({ contents: "module.exports = {}", loader: "js" }))
  }
}

/** A code-cache loader for a CJS bundle (the technique of scripts/substrat.js). */
const loaderSource = `const fs=require("fs"),vm=require("vm"),Module=require("module"),path=require("path");
const file=process.argv[2];process.argv.splice(2,1);
const src=fs.readFileSync(file,"utf8"),cacheFile=file+".cache";let cachedData;try{cachedData=fs.readFileSync(cacheFile)}catch{}
const script=new vm.Script(Module.wrap(src),{filename:file,cachedData});
if(cachedData===undefined||script.cachedDataRejected)process.once("exit",()=>{try{fs.writeFileSync(cacheFile,script.createCachedData())}catch{}});
const mod={exports:{}};script.runInThisContext()(mod.exports,Module.createRequire(file),mod,file,path.dirname(file));`

interface Timing {
  readonly initialize: number
  readonly list: number
  readonly call: number
  readonly exit: number
}

/** Spawn, speak JSON-RPC over stdio, time each answer (ms from spawn). */
const session = (cmd: string, args: ReadonlyArray<string>): Promise<Timing> =>
  new Promise((resolve, reject) => {
    const t0 = performance.now()
    const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"], cwd: root })
    const marks: Record<number, number> = {}
    let buf = ""
    let stderr = ""
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()))
    const send = (o: unknown) => child.stdin.write(JSON.stringify(o) + "\n")
    child.stdout.on("data", (d: Buffer) => {
      buf += d.toString()
      let nl: number
      while ((nl = buf.indexOf("\n")) >= 0) {
        const msg = JSON.parse(buf.slice(0, nl)) as { id?: number; result?: { isError?: boolean } }
        buf = buf.slice(nl + 1)
        if (typeof msg.id !== "number") continue
        marks[msg.id] = performance.now() - t0
        if (msg.id === 1) {
          send({ jsonrpc: "2.0", method: "notifications/initialized" })
          send({ jsonrpc: "2.0", id: 2, method: "tools/list", params: {} })
        } else if (msg.id === 2) {
          send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "check_inbox", arguments: {} } })
        } else if (msg.id === 3) {
          if (msg.result?.isError === true) reject(new Error(`tool call failed: ${JSON.stringify(msg)}`))
          child.stdin.end()
        }
      }
    })
    child.on("error", reject)
    child.on("close", (code) => {
      if (marks[3] === undefined) return reject(new Error(`server exited ${code} early: ${stderr}`))
      resolve({ initialize: marks[1]!, list: marks[2]!, call: marks[3], exit: performance.now() - t0 })
    })
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench", version: "0" } }
    })
  })

const spawnExit = (cmd: string, args: ReadonlyArray<string>) =>
  new Promise<number>((resolve, reject) => {
    const t0 = performance.now()
    const c = spawn(cmd, args, { stdio: "ignore" })
    c.on("error", reject)
    c.on("close", () => resolve(performance.now() - t0))
  })

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const n = opts.quick ? 3 : 10
  const dir = fs.mkdtempSync(join(tmpdir(), "substrat-bench-mcp-"))
  const runtime = ManagedRuntime.make(
    Orchestration.layer.pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          ScriptedProvider.layer(),
          MultiplexerConfig.layer(4),
          EventLog.layerMemory,
          SessionStore.layerMemory
        )
      )
    )
  )
  const scope = Effect.runSync(Scope.make())
  try {
    const bundle = join(dir, "mcp-server.cjs")
    const t = performance.now()
    await esbuild.build({
      entryPoints: [join(root, "src/mcp/main.ts")],
      outfile: bundle,
      bundle: true,
      platform: "node",
      format: "cjs",
      target: "node20",
      minify: true,
      legalComments: "none",
      logLevel: "error",
      plugins: [stubPlugin]
    })
    const buildMs = performance.now() - t
    const loader = join(dir, "loader.cjs")
    fs.writeFileSync(loader, loaderSource)

    const sock = join(dir, "agent.sock")
    await runtime.runPromise(Effect.gen(function*() {
      const o = yield* Orchestrator
      const agent = yield* o.createRoot({ name: "bench", instructions: "bench", provider: "scripted" })
      yield* AgentSocket.serve({ path: sock, agent: agent.id }).pipe(Scope.extend(scope))
    }))

    const tsx = createRequire(import.meta.url).resolve("tsx")
    const variants: ReadonlyArray<readonly [string, string, ReadonlyArray<string>]> = [
      ["tsx src/mcp/main.ts", process.execPath, ["--import", tsx, join(root, "src/mcp/main.ts"), "--socket", sock]],
      ["node bundle", process.execPath, [bundle, "--socket", sock]],
      ["node bundle + code cache", process.execPath, [loader, bundle, "--socket", sock]]
    ]
    const baseline: Array<number> = []
    for (let i = 0; i < n; i++) baseline.push(await spawnExit(process.execPath, ["-e", "0"]))
    const base = median(baseline)
    const rows: Array<Record<string, string | number>> = [{ variant: "node -e 0 (baseline)", runs: n, exit_ms: base }]
    const summary: Record<string, number | string> = {
      node_baseline_ms: Math.round(base),
      bundle_bytes: fs.statSync(bundle).size,
      bundle_build_ms: Math.round(buildMs)
    }
    await session(process.execPath, [loader, bundle, "--socket", sock]) // warm the code cache
    for (const [label, cmd, args] of variants) {
      const ts: Array<Timing> = []
      for (let i = 0; i < (label.startsWith("tsx") ? Math.min(n, 3) : n); i++) ts.push(await session(cmd, args))
      const row = {
        variant: label,
        runs: ts.length,
        initialize_ms: median(ts.map((x) => x.initialize)),
        tools_list_ms: median(ts.map((x) => x.list)),
        first_call_ms: median(ts.map((x) => x.call)),
        exit_ms: median(ts.map((x) => x.exit)),
        x_baseline: median(ts.map((x) => x.initialize)) / base
      }
      rows.push(row)
      const key = label.startsWith("tsx") ? "tsx" : label.includes("cache") ? "bundle_cached" : "bundle"
      summary[`${key}_initialize_ms`] = Math.round(row.initialize_ms)
      summary[`${key}_first_call_ms`] = Math.round(row.first_call_ms)
    }
    return { rows, summary }
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await runtime.dispose()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
