// How one setting of the configuration is declared (Config.ts holds the table of them): its key
// (a path such as ["openai", "baseUrl"]) gives its environment variable, config.toml key and
// documentation entry (`register`, into `keys`, read by `substrat config` and the docs), and its
// `effect/Config` with a description and a default; and the value parsers settings share (ports,
// URLs, price tables, egress host lists), each failing with words naming what was expected.
import { Config, ConfigError, Either, Option, Redacted } from "effect"
import { parseAddress } from "../domain/address.js"
import { parsePattern, parseTestResolve } from "../domain/egress.js"
import { parsePrices } from "../domain/prices.js"

/** One setting, as documented and as printed by `substrat config`. */
export interface KeyInfo {
  /** Dotted path in the settings object, e.g. `openai.baseUrl`. */
  readonly key: string
  /** The environment variable. */
  readonly env: string
  /** The key in config.toml (`table.key`), or null when the file cannot set it. */
  readonly file: string | null
  /** The command-line flag, when there is one. */
  readonly flag: string | null
  /** The default as text, or null: unset unless configured. */
  readonly default: string | null
  readonly description: string
  /** Printed as `<redacted>`. */
  readonly secret: boolean
}

/** Every setting registered so far, in declaration order. */
export const keys: Array<KeyInfo> = []

const constant = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase()
const snake = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase()

export interface KeyOptions {
  readonly description: string
  readonly flag?: string
  readonly secret?: boolean
  /** Environment only (home: the file lives in it). */
  readonly envOnly?: boolean
}

export const register = (path: ReadonlyArray<string>, o: KeyOptions, def: string | null) => {
  keys.push({
    key: path.join("."),
    env: `SUBSTRAT_${path.map(constant).join("_")}`,
    file: o.envOnly === true ? null : path.map(snake).join("."),
    flag: o.flag ?? null,
    default: def,
    description: o.description,
    secret: o.secret ?? false
  })
}

export const at = <A>(path: ReadonlyArray<string>, config: Config.Config<A>): Config.Config<A> =>
  path.slice(0, -1).reduceRight((c, segment) => Config.nested(c, segment), config)

export const leafName = (path: ReadonlyArray<string>) => path[path.length - 1]!

/** A setting with a default. */
export const setting = <A>(
  path: ReadonlyArray<string>,
  make: (name: string) => Config.Config<A>,
  def: A,
  o: KeyOptions
): Config.Config<A> => {
  register(path, o, String(def))
  return at(path, make(leafName(path)).pipe(Config.withDescription(o.description), Config.withDefault(def)))
}

/** A setting that is unset unless configured. */
export const optional = <A>(
  path: ReadonlyArray<string>,
  make: (name: string) => Config.Config<A>,
  o: KeyOptions
): Config.Config<Option.Option<A>> => {
  register(path, o, null)
  return at(path, Config.option(make(leafName(path)).pipe(Config.withDescription(o.description))))
}

export const int = (min: number) => (name: string) =>
  Config.integer(name).pipe(Config.validate({ message: `Expected an integer ≥ ${min}`, validation: (n) => n >= min }))

export const text = (name: string) => Config.string(name)

export const url = (name: string) =>
  Config.string(name).pipe(Config.validate({
    message: "Expected an http(s) URL",
    validation: (s) => {
      try {
        const u = new URL(s)
        return u.protocol === "http:" || u.protocol === "https:"
      } catch {
        return false
      }
    }
  }))

/** `meter.prices`: a JSON price table (src/domain/prices.ts), checked at load. */
export const prices = (name: string) =>
  Config.string(name).pipe(Config.mapOrFail((s) => {
    const t = parsePrices(s)
    return Either.isRight(t) ? Either.right(t.right) : Either.left(ConfigError.InvalidData([], `Expected a JSON price table: ${t.left}`))
  }))

/** A comma-separated list of egress host patterns (src/domain/egress.ts), checked at load. */
export const hostList = (name: string) =>
  Config.string(name).pipe(Config.mapOrFail((s) => {
    const hosts = s.split(",").map((h) => h.trim()).filter((h) => h !== "")
    for (const h of hosts) {
      const p = parsePattern(h)
      if (Either.isLeft(p)) return Either.left(ConfigError.InvalidData([], p.left))
    }
    return Either.right(hosts.join(","))
  }))

/** `egress.testResolve`: test-only fixed names (src/domain/egress.ts `parseTestResolve`), checked at load. */
export const testResolve = (name: string) =>
  Config.string(name).pipe(Config.mapOrFail((s) => {
    const t = parseTestResolve(s)
    return Either.isRight(t) ? Either.right(s) : Either.left(ConfigError.InvalidData([], t.left))
  }))

/** A `postgres://` / `postgresql://` URL with a host, kept redacted (it may carry a password). */
export const postgresUrl = (name: string) =>
  Config.string(name).pipe(
    Config.validate({
      message: "Expected a postgres:// URL with a host (postgres://user:password@host:port/database)",
      validation: (s) => {
        try {
          const u = new URL(s)
          return (u.protocol === "postgres:" || u.protocol === "postgresql:") && u.hostname !== ""
        } catch {
          return false
        }
      }
    }),
    Config.map(Redacted.make)
  )

/** `host:port` (a port 1–65535; IPv6 hosts in brackets). */
/** HOST:PORT (domain/address.ts); `minPort` 0 lets the system pick a free port. */
export const hostPort = (minPort: 0 | 1) => (name: string) =>
  Config.string(name).pipe(Config.validate({
    message: `Expected HOST:PORT (e.g. 127.0.0.1:${minPort === 0 ? "8080" : "7400"} or [::1]:${minPort === 0 ? "8080" : "7400"})`,
    validation: (s) => (parseAddress(s)?.port ?? -1) >= minPort
  }))

export const capsPolicy = (name: string) =>
  Config.literal("queue", "refuse")(name)

export const approvePolicy = (name: string) =>
  Config.literal("auto", "reject", "ask")(name)
