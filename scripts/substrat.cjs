#!/usr/bin/env node
// The `substrat` executable (package.json "bin"; scripts/substrat.js runs it too). CommonJS on
// purpose: an ESM entry point costs Node ~5–8 ms more CPU at start-up than a CJS one (its
// module loader), about 6% of `node -e 0`. Start-up time matters for one-shot commands,
// so it runs the esbuild bundles from dist/ (scripts/build.ts) through a V8 code cache: one file
// read, no module resolution, almost no compiling. `daemon run` gets the whole program
// (dist/daemon.cjs); `mcp-server` its own bundle (dist/mcp-server.cjs); everything else the lean
// client (dist/cli.cjs), which has no daemon code.
// When dist/ is missing or older than src/, it rebuilds (dev checkout: esbuild and tsx present);
// if that is impossible it runs src/bin.ts through tsx. SUBSTRAT_FROM_SOURCE=1 forces tsx.
// child_process is required only when a rebuild is needed.
const fs = require("node:fs")
const path = require("node:path")

const root = path.join(__dirname, "..")
const argv = process.argv.slice(2)
const daemonAt = argv.indexOf("daemon")
const wantsDaemon = daemonAt >= 0 && argv.indexOf("run", daemonAt + 1) > daemonAt
// The daemon's durable appends fsync on libuv's thread pool (4 threads unless told): with more
// sessions appending at once than threads, their fsyncs wait in its queue instead of sharing the
// file system's journal commits (docs/recovery.md, "Cost"). 64 threads let 64 be in flight. Set
// here, before any asynchronous I/O; an UV_THREADPOOL_SIZE already set wins. libuv reads it once,
// when the pool is first used, and starts the whole pool then: one asynchronous randomBytes (a
// pool request, as Node documents it) starts it here, and the variable is removed again at once,
// so the daemon's environment — what its children inherit, `parentEnv()` — is the user's.
if (wantsDaemon && process.env.UV_THREADPOOL_SIZE === undefined) {
  process.env.UV_THREADPOOL_SIZE = "64"
  require("node:crypto").randomBytes(1, () => {})
  delete process.env.UV_THREADPOOL_SIZE
}
// `substrat mcp-server --socket <agent.sock>`: the per-agent MCP stdio server (src/mcp/main.ts),
// a bundle of its own so a provider CLI's per-turn spawn loads neither @effect/cli nor the daemon.
const wantsMcp = argv[0] === "mcp-server"
if (wantsMcp) process.argv.splice(2, 1)
const bundle = path.join(root, "dist", wantsDaemon ? "daemon.cjs" : wantsMcp ? "mcp-server.cjs" : "cli.cjs")

/**
 * Newest mtime among the sources `file` is built from: those the build listed in
 * `<file>.inputs` (Infinity when one is gone), else every file under src/ (0 when there is no
 * src/: an installed package).
 */
const newestSource = (file) => {
  let newest = 0
  let inputs
  try {
    inputs = JSON.parse(fs.readFileSync(`${file}.inputs`, "utf8"))
  } catch {}
  if (Array.isArray(inputs)) {
    for (const f of inputs) {
      try {
        newest = Math.max(newest, fs.statSync(path.join(root, f)).mtimeMs)
      } catch {
        return Infinity
      }
    }
    return newest
  }
  const visit = (dir) => {
    let entries
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true })
    } catch {
      return
    }
    for (const e of entries) {
      const p = path.join(dir, e.name)
      if (e.isDirectory()) visit(p)
      else if (e.name.endsWith(".ts")) newest = Math.max(newest, fs.statSync(p).mtimeMs)
    }
  }
  visit(path.join(root, "src"))
  for (const f of ["package.json", "scripts/build.ts"]) {
    try {
      newest = Math.max(newest, fs.statSync(path.join(root, f)).mtimeMs)
    } catch {}
  }
  return newest
}

const isFresh = (file) => {
  try {
    return fs.statSync(file).mtimeMs >= newestSource(file)
  } catch {
    return false
  }
}

const tsxCli = () => {
  try {
    return require.resolve("tsx/cli")
  } catch {
    return undefined
  }
}

const sleepSync = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

