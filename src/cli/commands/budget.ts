// `substrat budget set|show` and `substrat inbox [answer]` (docs/budgets.md), plus the budget
// options `agent create` shares (--budget-usd, --budget-tokens, --budget-turns, --budget-time).
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { AgentRef, type BudgetPatch, MessageText } from "../../protocol/admin/common.js"
import type { BudgetView } from "../../protocol/admin/budget.js"
import type { InboxItem } from "../../domain/budget.js"
import { BudgetGroup } from "../../protocol/admin/budget.js"
import { call, CliError, withClient } from "../Client.js"
import { home, json, pathsOf } from "../Common.js"
import { describe } from "../Help.js"
import { printJson, table } from "../Output.js"

const agentArg = Args.text({ name: "agent" }).pipe(
  Args.withSchema(AgentRef),
  Args.withDescription("Agent id, or the name of exactly one live agent")
)

/** The four limits as options, named `<prefix>usd` etc. (`budget set --usd`, `agent create --budget-usd`). */
export const budgetOptions = (prefix: string) => ({
  usd: Options.float(`${prefix}usd`).pipe(
    Options.withDescription("USD the subtree may spend (priced per model request; 0 stops it)"),
    Options.optional
  ),
  tokens: Options.integer(`${prefix}tokens`).pipe(
    Options.withDescription("Tokens the subtree may use: input + output + cache reads + cache writes"),
    Options.optional
  ),
  turns: Options.integer(`${prefix}turns`).pipe(Options.withDescription("Turns the subtree may run"), Options.optional),
  time: Options.integer(`${prefix}time`).pipe(
    Options.withDescription("Wall-clock seconds the subtree may work, from when its budget was first set"),
    Options.optional
  )
})

/** The patch of the given options; a negative value is refused (exit 2). */
export const budgetPatch = (o: {
  readonly usd: Option.Option<number>
  readonly tokens: Option.Option<number>
  readonly turns: Option.Option<number>
  readonly time: Option.Option<number>
}): Effect.Effect<BudgetPatch, CliError> => {
  const patch: { usd?: number; tokens?: number; turns?: number; time_s?: number } = {}
  const entries = [["usd", o.usd], ["tokens", o.tokens], ["turns", o.turns], ["time_s", o.time]] as const
  for (const [k, v] of entries) {
    if (Option.isNone(v)) continue
    if (!(v.value >= 0)) return Effect.fail(new CliError({ kind: "invalid-input", message: `a budget limit cannot be negative (${k}: ${v.value})` }))
    patch[k] = v.value
  }
  return Effect.succeed(patch)
}

const fmt = (n: number | null, unit: (x: number) => string) => (n === null ? "-" : unit(n))
const usd = (x: number) => `$${x.toFixed(4)}`
const plain = (x: number) => String(Math.round(x * 1000) / 1000)

export const renderBudget = (v: BudgetView): string => {
  const b = v.budget
  const r = v.remaining
  const used = v.used
  const tokens = used.input_tokens + used.output_tokens + used.cache_read_tokens + used.cache_write_tokens
  return table([
    ["agent", `${v.agent_name} (${v.agent_id})`],
    ["", "limit / used / left"],
    ["usd", `${fmt(b?.usd ?? null, usd)} / ${usd(used.cost_usd)} / ${fmt(r?.usd ?? null, usd)}`],
    ["tokens", `${fmt(b?.tokens ?? null, plain)} / ${tokens} / ${fmt(r?.tokens ?? null, plain)}`],
    ["turns", `${fmt(b?.turns ?? null, plain)} / ${used.turns} / ${fmt(r?.turns ?? null, plain)}`],
    ["time", `${fmt(b?.time_s ?? null, (x) => `${plain(x)}s`)} / since ${b?.since ?? "-"} / ${fmt(r?.time_s ?? null, (x) => `${plain(x)}s`)}`],
    ["state", v.exhausted === null ? "ok" : `parked: ${v.exhausted}`],
    ["inbox", v.breach === null ? "-" : `item ${v.breach.item_id}`]
  ])
}

const setCommand = Command.make("set", { home, json, ...budgetOptions(""), agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const patch = yield* budgetPatch(o)
    if (Object.keys(patch).length === 0) {
      return yield* new CliError({ kind: "invalid-input", message: "give at least one of --usd, --tokens, --turns, --time" })
    }
    const socket = pathsOf(o.home).socket
    const v = yield* withClient(BudgetGroup, socket, (c) => call(socket, c.budget.set({ agent: o.agent, ...patch })))
    if (o.json) return yield* printJson(v)
    yield* Console.log(renderBudget(v))
  })).pipe(Command.withDescription(describe(
    "Set (raise, lower) the budget of an agent's subtree; a raise resumes a subtree parked by its budget",
    {
      details: ["A child's budget cannot exceed what its ancestors have left. Limits not given keep their value."],
      examples: ["substrat budget set lead --usd 2", "substrat budget set lead --tokens 500000 --turns 40"]
    }
  )))

const showCommand = Command.make("show", { home, json, agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const v = yield* withClient(BudgetGroup, socket, (c) => call(socket, c.budget.show({ agent: o.agent })))
    if (o.json) return yield* printJson(v)
    yield* Console.log(renderBudget(v))
  })).pipe(Command.withDescription(describe("Show an agent's subtree budget: limits, what was used, what is left", {
    examples: ["substrat budget show lead", "substrat budget show lead --json"]
  })))

