// The configuration module: precedence flags ▸ env ▸ config.toml ▸ defaults, errors that name the
// key (and the file), the sources `substrat config` reports, and every key's env name round-trips.
import * as FileSystem from "@effect/platform/FileSystem"
import { describe, expect, it } from "@effect/vitest"
import { Config, ConfigProvider, Effect, Either, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import { parseTestResolve } from "../../src/domain/egress.js"
import { allKeys, configFile, type Flags, load, type ProcessEnv, resolveHome, valueAt } from "../../src/config/Config.js"

const home = "/cfg-home"

/** A FileSystem holding at most config.toml (nothing else exists). */
const files = (toml: string | null) =>
  FileSystem.layerNoop({
    exists: (p) => Effect.succeed(toml !== null && p === configFile(home)),
    readFileString: (p) =>
      toml !== null && p === configFile(home)
        ? Effect.succeed(toml)
        : Effect.die(`unexpected read of ${p}`)
  })

const loadWith = (o: { env?: ProcessEnv; flags?: Flags; toml?: string | null }) =>
  load({ env: { SUBSTRAT_HOME: home, ...o.env }, flags: o.flags ?? {} }).pipe(Effect.provide(files(o.toml ?? null)))

const failureOf = (o: Parameters<typeof loadWith>[0]) =>
  Effect.map(Effect.either(loadWith(o)), (r) => {
    if (Either.isRight(r)) throw new Error("expected the configuration to be refused")
    return r.left
  })

describe("configuration", () => {
  it.effect("defaults when nothing is configured; every source is 'default' but home", () =>
    Effect.gen(function*() {
      const l = yield* loadWith({})
      expect(l.settings.slots).toBe(4)
      expect(l.settings.graceMs).toBe(10_000)
      expect(l.settings.maxLineBytes).toBe(1024 * 1024)
      expect(l.settings.defaultProvider).toBe("scripted")
      expect(l.settings.openai.maxSteps).toBe(25)
      expect(Option.isNone(l.settings.claude.bin)).toBe(true)
      expect(l.file).toEqual({ path: "/cfg-home/config.toml", exists: false })
      expect(l.sources["home"]).toBe("env")
      expect(Object.entries(l.sources).filter(([k, s]) => k !== "home" && s !== "default")).toEqual([])
    }))

  it.effect("precedence: flag over env over config.toml over default, key by key", () =>
    Effect.gen(function*() {
      const toml = "slots = 7\ngrace_ms = 300\nmax_line_bytes = 4096\n[openai]\nmax_steps = 9\nbase_url = \"http://file/v1\"\n[claude]\nbin = \"/file/claude\"\n"
      const l = yield* loadWith({
        toml,
        env: { SUBSTRAT_SLOTS: "5", SUBSTRAT_GRACE_MS: "200", SUBSTRAT_OPENAI_MAX_STEPS: "3" },
        flags: { slots: 6 }
      })
      expect(l.settings.slots).toBe(6)
      expect(l.sources["slots"]).toBe("flag")
      expect(l.settings.graceMs).toBe(200)
      expect(l.sources["graceMs"]).toBe("env")
      expect(l.settings.maxLineBytes).toBe(4096)
      expect(l.sources["maxLineBytes"]).toBe("file")
      expect(l.settings.openai.maxSteps).toBe(3)
      expect(l.sources["openai.maxSteps"]).toBe("env")
      expect(l.settings.openai.baseUrl).toEqual(Option.some("http://file/v1"))
      expect(l.sources["openai.baseUrl"]).toBe("file")
      expect(l.settings.claude.bin).toEqual(Option.some("/file/claude"))
      expect(l.settings.openai.timeoutMs).toBe(120_000)
      expect(l.sources["openai.timeoutMs"]).toBe("default")
      expect(l.file.exists).toBe(true)
    }))

  it.effect("tracing: otlp.endpoint, else OTEL_EXPORTER_OTLP_ENDPOINT; unset is off; a bad URL names the variable", () =>
    Effect.gen(function*() {
      expect(Option.isNone((yield* loadWith({})).settings.otlp.endpoint)).toBe(true)
      const std = yield* loadWith({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" } })
      expect(Option.getOrNull(std.settings.otlp.endpoint)).toBe("http://collector:4318")
      expect(std.sources["otlp.endpoint"]).toBe("env")
      const ours = yield* loadWith({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }, toml: "[otlp]\nendpoint = \"http://mine:4318\"\n" })
      expect(Option.getOrNull(ours.settings.otlp.endpoint)).toBe("http://mine:4318")
      const bad = yield* failureOf({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" } })
      expect(bad.key).toBe("OTEL_EXPORTER_OTLP_ENDPOINT")
      expect((yield* failureOf({ env: { SUBSTRAT_OTLP_ENDPOINT: "nope" } })).key).toBe("SUBSTRAT_OTLP_ENDPOINT")
    }))

  it.effect("an invalid env value fails naming the variable, even when config.toml has a good one", () =>
    Effect.gen(function*() {
      const e = yield* failureOf({ env: { SUBSTRAT_SLOTS: "abc" }, toml: "slots = 3\n" })
      expect(e.key).toBe("SUBSTRAT_SLOTS")
      expect(e.message).toContain("SUBSTRAT_SLOTS")
      expect(e.message).toContain("abc")
      const neg = yield* failureOf({ env: { SUBSTRAT_OPENAI_MAX_RETRIES: "-1" } })
      expect(neg.key).toBe("SUBSTRAT_OPENAI_MAX_RETRIES")
      const zero = yield* failureOf({ env: { SUBSTRAT_SLOTS: "0" } })
      expect(zero.message).toMatch(/SUBSTRAT_SLOTS.*≥ 1/)
      const url = yield* failureOf({ env: { SUBSTRAT_ANTHROPIC_UPSTREAM: "not a url" } })
      expect(url.key).toBe("SUBSTRAT_ANTHROPIC_UPSTREAM")
    }))

  it.effect("a bad config.toml value names the key and the file; bad TOML and unknown keys are refused", () =>
    Effect.gen(function*() {
      const v = yield* failureOf({ toml: "[openai]\nmax_steps = \"lots\"\n" })
      expect(v.key).toBe("openai.max_steps")
      expect(v.message).toContain("openai.max_steps")
      expect(v.message).toContain("/cfg-home/config.toml")
      const syntax = yield* failureOf({ toml: "slots = = 3\n" })
      expect(syntax.message).toMatch(/\/cfg-home\/config\.toml is not valid TOML: .*line 1/)
      const typo = yield* failureOf({ toml: "slot = 3\n" })
      expect(typo.key).toBe("slot")
      expect(typo.message).toContain("unknown key \"slot\"")
      // home cannot come from the file it is read from
      const homeInFile = yield* failureOf({ toml: "home = \"/elsewhere\"\n" })
      expect(homeInFile.key).toBe("home")
    }))

  it.effect("a bad flag names the flag", () =>
    Effect.gen(function*() {
      const e = yield* failureOf({ flags: { maxLineBytes: 10 } })
      expect(e.key).toBe("--max-line-bytes")
      expect(e.message).toContain("1024")
    }))

  it.effect("empty variables count as unset; credentials are read under their own names and stay redacted", () =>
    Effect.gen(function*() {
      const l = yield* loadWith({ env: { SUBSTRAT_SLOTS: "  ", OPENAI_API_KEY: "sk-secret", SUBSTRAT_OPENAI_API_KEY: "sk-own" } })
      expect(l.settings.slots).toBe(4)
      expect(l.sources["slots"]).toBe("default")
      expect(Option.map(l.settings.credentials.openaiApiKey, Redacted.value)).toEqual(Option.some("sk-secret"))
      expect(Option.map(l.settings.openai.apiKey, Redacted.value)).toEqual(Option.some("sk-own"))
      expect(l.sources["credentials.openaiApiKey"]).toBe("env")
      expect(valueAt(l.settings, "credentials.openaiApiKey")).toBe("<redacted>")
      expect(valueAt(l.settings, "openai.apiKey")).toBe("<redacted>")
      expect(valueAt(l.settings, "claude.bin")).toBe(null)
      expect(JSON.stringify(l.settings)).not.toContain("sk-secret")
    }))

  it.effect("every documented variable is the one the Config reads (ConfigProvider.fromMap round trip)", () =>
    Effect.gen(function*() {
      for (const k of allKeys) {
        if (k.key === "home" || k.key.startsWith("credentials.")) continue
        const sample = /Ms|Seconds|Steps|Retries|slots|Bytes|Attempts|caps\.max|Connections|Unauthenticated|quotas\.|sandbox\.[ug]id/i.test(k.key)
          ? "2048"
          : k.key === "caps.policy" || k.key === "acp.approve"
          ? (k.key === "acp.approve" ? "reject" : "refuse")
          : /upstream|endpoint/.test(k.key)
          ? "http://x"
          : k.key === "workspaces.spawnMode"
          ? "branch"
          : k.key === "workspaces.mergeMode"
          ? "rebase"
          : k.key === "egress.testResolve"
          ? "npm.substrat-test=127.0.0.1"
          : k.key === "cluster.postgres"
          ? "postgres://u:p@db:5432/x"
          : k.key === "cluster.listen" || k.key === "http"
          ? "10.0.0.5:7400"
          : k.key.endsWith("prices")
          ? `{"m":{"input":1,"output":2}}`
          : "v"
        const l = yield* loadWith({ env: { [k.env]: sample } })
        expect([k.env, l.sources[k.key]]).toEqual([k.env, "env"])
        expect([k.env, String(valueAt(l.settings, k.key))]).toEqual([k.env, k.secret ? "<redacted>" : sample])
        if (k.file !== null) {
          const [table, key] = k.file.includes(".") ? k.file.split(".") : [null, k.file]
          const toml = table === null ? `${key} = ${JSON.stringify(sample)}\n` : `[${table}]\n${key} = ${JSON.stringify(sample)}\n`
          const f = yield* loadWith({ toml })
          expect([k.file, f.sources[k.key]]).toEqual([k.file, "file"])
        }
      }
    }))

  it.effect("the env provider reads what ConfigProvider.fromEnv + constantCase would (SUBSTRAT_ prefix)", () =>
    Effect.gen(function*() {
      const c = Config.integer("maxLineBytes").pipe(Config.nested("openai"))
      const v = yield* ConfigProvider.fromMap(new Map([["SUBSTRAT_OPENAI_MAX_LINE_BYTES", "9"]]), { pathDelim: "_" }).pipe(
        ConfigProvider.constantCase,
        ConfigProvider.nested("SUBSTRAT")
      ).load(c)
      expect(v).toBe(9)
    }))

  it("home: --home over SUBSTRAT_HOME over ~/.substrat (empty counts as unset)", () => {
    expect(resolveHome("/flag", { SUBSTRAT_HOME: "/env" })).toBe("/flag")
    expect(resolveHome(undefined, { SUBSTRAT_HOME: "/env" })).toBe("/env")
    expect(resolveHome(undefined, { SUBSTRAT_HOME: "" })).toMatch(/\.substrat$/)
  })

  it.effect("egress.testResolve: names under .substrat-test only, IP addresses only; anything else refused at load", () =>
    Effect.gen(function*() {
      const ok = yield* loadWith({ env: { SUBSTRAT_EGRESS_TEST_RESOLVE: "npm.substrat-test=127.0.0.1, Files.Substrat-Test=::1" } })
      expect(Option.isSome(ok.settings.egress.testResolve)).toBe(true)
      expect(parseTestResolve(Option.getOrThrow(ok.settings.egress.testResolve))).toEqual(Either.right({ "npm.substrat-test": "127.0.0.1", "files.substrat-test": "::1" }))
      expect(Option.isNone((yield* loadWith({})).settings.egress.testResolve)).toBe(true)
      for (const bad of ["registry.npmjs.org=127.0.0.1", "substrat-test=127.0.0.1", "npm.substrat-test.evil.org=127.0.0.1", "npm.substrat-test=localhost", "npm.substrat-test"]) {
        const e = yield* failureOf({ env: { SUBSTRAT_EGRESS_TEST_RESOLVE: bad } })
        expect([bad, String(e)]).toEqual([bad, expect.stringContaining("SUBSTRAT_EGRESS_TEST_RESOLVE")])
      }
      // Not a config.toml key.
      yield* failureOf({ toml: "[egress]\ntest_resolve = \"npm.substrat-test=127.0.0.1\"\n" })
    }))

  it.effect("cluster.*: from the environment and config.toml; the Postgres URL is redacted; bad values name their key", () =>
    Effect.gen(function*() {
      const url = "postgres://substrat:s3cret@db.example:5432/substrat"
      const l = yield* loadWith({
        env: { SUBSTRAT_CLUSTER_POSTGRES: url },
        toml: "[cluster]\nlisten = \"10.0.0.5:7400\"\nworkspace_remote = \"/shared/substrat.git\"\n"
      })
      expect(Option.map(l.settings.cluster.postgres, Redacted.value)).toEqual(Option.some(url))
      expect(valueAt(l.settings, "cluster.postgres")).toBe("<redacted>")
      expect(l.sources["cluster.postgres"]).toBe("env")
      expect(l.settings.cluster.listen).toEqual(Option.some("10.0.0.5:7400"))
      expect(l.sources["cluster.listen"]).toBe("file")
      expect(l.settings.cluster.workspaceRemote).toEqual(Option.some("/shared/substrat.git"))
      expect(Option.isNone((yield* loadWith({})).settings.cluster.postgres)).toBe(true)
      for (const bad of ["http://db:5432/x", "postgres://", "not a url"]) {
        const e = yield* failureOf({ env: { SUBSTRAT_CLUSTER_POSTGRES: bad } })
        expect(e.key).toBe("SUBSTRAT_CLUSTER_POSTGRES")
        expect(e.message).not.toContain("s3cret")
      }
      for (const bad of ["7400", "host:0", "host:70000", "a b:1"]) {
        const e = yield* failureOf({ env: { SUBSTRAT_CLUSTER_LISTEN: bad } })
        expect(e.key).toBe("SUBSTRAT_CLUSTER_LISTEN")
      }
      expect((yield* loadWith({ env: { SUBSTRAT_CLUSTER_LISTEN: "[::1]:7400" } })).settings.cluster.listen).toEqual(Option.some("[::1]:7400"))
    }))

  it("docs/cli.md has one table row per setting: its variable, config.toml key and default", () => {
    const doc = Fs.readFileSync(new URL("../../docs/cli.md", import.meta.url), "utf8")
    for (const k of allKeys) {
      const row = doc.split("\n").find((l) => l.startsWith(`| \`${k.env}\` |`))
      expect([k.env, row !== undefined]).toEqual([k.env, true])
      const cells = row!.split("|").map((c) => c.trim())
      expect([k.env, cells[2]]).toEqual([k.env, k.file === null ? "—" : `\`${k.file}\``])
      if (k.default !== null && k.key !== "home") expect([k.env, cells[3]]).toEqual([k.env, `\`${k.default}\``])
    }
  })
})
