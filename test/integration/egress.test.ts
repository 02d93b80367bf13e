// requires: bwrap
// The egress proxy (src/egress/) with a real bwrap sandbox: `npm install` and `pip download` of
// packages from a fake registry on 127.0.0.1 (reached under test-only names through the resolver
// override, which only this test layer has) succeed through the proxy when the workspace allows
// them, each request one `egress.request` event with the bytes the registry sent; a host not
// allowed gets the policy message and one inbox item, which approving turns into an allowlist
// entry. Refusals straight at the proxy socket: an allowlisted name resolving to 127.0.0.1 (no
// override), the daemon's own HTTP port by address, CONNECT to a port the policy does not name,
// a connection flood past the limit, bytes past the per-turn limit.
import { NodeContext } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Exit, Layer, ManagedRuntime, Scope, Stream } from "effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { noLimits } from "../../src/domain/workspace.js"
import { defaults } from "../../src/config/Config.js"
import { SubstratPaths } from "../../src/config/Paths.js"
import { narrowerThan, normaliseAllow, parsePattern, patternAllows, ruleFor } from "../../src/domain/egress.js"
import { newAgentId, newSessionId, type SessionId, type WorkspaceId } from "../../src/domain/ids.js"
import { Egress, layer as egressLayer } from "../../src/egress/Egress.js"
import * as Resolver from "../../src/egress/Resolver.js"
import { settingsOf, withEgress } from "../../src/provider/cli/CliSettings.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { layerBwrap } from "../../src/sandbox/SandboxBwrap.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { WorkspaceUsage } from "../../src/sandbox/WorkspaceUsage.js"
import { Durable } from "../../src/storage/Durable.js"
import { Tracing } from "../../src/telemetry/Tracing.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { type FakeRegistry, NPM_PACKAGE, PY_PACKAGE, startFakeRegistry } from "../support/fakeRegistry.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const repoRoot = fileURLToPath(new URL("../..", import.meta.url))
const NPM = "npm.substrat-test"
const PYPI = "pypi.substrat-test"

describe("egress policy (pure)", () => {
  it("patterns: hosts, wildcards, ports", () => {
    const p = (s: string) => Either.getOrThrow(parsePattern(s))
    expect(patternAllows(p("registry.npmjs.org"), "registry.npmjs.org", 443)).toBe(true)
    expect(patternAllows(p("registry.npmjs.org"), "registry.npmjs.org", 22)).toBe(false)
    expect(patternAllows(p("registry.npmjs.org:8443"), "registry.npmjs.org", 443)).toBe(false)
    expect(patternAllows(p("*.example.org"), "a.b.example.org", 80)).toBe(true)
    expect(patternAllows(p("*.example.org"), "example.org", 80)).toBe(false)
    expect(patternAllows(p("*.example.org"), "evil-example.org", 80)).toBe(false)
    for (const bad of ["*", "*.org", "http://x.org", "a..b", "x.org:0", "x.org:70000", "x.org/path", "-x.org"]) {
      expect(Either.isLeft(parsePattern(bad)), bad).toBe(true)
    }
    const table = { npm: ["registry.npmjs.org"], pypi: ["pypi.org", "files.pythonhosted.org"] }
    expect(ruleFor({ hosts: [], presets: ["pypi"] }, table, "files.pythonhosted.org", 443)).toBe("preset pypi")
    expect(Either.isLeft(normaliseAllow([], ["nope"], table))).toBe(true)
    expect(Either.getOrThrow(normaliseAllow(["A.Example.org", "a.example.org"], ["NPM"], table))).toEqual({ hosts: ["a.example.org"], presets: ["npm"] })
    // never wider than the parent
    expect(Either.isRight(narrowerThan({ hosts: ["*.example.org"], presets: [] }, { hosts: ["a.example.org"], presets: [] }, table))).toBe(true)
    expect(Either.isLeft(narrowerThan({ hosts: ["a.example.org"], presets: [] }, { hosts: ["*.example.org"], presets: [] }, table))).toBe(true)
    expect(Either.isLeft(narrowerThan({ hosts: ["x.org"], presets: [] }, { hosts: ["x.org:8080"], presets: [] }, table))).toBe(true)
    expect(Either.isRight(narrowerThan({ hosts: ["registry.npmjs.org"], presets: [] }, { hosts: [], presets: ["npm"] }, table))).toBe(true)
    expect(Either.isLeft(narrowerThan({ hosts: [], presets: ["npm"] }, { hosts: [], presets: ["pypi"] }, table))).toBe(true)
  })

  it("addresses: loopback, private, link-local and the host's own refused; documentation ranges not", () => {
    for (const a of ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "0.0.0.0", "::1", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "100.64.0.1"]) {
      expect(Resolver.refusalOf(a), a).not.toBeNull()
    }
    for (const a of ["203.0.113.80", "198.51.100.7", "192.0.2.1", "8.8.8.8", "2606:4700::1111"]) {
      expect(Resolver.refusalOf(a), a).toBeNull()
    }
  })
})