export const budgetCommand = Command.make("budget").pipe(
  Command.withDescription(describe("Budgets per agent subtree: USD, tokens (cache included), turns, wall-clock time", {
    examples: ["substrat budget set lead --usd 2", "substrat budget show lead"]
  })),
  Command.withSubcommands([setCommand, showCommand])
)

/**
 * The unread answer `ref` designates: its id or a unique prefix among the inbox's items (a prefix
 * of several: exit 2 naming them, nothing read).
 */
const unreadAnswer = (items: ReadonlyArray<InboxItem>, ref: string): Effect.Effect<InboxItem, CliError> => {
  const r = ref.trim().toLowerCase()
  const exact = items.find((i) => i.id.toLowerCase() === r)
  const hits = exact !== undefined ? [exact] : r.length === 0 ? [] : items.filter((i) => i.id.toLowerCase().startsWith(r))
  if (hits.length > 1) {
    return Effect.fail(new CliError({
      kind: "invalid-input",
      message: `inbox item "${ref}" is ambiguous: ${hits.length} item ids start with it: ${hits.slice(0, 10).map((i) => `${i.id.slice(0, 12)} (${i.kind}, ${i.agent_name})`).join(", ")}; use more of the id`
    }))
  }
  const item = hits[0]
  return item === undefined || item.kind !== "answer"
    ? Effect.fail(new CliError({ kind: "invalid-input", message: `no unread answer ${ref} in the inbox (substrat inbox lists them)` }))
    : Effect.succeed(item)
}

export const renderInbox = (items: ReadonlyArray<InboxItem>): string =>
  items.length === 0
    ? "nothing waits for you"
    : table([["id", "kind", "agent", "since", "text"], ...items.map((i) => [i.id, i.kind, i.agent_name, i.ts, i.text])])

/**
 * `substrat inbox` lists; `substrat inbox answer <id> <text>` answers. One command with optional
 * positionals (a bare group would print its help instead of listing).
 */
export const inboxCommand = Command.make("inbox", {
  home,
  json,
  action: Args.choice([["answer", "answer" as const], ["read", "read" as const]], { name: "answer|read" }).pipe(
    Args.withDescription("answer: answer item <id> with <text>; read: mark an agent's answer to you read"),
    Args.optional
  ),
  all: Options.boolean("all").pipe(Options.withDescription("With read: every agent's answer to you leaves the inbox")),
  id: Args.text({ name: "id" }).pipe(Args.withDescription("The inbox item's id, or a unique prefix of it"), Args.optional),
  text: Args.text({ name: "text" }).pipe(
    Args.withSchema(MessageText),
    Args.withDescription("The answer (delivered as the agent's next message); for a spent budget: stop"),
    Args.optional
  )
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    if (Option.isNone(o.action)) {
      if (Option.isSome(o.id)) return yield* new CliError({ kind: "invalid-input", message: `unknown inbox action "${o.id.value}"; use: substrat inbox answer <id> <text>` })
      const r = yield* withClient(BudgetGroup, socket, (c) => call(socket, c.inbox.list()))
      if (o.json) return yield* printJson(r)
      return yield* Console.log(renderInbox(r.items))
    }
    if (o.action.value === "read") {
      if (o.all === Option.isSome(o.id) || Option.isSome(o.text)) {
        return yield* new CliError({ kind: "invalid-input", message: "usage: substrat inbox read <id>, or substrat inbox read --all" })
      }
      return yield* withClient(BudgetGroup, socket, (c) =>
        Effect.gen(function*() {
          const items = (yield* call(socket, c.inbox.list())).items
          const answers = o.all ? items.filter((i) => i.kind === "answer") : [yield* unreadAnswer(items, Option.getOrElse(o.id, () => ""))]
          const read = yield* Effect.forEach(answers, (i) => call(socket, c.inbox.answer({ id: i.id, text: "read" })))
          if (o.json) return yield* printJson(o.all ? { read } : read[0])
          if (o.all) return yield* Console.log(`read: ${read.length} answer(s) left the inbox`)
          yield* Console.log(`read: ${read[0]?.agent_name ?? "the agent"}'s answer left the inbox`)
        }))
    }
    if (Option.isNone(o.id) || Option.isNone(o.text)) {
      return yield* new CliError({ kind: "invalid-input", message: "usage: substrat inbox answer <id> <text>" })
    }
    const id = o.id.value
    const text = o.text.value
    const r = yield* withClient(BudgetGroup, socket, (c) => call(socket, c.inbox.answer({ id, text })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(
      r.kind === "question"
        ? `answered ${r.agent_name}: it resumes with your answer`
        : r.kind === "cancel"
        ? `cancelled the queued spawn of ${r.agent_name}'s child`
        : r.kind === "read"
        ? `read: ${r.agent_name}'s answer left the inbox`
        : `stopped ${r.agent_name} and its subtree`
    )
  })).pipe(Command.withDescription(describe("What waits for you, oldest first (agents' questions, spent budgets, spawns queued past caps, unread answers); answer an item", {
    details: [
      "An answer is the agent's next message. On a spent budget, `stop` terminates the subtree; raising it is `substrat budget set`. On a queued spawn, `cancel` drops it (else it starts by itself when room frees). An answer to you stays until it was shown to you (`agent send --wait`, `agent wait`, `swarm chat --wait`, `agent attach`) or `substrat inbox read <id>` (`--all`: every one). Ids take a unique prefix."
    ],
    examples: ["substrat inbox", "substrat inbox answer 91aa \"Use blue\"", "substrat inbox read --all"]
  })))
