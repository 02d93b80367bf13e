// The tool catalog as the outside sees it (MCP listings, the agent socket's payloads): one
// argument Schema and one description per tool, plus the JSON Schema each exposes over MCP.
// A leaf module of the domain (effect + ids only): the MCP server, the agent socket and the openai
// provider read it. The same shapes as the ToolHandler's argument Schemas
// (src/agent/ToolHandler.ts), here with a description per field for the model and unknown keys
// rejected at every boundary; test/integration/mcp-server.test.ts fails if the two drift apart.
import { JSONSchema, Schema } from "effect"
import { MessageId } from "./ids.js"

/** Unknown keys are an error wherever these are decoded (the RPC server, the frame guard, MCP). */
const strict = { parseOptions: { onExcessProperty: "error" } } as const

export const SendMessageArgs = Schema.Struct({
  recipient: Schema.String.annotations({
    description: "Name of your parent, one of your children or a sibling; USER (root agents only) for the human; \"parent\" for your parent; \"broadcast:children\" / \"broadcast:siblings\" for a notification to all of them; \"find:<symbol>\" for the agent of that class/function/method/file anywhere in your tree (the daemon carries it hop by hop; with sync=true that agent's answer comes back to you)."
  }),
  text: Schema.String.annotations({ description: "The message." }),
  sync: Schema.optionalWith(
    Schema.Boolean.annotations({
      description: "true (default): a request; the reply arrives as your next message. false: a notification.",
      default: true
    }),
    { default: () => true }
  ),
  reply_to: Schema.optional(
    MessageId.annotations({ description: "Answer the request with this message id (from \"Message from … (message <id>)\")." })
  ),
  timeout_seconds: Schema.optional(
    Schema.Number.annotations({
      description:
        "sync=true only: a positive number of seconds. No reply within it: you get a notice as your next message and stop waiting (a late reply still arrives). Absent: wait indefinitely."
    })
  )
}).annotations(strict)

export const BroadcastArgs = Schema.Struct({
  text: Schema.String.annotations({ description: "The message for every sibling." })
}).annotations(strict)

/** No arguments. (A bare `Struct({})` is the `{}` type and would let any key through.) */
export const CheckInboxArgs = Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Never })).annotations(strict)

export const SpawnAgentArgs = Schema.Struct({
  name: Schema.String.annotations({ description: "The child's name: letters, digits, '_', '.', '-'; unique among your children." }),
  instructions: Schema.String.annotations({ description: "The child's instructions (its system prompt)." }),
  role: Schema.optionalWith(
    Schema.String.pipe(Schema.minLength(1)).annotations({ title: "role", description: "A role name, e.g. worker (default) or reviewer.", default: "worker" }),
    { default: () => "worker" }
  ),
  workspace_subdir: Schema.optional(
    Schema.NullOr(Schema.String).annotations({
      description:
        "A relative subdirectory of your workspace (e.g. \"team-a\"): the child gets its own workspace rooted there (created if absent; shared with a sibling that asked for the same one). Absent/null: the child shares your workspace."
    })
  ),
  workspace: Schema.optional(
    Schema.Literal("shared", "branch").annotations({
      description:
        "shared: the child works in your workspace (see your changes at once; good for small tasks and reviewers). branch (only when your workspace was made from a git repository): the child gets its own clone on its own branch, forked from your branch now; when it answers you (or ends a turn with changes), its branch is merged into yours through your merge queue (a conflict or a failing check goes back to it). Use branch for parallel coders touching the same files. Absent: the daemon's default (workspaces.spawnMode, shared unless changed)."
    })
  ),
  provider: Schema.optional(
    Schema.NullOr(Schema.String).annotations({
      description:
        "The child's provider, e.g. \"claude\", \"codex\", \"cursor-agent\", \"openai:<model>\" or \"scripted:<book>\". Absent/null: the same as yours. An unknown provider or one whose CLI is not installed (or, for openai, no endpoint configured) is an error and nothing is created."
    })
  ),
  budget_usd: Schema.optional(Schema.Number.pipe(Schema.nonNegative()).annotations({
    description: "The child's own budget in USD for its whole subtree, carved from what your budget has left after the unused shares of your other children (refused if more). Absent: it shares yours."
  })),
  budget_tokens: Schema.optional(Schema.Number.pipe(Schema.nonNegative()).annotations({
    description: "The child's own token budget (cache included) for its subtree, carved from what your budget has left. Absent: it shares yours."
  })),
  budget_turns: Schema.optional(Schema.Number.pipe(Schema.nonNegative()).annotations({
    description: "The child's own turn budget for its subtree, carved from what your budget has left. Absent: it shares yours."
  }))
}).annotations(strict)