interface Env {
  readonly home: string
  readonly reg: FakeRegistry
  readonly rt: ManagedRuntime.ManagedRuntime<WorkspaceStore | EventLog | Egress | Sandbox, never>
}

interface Limits {
  readonly bytesPerTurn?: number
  readonly bytesPerDay?: number
  readonly maxConnections?: number
}

/** The services over `home` (a second call over the same home is a daemon restarted after kill -9). */
const makeRuntime = (home: string, reg: FakeRegistry, limits: Limits, tracing: Layer.Layer<Tracing> = Layer.effect(Tracing, Tracing)): Env["rt"] => {
  const base = Layer.mergeAll(Durable.layer, SubstratPaths.layer(home), NodeContext.layer, WorkspaceUsage.layerRegistry)
  const store = WorkspaceStore.Default.pipe(Layer.provide(base))
  const log = EventLog.layerFile.pipe(Layer.provide(base))
  const egress = egressLayer({
    presets: { npm: [`${NPM}:${reg.port}`], pypi: [`${PYPI}:${reg.port}`] },
    bytesPerTurn: limits.bytesPerTurn ?? 0,
    bytesPerDay: limits.bytesPerDay ?? 0,
    maxConnections: limits.maxConnections ?? 32
  }).pipe(Layer.provide(Layer.mergeAll(store, log, tracing, Resolver.layerOverride({ [NPM]: "127.0.0.1", [PYPI]: "127.0.0.1" }))))
  return ManagedRuntime.make(Layer.mergeAll(store, log, egress, layerBwrap().pipe(Layer.provide(NodeContext.layer))))
}

const makeEnv = async (limits: Limits = {}, tracing: Layer.Layer<Tracing> = Layer.effect(Tracing, Tracing)): Promise<Env> => {
  const home = makeTmpDir("egress-")
  const reg = await startFakeRegistry(home, NPM, PYPI)
  return { home, reg, rt: makeRuntime(home, reg, limits, tracing) }
}

const closeEnv = async (env: Env) => {
  await env.rt.dispose()
  await env.reg.close()
  removeDir(env.home)
}

/** Serve one turn's proxy for a new workspace allowing `presets`/`hosts` (or for workspace `existing`); returns the socket, session and scope. */
const turn = (env: Env, allow: { readonly hosts?: ReadonlyArray<string>; readonly presets?: ReadonlyArray<string> }, existing?: WorkspaceId) =>
  env.rt.runPromise(Effect.gen(function*() {
    const store = yield* WorkspaceStore
    const egress = yield* Egress
    const ws = existing !== undefined
      ? yield* store.get(existing)
      : yield* store.create({ name: `w${Math.random().toString(16).slice(2, 8)}`, egress: { hosts: allow.hosts ?? [], presets: allow.presets ?? [], table: egress.presets } })
    const session = newSessionId()
    const socketPath = Path.join(env.home, `egress-${session.slice(0, 8)}.sock`)
    const scope = yield* Scope.make()
    const served = yield* egress.serveTurn({ session_id: session, agent_id: newAgentId(), agent_name: "coder", workspace_id: ws.id, socketPath }).pipe(Scope.extend(scope))
    expect(served).toBe(true)
    return { ws, session, socketPath, scope }
  }))

