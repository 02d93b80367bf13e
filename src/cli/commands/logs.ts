// `substrat logs [-f] [<agent> | --tree <agent>] [--since WHEN] [--json]`: the daemon's event
// stream (`events.follow`) for people — every agent interleaved, one line per event, one colour
// per agent on a colour terminal — or as NDJSON items for scripts.
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option, Stream } from "effect"
import { parentEnv } from "../../config/Config.js"
import { AgentRef } from "../../protocol/admin/common.js"
import type { FeedItem } from "../../protocol/admin/events.js"
import { EventsGroup } from "../../protocol/admin/events.js"
import { call, CliError, following, withClient } from "../Client.js"
import { home, json, pathsOf, raw } from "../Common.js"
import { describe } from "../Help.js"
import { feedText, rawFeedItem, wantsColor } from "../Live.js"

/** `--since`: where to start, as the daemon's `from`/`after` (or an error in words). */
export const parseSince = (
  since: string,
  now: number
): { readonly from?: string; readonly after?: string } | string => {
  const s = since.trim()
  if (s === "" || s === "start" || s === "all") return { from: "start" }
  if (s === "now" || s === "end") return { from: "end" }
  const rel = /^(\d+(?:\.\d+)?)(s|m|h|d)$/.exec(s)
  if (rel !== null) {
    const unit = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[rel[2] as "s" | "m" | "h" | "d"]
    return { after: new Date(now - Number(rel[1]) * unit).toISOString() }
  }
  if (/^\d{4}-\d\d-\d\d/.test(s) && !Number.isNaN(Date.parse(s))) return { after: new Date(Date.parse(s)).toISOString() }
  if (/^\d{1,15}$/.test(s)) return { from: s }
  return `--since wants start, now, a duration (30s, 10m, 2h, 1d), a time (2026-01-31T12:00) or a position printed by an earlier logs run; not ${JSON.stringify(since)}`
}

export const logsCommand = Command.make("logs", {
  home,
  json,
  follow: Options.boolean("follow").pipe(Options.withAlias("f"), Options.withDescription("Keep printing new events until Ctrl-C")),
  raw,
  tree: Options.text("tree").pipe(
    Options.withSchema(AgentRef),
    Options.withDescription("Only this agent and everything below it (name, id or id prefix)"),
    Options.optional
  ),
  since: Options.text("since").pipe(
    Options.withDescription("Start at: start (default), now, a duration ago (10m), a time, or a position from an earlier run"),
    Options.optional
  ),
  agent: Args.text({ name: "agent" }).pipe(
    Args.withSchema(AgentRef),
    Args.withDescription("Only this agent (name, id or id prefix); default: every agent"),
    Args.optional
  )
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    if (Option.isSome(o.agent) && Option.isSome(o.tree)) {
      return yield* new CliError({ kind: "invalid-input", message: "give an agent or --tree, not both" })
    }
    const since = Option.match(o.since, { onNone: () => ({ from: "start" }), onSome: (s) => parseSince(s, Date.now()) })
    if (typeof since === "string") return yield* new CliError({ kind: "invalid-input", message: since })
    const color = !o.json && wantsColor(parentEnv(), process.stdout.isTTY === true)
    let position: string | undefined
    const print = (item: FeedItem): Effect.Effect<void> => {
      position = item.cursor
      if (o.json) return Effect.sync(() => void process.stdout.write(`${JSON.stringify(item)}\n`))
      if (item.kind === "live") return Effect.void
      const line = feedText(o.raw ? rawFeedItem(item) : item, color)
      return line === null ? Effect.void : Console.log(line)
    }
    const run = withClient(EventsGroup, socket, (c) =>
      c.events.follow({
        ...Option.match(o.agent, { onNone: () => ({}), onSome: (agent) => ({ agent }) }),
        ...Option.match(o.tree, { onNone: () => ({}), onSome: (tree) => ({ tree }) }),
        ...since,
        follow: o.follow
      }).pipe(Stream.runForEach(print), (s) => call(socket, s)))
    if (!o.follow) return yield* run
    const again = ["substrat logs -f", ...Option.match(o.agent, { onNone: () => [], onSome: (a) => [a] }),
      ...Option.match(o.tree, { onNone: () => [], onSome: (t) => [`--tree ${t}`] })].join(" ")
    return yield* following(socket, run, () =>
      position === undefined ? undefined : `once it is back, continue with: ${again} --since ${position}`)
  })).pipe(Command.withDescription(describe(
    "Show what the agents do: every agent's events interleaved (or one agent's, or a subtree's); -f follows live",
    { examples: ["substrat logs -f", "substrat logs -f --tree lead --since 10m", "substrat logs alpha --json"] }
  )))
