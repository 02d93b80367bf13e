// `substrat caps set|show` (docs/budgets.md, "Caps"): a tree's caps on its shape, changed while it
// runs. The same caps as `agent create --max-depth/--max-children/--max-live`.
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { AgentRef } from "../../protocol/admin/common.js"
import type { CapsPatch, CapsView } from "../../protocol/admin/budget.js"
import { BudgetGroup } from "../../protocol/admin/budget.js"
import type { QuotaOverrides } from "../../domain/quota.js"
import { call, CliError, withClient } from "../Client.js"
import { home, json, pathsOf } from "../Common.js"
import { describe } from "../Help.js"
import { printJson, table } from "../Output.js"

const capOption = (name: string, text: string) => Options.integer(name).pipe(Options.withDescription(text), Options.optional)

const cap = (n: number) => (n === 0 ? "none" : String(n))
const own = (n: number | null) => (n === null ? "config" : cap(n))

export const renderCaps = (v: CapsView): string =>
  table([
    ["tree", `${v.root_name} (${v.root_id})`],
    ["", "in force (own)"],
    ["max_depth", `${cap(v.in_force.max_depth)} (${own(v.own.max_depth)})`],
    ["max_children", `${cap(v.in_force.max_children)} (${own(v.own.max_children)})`],
    ["max_live", `${cap(v.in_force.max_live)} (${own(v.own.max_live)})`],
    ["policy", v.policy],
    ["queued", String(v.queued)]
  ])

/** The caps of the given options (`caps set`, `agent create`); a negative value is refused (exit 2). */
export const capsPatch = (o: {
  readonly maxDepth: Option.Option<number>
  readonly maxChildren: Option.Option<number>
  readonly maxLive: Option.Option<number>
}): Effect.Effect<CapsPatch, CliError> => {
  const patch: { -readonly [K in keyof CapsPatch]: CapsPatch[K] } = {}
  for (const [k, v] of [["max_depth", o.maxDepth], ["max_children", o.maxChildren], ["max_live", o.maxLive]] as const) {
    if (Option.isNone(v)) continue
    if (v.value < 0) return Effect.fail(new CliError({ kind: "invalid-input", message: `--${k.replace("_", "-")} cannot be negative (${v.value})` }))
    patch[k] = v.value
  }
  return Effect.succeed(patch)
}

/** `agent create --quota-<name>`: the tree's own quotas per agent (docs/tools.md, "Quotas"). */
export const quotaOptions = {
  quotaMessagesPerMinute: capOption("quota-messages-per-minute", "Messages one agent of this tree may send per minute (0: no limit; default: config quotas.messages_per_minute)"),
  quotaMessageBytesPerHour: capOption("quota-message-bytes-per-hour", "Bytes of message text one agent of this tree may send per hour (0: no limit)"),
  quotaOpenQuestions: capOption("quota-open-questions", "ask_human questions one agent of this tree may have open (0: no limit)"),
  quotaSpawnsPerMinute: capOption("quota-spawns-per-minute", "spawn_agent calls one agent of this tree may make per minute (0: no limit)"),
  quotaToolCallsPerTurn: capOption("quota-tool-calls-per-turn", "Tool calls one agent of this tree may make in one turn (0: no limit)"),
  quotaLogBytesPerHour: capOption("quota-log-bytes-per-hour", "Bytes one agent's tool calls may add to the event logs per hour (0: no limit)")
}

/** The quotas of the given options; a negative value is refused (exit 2). */
export const quotaPatch = (o: { readonly [K in keyof typeof quotaOptions]: Option.Option<number> }): Effect.Effect<QuotaOverrides, CliError> => {
  const patch: { -readonly [K in keyof QuotaOverrides]: QuotaOverrides[K] } = {}
  const pairs = [
    ["messages_per_minute", o.quotaMessagesPerMinute],
    ["message_bytes_per_hour", o.quotaMessageBytesPerHour],
    ["open_questions", o.quotaOpenQuestions],
    ["spawns_per_minute", o.quotaSpawnsPerMinute],
    ["tool_calls_per_turn", o.quotaToolCallsPerTurn],
    ["log_bytes_per_hour", o.quotaLogBytesPerHour]
  ] as const
  for (const [k, v] of pairs) {
    if (Option.isNone(v)) continue
    if (v.value < 0) return Effect.fail(new CliError({ kind: "invalid-input", message: `--quota-${k.replaceAll("_", "-")} cannot be negative (${v.value})` }))
    patch[k] = v.value
  }
  return Effect.succeed(patch)
}

const setCommand = Command.make("set", {
  home,
  json,
  maxDepth: capOption("max-depth", "Levels below the root the tree may grow to (0: no cap)"),
  maxChildren: capOption("max-children", "Live children one agent of the tree may have; more spawns queue (0: no cap)"),
  maxLive: capOption("max-live", "Live agents the tree may have, the root included; more spawns queue (0: no cap)"),
  root: Args.text({ name: "root" }).pipe(Args.withSchema(AgentRef), Args.withDescription("The tree's root agent: id or name"))
}, (o) =>
  Effect.gen(function*() {
    const patch = yield* capsPatch(o)
    if (Object.keys(patch).length === 0) {
      return yield* new CliError({ kind: "invalid-input", message: "give at least one of --max-depth, --max-children, --max-live" })
    }
    const socket = pathsOf(o.home).socket
    const v = yield* withClient(BudgetGroup, socket, (c) => call(socket, c.caps.set({ agent: o.root, ...patch })))
    if (o.json) return yield* printJson(v)
    yield* Console.log(renderCaps(v))
  })).pipe(Command.withDescription(describe(
    "Set a tree's caps on its root while it runs; a raise starts queued spawns that now fit",
    {
      details: [
        "Caps not given keep their value; 0 is no cap. Lowering a cap stops no live agent: it holds new spawns back until the tree is under it again."
      ],
      examples: ["substrat caps set lead --max-children 4", "substrat caps set lead --max-live 8 --max-depth 2"]
    }
  )))

const showCommand = Command.make("show", {
  home,
  json,
  agent: Args.text({ name: "agent" }).pipe(Args.withSchema(AgentRef), Args.withDescription("Any agent of the tree: id or name"))
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const v = yield* withClient(BudgetGroup, socket, (c) => call(socket, c.caps.show({ agent: o.agent })))
    if (o.json) return yield* printJson(v)
    yield* Console.log(renderCaps(v))
  })).pipe(Command.withDescription(describe("Show the caps of an agent's tree: in force, the root's own, the policy, spawns queued", {
    examples: ["substrat caps show lead", "substrat caps show worker-1 --json"]
  })))

export const capsCommand = Command.make("caps").pipe(
  Command.withDescription(describe("Caps on a tree's shape: depth, live children per agent, live agents per tree", {
    examples: ["substrat caps show lead", "substrat caps set lead --max-children 4"]
  })),
  Command.withSubcommands([setCommand, showCommand])
)
