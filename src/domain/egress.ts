// Egress policy of a workspace (docs/sandbox.md "Egress"): which hosts its sandboxes may reach
// through the daemon's proxy. Pure: host patterns, presets by name (their hosts come from the
// configuration), matching, and the "never wider than the parent" check. Stored in the
// workspace's spec, together with the hosts a sandbox asked for and the human has not answered.
import { Either, Schema } from "effect"

/** A host a sandbox asked for that the policy refused: one inbox item until the human answers. */
export class EgressAsk extends Schema.Class<EgressAsk>("EgressAsk")({
  item_id: Schema.String,
  /** `host` or `host:port` (the port only when not 80/443): what approving adds. */
  host: Schema.String,
  /** `host`: a refused host; `limit`: a byte or connection limit was reached (answer: dismiss). */
  kind: Schema.optionalWith(Schema.Literal("host", "limit"), { default: () => "host" as const }),
  agent_id: Schema.String,
  agent_name: Schema.String,
  text: Schema.String,
  ts: Schema.String
}) {}

export class EgressPolicy extends Schema.Class<EgressPolicy>("EgressPolicy")({
  /** Host patterns: `host`, `*.domain` (any subdomain), each optionally `:port`. */
  hosts: Schema.Array(Schema.String),
  /** Preset names (`npm`, `pypi`, …): their hosts are the configuration's (`substrat config`). */
  presets: Schema.Array(Schema.String),
  asked: Schema.optionalWith(Schema.Array(EgressAsk), { default: () => [] }),
  /** Hosts whose request the human dismissed: refused without a new inbox item. */
  dismissed: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] })
}) {}

/** Bytes a workspace moved through the egress proxy on one UTC day (`egress-usage.json`). */
export class EgressDayUsage extends Schema.Class<EgressDayUsage>("EgressDayUsage")({
  /** `YYYY-MM-DD`, UTC. */
  day: Schema.String,
  bytes: Schema.NonNegative
}) {}

export const noEgress = new EgressPolicy({ hosts: [], presets: [], asked: [], dismissed: [] })

/** Preset name → host patterns. */
export type PresetTable = Readonly<Record<string, ReadonlyArray<string>>>

export const presetNames = ["npm", "pypi", "crates", "go", "github"] as const

export interface HostPattern {
  /** Lower-case host, without the `*.` of a wildcard. */
  readonly host: string
  readonly wildcard: boolean
  /** null: 80 and 443. */
  readonly port: number | null
}

const label = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
const hostRe = new RegExp(`^(\\*\\.)?(${label}(?:\\.${label})*)(?::([0-9]{1,5}))?$`)

/** Parse `host`, `*.domain`, `host:port`; Left: why not. */
export const parsePattern = (raw: string): Either.Either<HostPattern, string> => {
  const s = raw.trim().toLowerCase()
  const m = hostRe.exec(s)
  if (m === null || s.length > 260) {
    return Either.left(`"${raw}" is not a host pattern (a host name, *.domain for its subdomains, optionally :port)`)
  }
  const wildcard = m[1] !== undefined
  const host = m[2]!
  if (wildcard && !host.includes(".")) return Either.left(`"${raw}": a wildcard needs a domain with a dot (*.example.org)`)
  const port = m[3] === undefined ? null : Number(m[3])
  if (port !== null && (port < 1 || port > 65535)) return Either.left(`"${raw}": port ${port} is out of range`)
  return Either.right({ host, wildcard, port })
}

export const formatPattern = (p: HostPattern): string => `${p.wildcard ? "*." : ""}${p.host}${p.port === null ? "" : `:${p.port}`}`

const portMatches = (p: HostPattern, port: number) => (p.port === null ? port === 80 || port === 443 : p.port === port)
const hostMatches = (p: HostPattern, host: string) => (p.wildcard ? host.endsWith(`.${p.host}`) : host === p.host)

/** Does `pattern` allow `host:port`? */
export const patternAllows = (p: HostPattern, host: string, port: number): boolean =>
  hostMatches(p, host.toLowerCase()) && portMatches(p, port)

const patternsOf = (policy: { readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string> }, table: PresetTable) =>
  [...policy.hosts, ...policy.presets.flatMap((n) => table[n] ?? [])].flatMap((h) => Either.getOrElse(Either.map(parsePattern(h), (p) => [p]), () => []))

