// `substrat cluster status`: the cluster's runners as the daemon (a runner) sees them.
import { Command } from "@effect/cli"
import { Console, Effect } from "effect"
import { ClusterGroup, type ClusterStatus } from "../../protocol/admin/cluster.js"
import { call, withClient } from "../Client.js"
import { home, json, pathsOf } from "../Common.js"
import { describe } from "../Help.js"
import { printJson } from "../Output.js"

const render = (s: ClusterStatus): string => {
  if (s.self === null) return "this daemon is not a cluster runner (start it with: substrat daemon start --cluster <postgres url> --listen <host:port>)"
  const lines = [
    `runner ${s.self}: ${s.held} of ${s.shards} shard(s) held; lease ${s.lease_ms} ms; ${s.trees} tree(s) in the cluster`,
    "ADDRESS\tHEALTHY\tSHARDS\tTREES\tVERSION"
  ]
  for (const r of s.runners) {
    lines.push(`${r.address}${r.self ? " (this)" : ""}\t${r.healthy ? "yes" : "no"}\t${r.shards}\t${r.trees}\t${r.version ?? "?"}`)
  }
  const placed = s.runners.reduce((n, r) => n + r.trees, 0)
  if (placed < s.trees) lines.push(`${s.trees - placed} tree(s) on runners that are gone (taken over once their lease ran out)`)
  return lines.join("\n")
}

const statusCommand = Command.make("status", { home, json }, (o) =>
  Effect.gen(function*() {
    const paths = pathsOf(o.home)
    const s = yield* withClient(ClusterGroup, paths.socket, (c) => call(paths.socket, c.cluster.status()))
    if (o.json) return yield* printJson(s)
    yield* Console.log(render(s))
  })).pipe(Command.withDescription(describe(
    "List the cluster's runners: address, health, shards the engine assigns each, live trees on each and its Substrat version (a runner that stopped heartbeating drops out after the lease)",
    { examples: ["substrat cluster status", "substrat cluster status --json", "substrat cluster status --home /srv/runner-b"] }
  )))

export const clusterCommand = Command.make("cluster").pipe(
  Command.withDescription(describe("Cluster mode (docs/cluster.md): the runners sharing one Postgres", { examples: ["substrat cluster status"] })),
  Command.withSubcommands([statusCommand])
)
