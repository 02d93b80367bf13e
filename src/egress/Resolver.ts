// How the egress proxy turns a host name into the one address it connects to (port and layers).
// The proxy resolves names itself (the sandbox has no resolver) exactly once per request and
// connects to the address it checked, so a name that answers differently a second time (DNS
// rebinding) cannot steer the connection. `layerSystem` refuses any name with an address that
// leads back in: loopback, link-local, private, CGNAT, multicast/reserved, unspecified, and the
// host's own interface addresses. Documentation ranges (192.0.2.0/24, 198.51.100.0/24,
// 203.0.113.0/24) are NOT refused: some networks resolve public registries into them.
// `layerOverride` answers for a fixed set of names (tests: a fake registry on 127.0.0.1 under a
// test-only name) and asks the system resolver for every other name; it exists only in code a
// test builds — nothing a sandbox or the environment can turn on.
import { Context, Effect, Layer } from "effect"
import * as Dns from "node:dns"
import * as Net from "node:net"
import * as Os from "node:os"

export interface Resolved {
  readonly address: string
  readonly family: 4 | 6
}

export class EgressResolver extends Context.Tag("substrat/EgressResolver")<EgressResolver, {
  /** The address to connect to, or why the name is refused. */
  readonly resolve: (host: string) => Effect.Effect<Resolved, string>
}>() {}

const forbidden = new Net.BlockList()
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4]
] as const) forbidden.addSubnet(net, prefix, "ipv4")
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fe80::", 10],
  ["fc00::", 7],
  ["ff00::", 8]
] as const) forbidden.addSubnet(net, prefix, "ipv6")

const classOf = (address: string, family: 4 | 6): string | null => {
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
    if (mapped !== null) return classOf(mapped[1]!, 4)
  }
  if (!forbidden.check(address, family === 4 ? "ipv4" : "ipv6")) return null
  if (address.startsWith("127.") || address === "::1") return "loopback"
  if (address.startsWith("169.254.") || address.toLowerCase().startsWith("fe80")) return "link-local"
  return "a private or reserved address"
}

/** The host's own addresses (any interface). */
const ownAddresses = (): ReadonlySet<string> => {
  const out = new Set<string>()
  for (const list of Object.values(Os.networkInterfaces())) for (const i of list ?? []) out.add(i.address.toLowerCase())
  return out
}

/** Why connecting to `address` is refused, or null. */
export const refusalOf = (address: string): string | null => {
  const family = Net.isIP(address)
  if (family !== 4 && family !== 6) return `${address} is not an address`
  const cls = classOf(address, family)
  if (cls !== null) return `${address} is ${cls}`
  if (ownAddresses().has(address.toLowerCase())) return `${address} is this host's own address`
  return null
}

const lookup = (host: string) =>
  Effect.async<ReadonlyArray<Dns.LookupAddress>, string>((resume) => {
    Dns.lookup(host, { all: true, verbatim: true }, (err, addresses) => {
      if (err !== null) resume(Effect.fail(`${host} does not resolve (${err.code ?? err.message})`))
      else resume(Effect.succeed(addresses))
    })
  })

/** The system resolver, refusing every name with an address that leads back in. */
export const system = (host: string): Effect.Effect<Resolved, string> =>
  Effect.gen(function*() {
    const literal = Net.isIP(host.replace(/^\[|\]$/g, ""))
    const addresses = literal === 0 ? yield* lookup(host) : [{ address: host.replace(/^\[|\]$/g, ""), family: literal }]
    if (addresses.length === 0) return yield* Effect.fail(`${host} does not resolve`)
    for (const a of addresses) {
      const why = refusalOf(a.address)
      if (why !== null) return yield* Effect.fail(`${host} resolves to ${why}: never a way back in`)
    }
    const first = addresses[0]!
    return { address: first.address, family: first.family === 6 ? 6 : 4 } as const
  })

export const layerSystem: Layer.Layer<EgressResolver> = Layer.succeed(EgressResolver, { resolve: system })

/** Fixed answers for `names` (lower case → address, unchecked); every other name: `layerSystem`. */
export const layerOverride = (names: Readonly<Record<string, string>>): Layer.Layer<EgressResolver> =>
  Layer.succeed(EgressResolver, {
    resolve: (host) => {
      const a = names[host.toLowerCase()]
      return a === undefined ? system(host) : Effect.succeed({ address: a, family: Net.isIP(a) === 6 ? 6 : 4 })
    }
  })