const egressEvents = (env: Env, session: SessionId) =>
  env.rt.runPromise(Effect.flatMap(EventLog, (log) =>
    log.read(session).pipe(
      Stream.filter((e) => e.event === "egress.request"),
      Stream.runCollect,
      Effect.map((c) => Chunk.toReadonlyArray(c).flatMap((e) => (e.event === "egress.request" ? [e.data] : [])))
    )).pipe(Effect.orElseSucceed(() => [])))

/** Bounded wait for the events the proxy logs as its requests end. */
const waitEvents = async (env: Env, session: SessionId, n: number) => {
  for (let i = 0; i < 200; i++) {
    const es = await egressEvents(env, session)
    if (es.length >= n) return es
    await new Promise((r) => setTimeout(r, 50))
  }
  return egressEvents(env, session)
}

const inSandbox = (env: Env, ws: { root_path: string }, socketPath: string, command: ReadonlyArray<string>) =>
  env.rt.runPromise(Effect.flatMap(Sandbox, (sb) => {
    const settings = settingsOf(defaults(), { anthropic: null, openai: null }, { installDir: repoRoot })
    const request = withEgress({ command, env: { HOME: "/tmp" } }, settings, socketPath)
    return sb.run({ workspace: { root_path: ws.root_path, network_access: false, symlinks: [], limits: noLimits }, ...request })
  }).pipe(Effect.map((r) => ({ code: r.exit.code, out: r.stdout, err: r.stderr }))))

/** A raw request straight at the proxy socket: the status line and body. */
const rawAt = (socketPath: string, head: string): Promise<string> =>
  new Promise((resolve) => {
    const s = Net.connect(socketPath)
    let out = ""
    s.on("data", (b) => (out += b.toString("utf8")))
    s.on("close", () => resolve(out))
    s.on("error", () => resolve(out))
    s.write(head)
    setTimeout(() => s.end(), 2000)
  })