/** The rule of `policy` allowing `host:port`, or null. */
export const ruleFor = (
  policy: { readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string> },
  table: PresetTable,
  host: string,
  port: number
): string | null => {
  for (const h of policy.hosts) {
    const p = parsePattern(h)
    if (Either.isRight(p) && patternAllows(p.right, host, port)) return h
  }
  for (const n of policy.presets) {
    for (const h of table[n] ?? []) {
      const p = parsePattern(h)
      if (Either.isRight(p) && patternAllows(p.right, host, port)) return `preset ${n}`
    }
  }
  return null
}

export const isEmptyPolicy = (policy: { readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string> }) =>
  policy.hosts.length === 0 && policy.presets.length === 0

/** Is every host:port `child` allows also allowed by `parent`? */
const covers = (parent: ReadonlyArray<HostPattern>, child: HostPattern): boolean =>
  parent.some((p) => {
    const portOk = child.port === null ? p.port === null : portMatches(p, child.port)
    if (!portOk) return false
    if (!p.wildcard) return !child.wildcard && p.host === child.host
    return child.host.endsWith(`.${p.host}`) || (child.wildcard && child.host === p.host)
  })

/** Left: the first host or preset of `child` its parent does not allow. */
export const narrowerThan = (
  parent: { readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string> },
  child: { readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string> },
  table: PresetTable
): Either.Either<void, string> => {
  const allowed = patternsOf(parent, table)
  for (const n of child.presets) {
    if (parent.presets.includes(n)) continue
    const missing = (table[n] ?? []).find((h) => Either.isLeft(parsePattern(h)) || !covers(allowed, Either.getOrThrow(parsePattern(h))))
    if (missing !== undefined) return Either.left(`preset ${n} (${missing}) is not allowed by the parent workspace`)
  }
  for (const h of child.hosts) {
    const p = parsePattern(h)
    if (Either.isLeft(p)) return Either.left(p.left)
    if (!covers(allowed, p.right)) return Either.left(`${h} is not allowed by the parent workspace`)
  }
  return Either.right(undefined)
}

/**
 * Check and normalise what a person asked to allow: host patterns (lower case, deduplicated) and
 * known preset names. Left: a message naming the bad value.
 */
export const normaliseAllow = (
  hosts: ReadonlyArray<string>,
  presets: ReadonlyArray<string>,
  table: PresetTable
): Either.Either<{ readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string> }, string> => {
  const outHosts: Array<string> = []
  for (const h of hosts) {
    const p = parsePattern(h)
    if (Either.isLeft(p)) return Either.left(p.left)
    const f = formatPattern(p.right)
    if (!outHosts.includes(f)) outHosts.push(f)
  }
  const outPresets: Array<string> = []
  for (const n of presets) {
    const name = n.trim().toLowerCase()
    if (table[name] === undefined) return Either.left(`unknown preset "${n}"; known: ${Object.keys(table).join(", ")}`)
    if (!outPresets.includes(name)) outPresets.push(name)
  }
  return Either.right({ hosts: outHosts, presets: outPresets })
}

/** One line describing a policy (`workspace list`). */
export const describePolicy = (policy: EgressPolicy, network: boolean): string => {
  if (network) return "all (--network)"
  if (isEmptyPolicy(policy)) return "none"
  return [...policy.presets.map((p) => `@${p}`), ...policy.hosts].join(",")
}

/** The only names the test-only resolver override (`egress.testResolve`) may answer for. */
export const TEST_NAME_SUFFIX = ".substrat-test"

/**
 * `egress.testResolve` (tests only): `name=address,…`. Every name must end in `.substrat-test`
 * (a suffix no real resolver answers, so no real host can be redirected) and every address be an
 * IP literal; anything else is refused. Lower-case name → address.
 */
export const parseTestResolve = (s: string): Either.Either<Readonly<Record<string, string>>, string> => {
  const out: Record<string, string> = {}
  for (const pair of s.split(",").map((p) => p.trim()).filter((p) => p !== "")) {
    const eq = pair.indexOf("=")
    const name = (eq < 0 ? pair : pair.slice(0, eq)).trim().toLowerCase()
    const address = eq < 0 ? "" : pair.slice(eq + 1).trim()
    if (!/^[a-z0-9.-]+$/.test(name) || !name.endsWith(TEST_NAME_SUFFIX) || name === TEST_NAME_SUFFIX.slice(1)) {
      return Either.left(`egress.testResolve is for tests only: ${JSON.stringify(name)} must be a name under ${TEST_NAME_SUFFIX}`)
    }
    if (!/^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]+)$/.test(address) || !address.includes(".") && !address.includes(":")) {
      return Either.left(`egress.testResolve: ${JSON.stringify(address)} (for ${name}) is not an IP address`)
    }
    out[name] = address
  }
  return Either.right(out)
}