export const InspectAgentArgs = Schema.Struct({
  name: Schema.String.annotations({ description: "Name of your parent, a child or a sibling." })
}).annotations(strict)

export const AskHumanArgs = Schema.Struct({
  question: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64 * 1024)).annotations({
    description: "The question for the human, with the context they need to answer it."
  })
}).annotations(strict)

export const toolArgs = {
  send_message: SendMessageArgs,
  broadcast: BroadcastArgs,
  check_inbox: CheckInboxArgs,
  spawn_agent: SpawnAgentArgs,
  inspect_agent: InspectAgentArgs,
  ask_human: AskHumanArgs
} as const
export type ToolName = keyof typeof toolArgs
export const toolNames: ReadonlyArray<ToolName> = ["send_message", "broadcast", "check_inbox", "spawn_agent", "inspect_agent", "ask_human"]
export const isToolName = (u: string): u is ToolName => Object.prototype.hasOwnProperty.call(toolArgs, u)
/** One tool's argument Schema, for code that handles every tool alike. */
export const argsSchemaOf = (tool: ToolName): Schema.Schema.AnyNoContext => toolArgs[tool]

/** Same text as the ToolHandler's catalog (a test keeps them equal). */
export const toolDescriptions: Readonly<Record<ToolName, string>> = {
  send_message:
    "Send a message to your parent, a child or a sibling by name (or USER, for root agents). sync=true (default): the reply arrives as your next message; do not wait or poll. timeout_seconds=N (sync only): if no reply came within N seconds you get a notice instead and stop waiting (a late reply still arrives as a message). reply_to=<message id> answers a request.",
  broadcast: "Send a message to every sibling (your team). It waits in their inboxes.",
  check_inbox: "Read (and clear) the notifications and broadcasts waiting for you.",
  spawn_agent:
    "Create a child agent. It starts when your turn ends; you can message it right away. Past the tree's caps the spawn is queued instead (status \"queued\", with its position): it starts by itself when room frees and you get a message then; do not spawn it again. budget_usd/budget_tokens/budget_turns give it its own share of your budget.",
  inspect_agent: "See a parent's, child's or sibling's state, recent turns and messages.",
  ask_human:
    "Ask the human a question (it goes to their inbox). Then end your turn: you are paused until they answer, and the answer arrives as your next message."
}

/** A JSON Schema object as MCP's `tools/list` carries it (`type: "object"` at the top). */
export interface ToolInputSchema {
  readonly type: "object"
  readonly properties: Record<string, unknown>
  readonly required?: ReadonlyArray<string>
  readonly additionalProperties: false
  readonly [k: string]: unknown
}

/**
 * The JSON Schema of a tool's arguments (encoded side), inlined and without `$schema`/`$id`:
 * MCP clients hand it to the model as is. An empty Struct becomes an object with no properties.
 */
export const inputJsonSchema = (tool: ToolName): ToolInputSchema => {
  if (tool === "check_inbox") return { type: "object", properties: {}, additionalProperties: false }
  const { $schema: _s, $id: _i, $defs: _d, ...rest } = JSONSchema.make(argsSchemaOf(tool)) as unknown as
    & Record<string, unknown>
    & { readonly properties: Record<string, unknown> }
  return { ...rest, type: "object", additionalProperties: false, properties: rest.properties }
}