describe("egress proxy in a bwrap sandbox", () => {
  let env: Env
  beforeAll(async () => {
    env = await makeEnv()
  })
  afterAll(async () => {
    await closeEnv(env)
  })

  it("npm install and pip download through the proxy; one event per request with the registry's bytes", async () => {
    const t = await turn(env, { presets: ["npm", "pypi"] })
    const before = env.reg.requests().length
    const npm = await inSandbox(env, t.ws, t.socketPath, [
      "npm", "install", NPM_PACKAGE, "--registry", `http://${NPM}:${env.reg.port}/`, "--cache", "/tmp/npm-cache", "--no-audit", "--no-fund", "--no-update-notifier"
    ])
    expect(npm.code, npm.err).toBe(0)
    expect(JSON.parse(Fs.readFileSync(Path.join(t.ws.root_path, "node_modules", NPM_PACKAGE, "package.json"), "utf8")).version).toBe("1.0.0")
    const pip = await inSandbox(env, t.ws, t.socketPath, [
      "/usr/bin/python3", "-m", "pip", "download", PY_PACKAGE, "--no-deps", "-d", "/workspace/dl", "--no-cache-dir", "--disable-pip-version-check",
      "--index-url", `http://${PYPI}:${env.reg.port}/simple/`, "--trusted-host", `${PYPI}:${env.reg.port}`
    ])
    expect(pip.code, pip.err).toBe(0)
    expect(Fs.existsSync(Path.join(t.ws.root_path, "dl", `${PY_PACKAGE}-1.0.0-py3-none-any.whl`))).toBe(true)

    const served = env.reg.requests().slice(before)
    const events = await waitEvents(env, t.session, served.length)
    expect(events.length).toBe(served.length)
    expect(events.every((e) => e.allowed && e.status === 200)).toBe(true)
    expect(events.map((e) => e.bytes_down).sort((a, b) => a - b)).toEqual(served.map((r) => r.bytes).sort((a, b) => a - b))
    expect(new Set(events.map((e) => e.host))).toEqual(new Set([NPM, PYPI]))
    expect(new Set(events.map((e) => e.rule))).toEqual(new Set(["preset npm", "preset pypi"]))
    // The server saw the name, not the address: Host is the URL's.
    expect(served.every((r) => r.host === `${NPM}:${env.reg.port}` || r.host === `${PYPI}:${env.reg.port}`)).toBe(true)
    await env.rt.runPromise(Scope.close(t.scope, Exit.void))
  }, 120_000)

  it("a host not allowed: npm fails, the tool gets the policy message, one inbox item; approving it lets the next try through", async () => {
    const t = await turn(env, { presets: ["pypi"] })
    const npmArgs = ["npm", "install", NPM_PACKAGE, "--registry", `http://${NPM}:${env.reg.port}/`, "--cache", "/tmp/npm-cache", "--no-audit", "--no-fund", "--fetch-retries", "0"]
    const npm = await inSandbox(env, t.ws, t.socketPath, npmArgs)
    expect(npm.code).not.toBe(0)
    expect(npm.err).toContain("403")
    const curl = await inSandbox(env, t.ws, t.socketPath, ["curl", "-sS", `http://${NPM}:${env.reg.port}/${NPM_PACKAGE}`])
    expect(curl.out).toContain(`${NPM}:${env.reg.port} is not in the egress policy of workspace ${t.ws.name}`)
    expect(curl.out).toContain("substrat inbox answer")
    const items = await env.rt.runPromise(Effect.flatMap(Egress, (e) => e.inbox))
    const mine = items.filter((i) => i.text.includes(`workspace ${t.ws.name}`))
    expect(mine.length).toBe(1)
    expect(mine[0]!.text).toContain(`coder asked for ${NPM}:${env.reg.port}`)
    const events = await waitEvents(env, t.session, 2)
    expect(events.filter((e) => !e.allowed).every((e) => e.item_id === mine[0]!.id && e.bytes_down === 0)).toBe(true)

    const answered = await env.rt.runPromise(Effect.flatMap(Egress, (e) => e.answer(mine[0]!.id, "approve")))
    expect(answered?.kind).toBe("approve")
    const spec = await env.rt.runPromise(Effect.flatMap(WorkspaceStore, (s) => s.get(t.ws.id)))
    expect(spec.egress.hosts).toEqual([`${NPM}:${env.reg.port}`])
    expect(spec.egress.asked).toEqual([])
    // The approval is on disk (workspace.json), so it outlives the daemon.
    expect(JSON.parse(Fs.readFileSync(Path.join(env.home, "workspaces", t.ws.id, "workspace.json"), "utf8")).egress.hosts).toEqual([`${NPM}:${env.reg.port}`])
    const again = await inSandbox(env, t.ws, t.socketPath, npmArgs)
    expect(again.code, again.err).toBe(0)
    expect(Fs.existsSync(Path.join(t.ws.root_path, "node_modules", NPM_PACKAGE, "index.js"))).toBe(true)
    await env.rt.runPromise(Scope.close(t.scope, Exit.void))
  }, 120_000)

  it("refusals: an allowlisted name resolving to loopback, a loopback address (the daemon's port), a port the policy does not name", async () => {
    const daemonHttp = Http.createServer((_q, r) => r.end("daemon"))
    await new Promise<void>((r) => daemonHttp.listen(0, "127.0.0.1", r))
    const daemonPort = (daemonHttp.address() as Net.AddressInfo).port
    const t = await turn(env, { hosts: [`localhost:${env.reg.port}`, `127.0.0.1:${daemonPort}`, `${NPM}:${env.reg.port}`] })
    const before = env.reg.requests().length
    const viaName = await rawAt(t.socketPath, `GET http://localhost:${env.reg.port}/${NPM_PACKAGE} HTTP/1.1\r\nHost: localhost\r\n\r\n`)
    expect(viaName).toMatch(/^HTTP\/1\.1 403/)
    expect(viaName).toContain("loopback")
    const toDaemon = await rawAt(t.socketPath, `CONNECT 127.0.0.1:${daemonPort} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`)
    expect(toDaemon).toMatch(/^HTTP\/1\.1 403/)
    const otherPort = await rawAt(t.socketPath, `CONNECT ${NPM}:22 HTTP/1.1\r\nHost: ${NPM}\r\n\r\n`)
    expect(otherPort).toMatch(/^HTTP\/1\.1 403/)
    expect(otherPort).toContain(`${NPM}:22 is not in the egress policy`)
    const hugeHead = await rawAt(t.socketPath, `GET http://${NPM}:${env.reg.port}/ HTTP/1.1\r\nX: ${"a".repeat(64 * 1024)}\r\n\r\n`)
    expect(hugeHead).toMatch(/^HTTP\/1\.1 4\d\d/)
    expect(env.reg.requests().length).toBe(before)
    const events = await waitEvents(env, t.session, 3)
    expect(events.map((e) => [e.method, e.allowed])).toEqual(expect.arrayContaining([["GET", false], ["CONNECT", false], ["CONNECT", false]]))
    await new Promise((r) => daemonHttp.close(r))
    await env.rt.runPromise(Scope.close(t.scope, Exit.void))
  }, 60_000)
})

