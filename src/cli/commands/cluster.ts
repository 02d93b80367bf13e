// `substrat cluster status`: the cluster's runners as the daemon (a runner) sees them;
// `cluster drain` / `cluster undrain`: this runner gives its shards and trees to the others, or takes shards again.
import { Command } from "@effect/cli"
import { Console, Effect } from "effect"
import { type ClusterDrainResult, ClusterGroup, type ClusterStatus } from "../../protocol/admin/cluster.js"
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
    const state = r.draining ? (r.trees > 0 ? `draining, ${r.trees} tree(s) left` : "drained") : r.healthy ? "yes" : "no"
    lines.push(`${r.address}${r.self ? " (this)" : ""}\t${state}\t${r.shards}\t${r.trees}\t${r.version ?? "?"}`)
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

const renderDrain = (r: ClusterDrainResult): string =>
  r.draining
    ? r.trees > 0
      ? `runner ${r.self} is draining: its shards go to the other runners; ${r.trees} tree(s) still here are handed over as their turns end (see: substrat cluster status)`
      : `runner ${r.self} is drained: no shard, no tree; \`substrat daemon stop\` stops it at once`
    : `runner ${r.self} takes shards again (${r.trees} tree(s) on it)`

/** `cluster drain` / `cluster undrain`: one call, this runner's answer. */
const drainStep = (name: "drain" | "undrain", text: string, examples: ReadonlyArray<string>) =>
  Command.make(name, { home, json }, (o) =>
    Effect.gen(function*() {
      const paths = pathsOf(o.home)
      const r = yield* withClient(ClusterGroup, paths.socket, (c) => call(paths.socket, name === "drain" ? c.cluster.drain() : c.cluster.undrain()))
      if (o.json) return yield* printJson(r)
      yield* Console.log(renderDrain(r))
    })).pipe(Command.withDescription(describe(text, { examples })))

const drainCommand = drainStep(
  "drain",
  "Empty this runner before maintenance: the engine stops assigning it shards, the other runners get them, and each of its trees moves to its new runner once its running turn ends (queued messages go along, nothing is answered twice). Returns at once; `cluster status` shows the trees left. It lasts until `cluster undrain` or a restart. Refused when no other runner is healthy",
  ["substrat cluster drain", "substrat cluster drain --json && substrat daemon stop", "substrat cluster drain --home /srv/runner-b"]
)

const undrainCommand = drainStep(
  "undrain",
  "End a drain: this runner is healthy again and the engine assigns it shards; trees whose shards it gets move back to it as their turns end",
  ["substrat cluster undrain", "substrat cluster undrain --json"]
)

export const clusterCommand = Command.make("cluster").pipe(
  Command.withDescription(describe("Cluster mode (docs/cluster.md): the runners sharing one Postgres", {
    examples: ["substrat cluster status", "substrat cluster drain", "substrat cluster undrain"]
  })),
  Command.withSubcommands([statusCommand, drainCommand, undrainCommand])
)
