// Scripts for the scripted provider: per agent, a list of replies (one per turn).
// The JSON form (`ScriptBook`) is what the daemon, the CLI and the demo pick by name; the
// programmatic form (`Scripts`) also accepts functions of the prompt.
import { Schema } from "effect"
import { forPeople } from "../../domain/forPeople.js"

export const ScriptToolCall = Schema.Struct({ tool: Schema.String, args: Schema.Unknown })
export type ScriptToolCall = typeof ScriptToolCall.Type

export const ScriptUsage = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cost_usd: Schema.Number
})

/**
 * One turn's reply. Tools run first (in order, through the agent's ToolHandler), then `text`
 * streams as chunks and becomes the final response. `error` fails the turn (`provider.error`).
 * Strings may use `{{prompt}}`, `{{agent}}`, `{{turn}}` and `{{last_message_id}}` (the last
 * `message <uuid>` mentioned in the prompt). `wait_for` (a path) holds the turn until a file
 * exists there, so a test can end a turn exactly when it wants to.
 */
export const ScriptStep = Schema.Struct({
  text: Schema.optional(Schema.String),
  tools: Schema.optional(Schema.Array(ScriptToolCall)),
  error: Schema.optional(Schema.String),
  delay_ms: Schema.optional(Schema.Number),
  wait_for: Schema.optional(Schema.String),
  usage: Schema.optional(ScriptUsage)
})
export type ScriptStep = typeof ScriptStep.Type

/** What to do once the steps run out: echo the prompt's first line (message headers shortened: `USER: hi`), repeat the last step, or reply "". */
export const ScriptAfter = Schema.Literal("echo", "repeat-last", "silent")
export type ScriptAfter = typeof ScriptAfter.Type

export const AgentScript = Schema.Struct({
  steps: Schema.Array(ScriptStep),
  after: Schema.optional(ScriptAfter)
})
export type AgentScript = typeof AgentScript.Type

/** Key: an agent name, `role:<role>`, or `*` (fallback) — looked up in that order. */
export const ScriptBook = Schema.Record({ key: Schema.String, value: AgentScript })
export type ScriptBook = typeof ScriptBook.Type
export const ScriptBookJson = Schema.parseJson(ScriptBook)

/** What a function reply sees. */
export interface ScriptInput {
  readonly prompt: string
  /** 0-based index of this turn in the agent's script. */
  readonly turn: number
  readonly agent: string
  readonly role: string
}
export type ScriptReply = ScriptStep | ((input: ScriptInput) => ScriptStep)
export interface ProgrammaticScript {
  readonly steps: ReadonlyArray<ScriptReply>
  readonly after?: ScriptAfter | undefined
}
/** Programmatic form: steps may be functions of the prompt; a bare function answers every turn. */
export type Scripts = Readonly<Record<string, ProgrammaticScript | ((input: ScriptInput) => ScriptStep)>>

export const lookupScript = (
  book: Scripts,
  agent: string,
  role: string
): { readonly key: string; readonly script: ProgrammaticScript | ((input: ScriptInput) => ScriptStep) } | null => {
  for (const key of [agent, `role:${role}`, "*"]) {
    const script = book[key]
    if (script !== undefined) return { key, script }
  }
  return null
}

const uuidRe = /message ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/g

export const template = (value: unknown, input: ScriptInput): unknown => {
  if (typeof value === "string") {
    const ids = [...input.prompt.matchAll(uuidRe)].map((m) => m[1] ?? "")
    return value
      .replaceAll("{{prompt}}", input.prompt)
      .replaceAll("{{agent}}", input.agent)
      .replaceAll("{{turn}}", String(input.turn))
      .replaceAll("{{last_message_id}}", ids[ids.length - 1] ?? "")
  }
  if (Array.isArray(value)) return value.map((v) => template(v, input))
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, template(v, input)]))
  }
  return value
}

/** The reply for turn `input.turn`, templated. */
export const replyFor = (
  script: ProgrammaticScript | ((input: ScriptInput) => ScriptStep),
  input: ScriptInput
): ScriptStep => {
  if (typeof script === "function") return template(script(input), input) as ScriptStep
  const raw = script.steps[input.turn] ??
    (script.after === "repeat-last" && script.steps.length > 0
      ? script.steps[script.steps.length - 1]
      : script.after === "silent"
      ? { text: "" }
      : { text: `echo: ${forPeople(input.prompt).split("\n").find((l) => l.trim().length > 0) ?? ""}` })
  const step = typeof raw === "function" ? raw(input) : raw ?? { text: "" }
  return template(step, input) as ScriptStep
}