describe("egress limits", () => {
  it("a connection flood past the workspace's limit is refused; bytes past the turn's limit end the connection with an inbox item", async () => {
    const env = await makeEnv({ maxConnections: 3, bytesPerTurn: 200_000 })
    try {
      const t = await turn(env, { hosts: [`${NPM}:${env.reg.holdPort}`, `${NPM}:${env.reg.port}`] })
      const open: Array<Net.Socket> = []
      const connect = () =>
        new Promise<string>((resolve) => {
          const s = Net.connect(t.socketPath)
          open.push(s)
          let out = ""
          s.on("data", (b) => {
            out += b.toString("utf8")
            if (out.includes("\r\n\r\n")) resolve(out)
          })
          s.on("close", () => resolve(out))
          s.write(`CONNECT ${NPM}:${env.reg.holdPort} HTTP/1.1\r\nHost: x\r\n\r\n`)
        })
      const first = await Promise.all([connect(), connect(), connect()])
      expect(first.every((r) => r.startsWith("HTTP/1.1 200"))).toBe(true)
      const fourth = await connect()
      expect(fourth).toMatch(/^HTTP\/1\.1 429/)
      expect(fourth).toContain("egress.maxConnections = 3")
      for (const s of open) s.destroy()
      // The three tunnels end (and give their slots back) as their events are logged.
      const closed = await waitEvents(env, t.session, 4)
      expect(closed.filter((e) => e.method === "CONNECT" && e.allowed).length).toBe(3)

      const big = await rawAt(t.socketPath, `GET http://${NPM}:${env.reg.port}/blob/1000000 HTTP/1.1\r\nHost: x\r\n\r\n`)
      expect(big.length).toBeLessThan(400_000)
      const events = await waitEvents(env, t.session, 5)
      const blob = events.find((e) => e.method === "GET")
      expect(blob?.allowed).toBe(true)
      expect(blob!.bytes_down).toBeGreaterThan(200_000)
      expect(blob!.bytes_down).toBeLessThan(1_000_000)
      expect(blob?.reason).toContain("egress.bytesPerTurn")
      const items = await env.rt.runPromise(Effect.flatMap(Egress, (e) => e.inbox))
      const limitItem = items.find((i) => i.text.includes("egress.bytesPerTurn"))
      expect(limitItem?.kind).toBe("egress")
      expect(blob!.item_id).toBe(limitItem!.id)
      await env.rt.runPromise(Scope.close(t.scope, Exit.void))
    } finally {
      await closeEnv(env)
    }
  }, 60_000)
  it("the daily byte count survives a kill -9: a restarted daemon goes on counting the day's bytes, so the daily limit is not reset", async () => {
    const env = await makeEnv({ bytesPerDay: 300_000 })
    try {
      const t = await turn(env, { presets: ["npm"] })
      const get = (socketPath: string) => rawAt(socketPath, `GET http://${NPM}:${env.reg.port}/blob/200000 HTTP/1.1\r\nHost: x\r\n\r\n`)
      expect((await get(t.socketPath)).length).toBeGreaterThan(200_000)
      const [first] = await waitEvents(env, t.session, 1)
      expect([first?.bytes_down, first?.reason]).toEqual([200_000, null])
      // On disk, next to workspace.json.
      const file = Path.join(env.home, "workspaces", t.ws.id, "egress-usage.json")
      for (let i = 0; i < 100 && !Fs.existsSync(file); i++) await new Promise((r) => setTimeout(r, 20))
      expect(JSON.parse(Fs.readFileSync(file, "utf8"))).toEqual({ day: new Date().toISOString().slice(0, 10), bytes: 200_000 })

      // kill -9: nothing of the first daemon runs again (no shutdown, no flush); a new one starts over the same home.
      const restarted: Env = { ...env, rt: makeRuntime(env.home, env.reg, { bytesPerDay: 300_000 }) }
      try {
        const t2 = await turn(restarted, {}, t.ws.id)
        expect((await get(t2.socketPath)).length).toBeLessThan(200_000)
        const [second] = await waitEvents(restarted, t2.session, 1)
        expect(second?.reason).toContain("egress.bytesPerDay")
        expect(second!.bytes_down).toBeLessThan(200_000)
        const items = await restarted.rt.runPromise(Effect.flatMap(Egress, (e) => e.inbox))
        expect(items.some((i) => i.text.includes("egress.bytesPerDay"))).toBe(true)
        await restarted.rt.runPromise(Scope.close(t2.scope, Exit.void))
      } finally {
        await restarted.rt.dispose()
      }
      await env.rt.runPromise(Scope.close(t.scope, Exit.void))
    } finally {
      await closeEnv(env)
    }
  }, 60_000)
  it("each request is a trace span below the agent's turn: host, port, method, rule, status, bytes; a refusal ends it in error", async () => {
    const spans: Array<{ session: string; attributes: Record<string, unknown>; ends: Array<unknown> }> = []
    const recording = Layer.succeed(Tracing, {
      enabled: true,
      traceparent: Effect.succeed(undefined),
      spanOf: () => undefined,
      asTurnOf: () => (effect) => effect,
      turnOf: () => undefined,
      modelRequest: () => Effect.die("no model requests here"),
      egressRequest: (session, attributes) =>
        Effect.sync(() => {
          const rec = { session, attributes: { ...attributes } as Record<string, unknown>, ends: [] as Array<unknown> }
          spans.push(rec)
          return { annotate: (a) => Object.assign(rec.attributes, a), end: (f) => Effect.sync(() => rec.ends.push(f ?? null)) }
        })
    })
    const env = await makeEnv({}, recording)
    try {
      const t = await turn(env, { presets: ["npm"] })
      expect(await rawAt(t.socketPath, `GET http://${NPM}:${env.reg.port}/blob/1234 HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200/)
      expect(await rawAt(t.socketPath, `CONNECT ${PYPI}:443 HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatch(/^HTTP\/1\.1 403/)
      await waitEvents(env, t.session, 2)
      for (let i = 0; i < 100 && spans.filter((s) => s.ends.length > 0).length < 2; i++) await new Promise((r) => setTimeout(r, 20))
      expect(spans.map((s) => s.session)).toEqual([t.session, t.session])
      expect(spans[0]).toEqual({
        session: t.session,
        attributes: {
          "server.address": NPM,
          "server.port": env.reg.port,
          "http.request.method": "GET",
          "substrat.workspace_id": t.ws.id,
          "substrat.egress.allowed": true,
          "substrat.egress.rule": "preset npm",
          "http.response.status_code": 200,
          "substrat.egress.bytes_up": 0,
          "substrat.egress.bytes_down": 1234
        },
        ends: [null]
      })
      expect(spans[1]!.attributes).toMatchObject({ "server.address": PYPI, "server.port": 443, "http.request.method": "CONNECT", "substrat.egress.allowed": false, "http.response.status_code": 403 })
      expect(spans[1]!.ends).toEqual([{ type: "denied", message: `${PYPI} is not in the egress policy of workspace ${t.ws.name}` }])
      await env.rt.runPromise(Scope.close(t.scope, Exit.void))
    } finally {
      await closeEnv(env)
    }
  }, 60_000)
})