/** Rebuild dist/ once, even when many CLI processes find it stale at the same moment. */
const rebuild = (fresh) => {
  const tsx = tsxCli()
  if (tsx === undefined) return false
  const lock = path.join(root, "dist", ".build.lock")
  fs.mkdirSync(path.dirname(lock), { recursive: true })
  for (let waited = 0; waited < 180_000; waited += 100) {
    try {
      fs.writeFileSync(lock, String(process.pid), { flag: "wx" })
    } catch {
      // Someone else is building: wait for them (a lock older than 3 minutes is abandoned).
      try {
        if (Date.now() - fs.statSync(lock).mtimeMs > 180_000) fs.rmSync(lock, { force: true })
      } catch {}
      sleepSync(100)
      if (!fs.existsSync(lock) && fresh()) return true
      continue
    }
    try {
      if (fresh()) return true
      // The build's output (esbuild warnings included) is shown only when it fails: a command
      // prints one error line at most on stderr, rebuilt or not.
      const r = require("node:child_process").spawnSync(process.execPath, [tsx, path.join(root, "scripts", "build.ts")], {
        stdio: ["ignore", "ignore", "pipe"]
      })
      if (r.status !== 0) process.stderr.write(r.stderr ?? "")
      return r.status === 0
    } finally {
      fs.rmSync(lock, { force: true })
    }
  }
  return false
}

/**
 * Where the V8 code cache of `file` lives: next to the bundle, or — when that file is missing
 * and dist/ cannot be written (a package installed by another user, a read-only tree) — under
 * the user's cache directory, named after the bundle's size, mtime and the Node version (V8
 * checks a cache against the source's length only, so a name that changes with the bundle keeps
 * a stale cache from being offered).
 */
const userCacheFile = (file) => {
  const st = fs.statSync(file)
  const base = process.env.XDG_CACHE_HOME || path.join(require("node:os").homedir(), ".cache")
  return path.join(base, "substrat", `${path.basename(file)}-${st.size}-${Math.floor(st.mtimeMs)}-${process.version}.cache`)
}

const readCache = (file) => {
  try {
    return { data: fs.readFileSync(`${file}.cache`), at: `${file}.cache` }
  } catch {}
  try {
    const at = userCacheFile(file)
    return { data: fs.readFileSync(at), at }
  } catch {
    return { data: undefined, at: undefined }
  }
}

const writeCache = (file, at, data) => {
  const targets = [at, `${file}.cache`, userCacheFile(file)].filter((t, i, all) => t !== undefined && all.indexOf(t) === i)
  for (const target of targets) {
    try {
      fs.mkdirSync(path.dirname(target), { recursive: true })
      const tmp = `${target}.${process.pid}.tmp`
      fs.writeFileSync(tmp, data)
      fs.renameSync(tmp, target)
      return
    } catch {}
  }
}

/**
 * Run a CommonJS bundle through a V8 code cache (readCache): compiling the daemon's 2.6 MB
 * bundle from scratch is about half of its start-up. The daemon writes its cache when it exits
 * (`daemon stop`, a signal); the build writes one with a start and a stop.
 */
const runBundle = (file) => {
  const source = fs.readFileSync(file, "utf8")
  const cache = readCache(file)
  const body = source.startsWith("#!") ? `//${source.slice(2)}` : source
  const script = new (require("node:vm").Script)(require("node:module").wrap(body), { filename: file, cachedData: cache.data })
  if (cache.data === undefined || script.cachedDataRejected) {
    // Written at exit, so it covers every function this run compiled, not just the top level.
    process.once("exit", () => {
      try {
        writeCache(file, cache.at, script.createCachedData())
      } catch {}
    })
  }
  const mod = { exports: {} }
  script.runInThisContext()(mod.exports, require("node:module").createRequire(file), mod, file, path.dirname(file))
}

/** The sources through tsx. */
const runSource = async () => {
  const { register } = await import("tsx/esm/api")
  register()
  await import(require("node:url").pathToFileURL(path.join(root, "src", wantsMcp ? "mcp/main.ts" : "bin.ts")).href)
}

/** The full CLI (or the daemon, or the MCP server), from dist/ when it is fresh. */
const runFull = async () => {
  if (isFresh(bundle) || (rebuild(() => isFresh(bundle)) && fs.existsSync(bundle))) {
    runBundle(bundle)
  } else if (tsxCli() !== undefined) {
    await runSource()
  } else if (fs.existsSync(bundle)) {
    runBundle(bundle) // installed without dev tools: the shipped bundle is all there is
  } else {
    console.error("substrat: no build in dist/ and no tsx to run the sources; run `npm run build`")
    process.exit(1)
  }
}

const main = async () => {
  if (process.env.SUBSTRAT_FROM_SOURCE === "1") await runSource()
  else await runFull()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
