// The script of a ScriptedLlm: which reply each incoming model request gets. Pure data + matching.
//
// An entry is tried in order; the first one whose `match` holds (an entry without `match` holds
// for every request) and that has uses left wins, and one use is spent. Entries without `match`
// therefore form a sequential queue; entries with `match` are rules keyed on the request.
// When nothing wins, `fallback` answers (or, without one, a 500 error that fails the client loudly).

/** One content block of a scripted assistant message. */
export type ReplyBlock =
  | { readonly type: "text"; readonly text: string }
  /** Model reasoning: an Anthropic `thinking` block, a Responses `reasoning` item (summary text);
   * dropped from Chat Completions. */
  | { readonly type: "reasoning"; readonly text: string }
  | {
    readonly type: "tool_use"
    /** The tool's name as the client declared it, e.g. `mcp__substrat__send_message` (Claude Code)
     * or `mcp__substrat__send_message` / `send_message` for Codex (see OpenAiResponses). */
    readonly name: string
    readonly input: unknown
    /** Generated when absent. */
    readonly id?: string
  }

export type Reply =
  | {
    readonly _tag: "Message"
    readonly content: ReadonlyArray<ReplyBlock>
    /** Defaults to `tool_use` when the message has a tool call, else `end_turn`. */
    readonly stopReason?: string
    /** Reported usage (default: rough counts, no cache). Cache reads/writes are apart from input_tokens,
     * as Anthropic reports them; the OpenAI formats add cache reads into their prompt/input count. */
    readonly usage?: {
      readonly input_tokens?: number
      readonly output_tokens?: number
      readonly cache_read_tokens?: number
      readonly cache_write_tokens?: number
    }
  }
  | {
    readonly _tag: "Error"
    readonly status: number
    /** Anthropic `error.type` / OpenAI `error.type`; defaults from the status. */
    readonly errorType?: string
    readonly message: string
  }
  | {
    /** Start a streaming reply, then drop the connection mid-stream (a transport failure). */
    readonly _tag: "Disconnect"
  }
  | {
    /** Answer with exactly this body (e.g. a malformed event stream); status 200 unless given. */
    readonly _tag: "Raw"
    readonly body: string
    readonly contentType: string
    readonly status?: number
  }

export const Reply = {
  text: (text: string): Reply => ({ _tag: "Message", content: [{ type: "text", text }] }),
  toolCall: (name: string, input: unknown, text?: string): Reply => ({
    _tag: "Message",
    content: [...(text === undefined ? [] : [{ type: "text" as const, text }]), { type: "tool_use", name, input }]
  }),
  message: (content: ReadonlyArray<ReplyBlock>, stopReason?: string): Reply =>
    stopReason === undefined ? { _tag: "Message", content } : { _tag: "Message", content, stopReason },
  error: (status: number, message: string, errorType?: string): Reply =>
    errorType === undefined ? { _tag: "Error", status, message } : { _tag: "Error", status, message, errorType },
  disconnect: (): Reply => ({ _tag: "Disconnect" }),
  raw: (body: string, contentType = "text/event-stream; charset=utf-8"): Reply => ({ _tag: "Raw", body, contentType })
} as const

export type Api = "anthropic" | "openai-responses" | "openai-chat" | "gemini"

/** What a request is matched on; every given condition must hold (substring, case-sensitive). */
export interface Match {
  /** The latest user turn's text: user text, or tool results (their content as text). */
  readonly lastUser?: string
  /** The system prompt / instructions (including Anthropic's top-level `system` blocks and any
   * `system`/`developer`-role messages). Key replies per agent on its name here. */
  readonly system?: string
  /** Anywhere in the raw request body. */
  readonly anywhere?: string
  readonly api?: Api
  /** Substring of the requested model name. */
  readonly model?: string
  /** Only requests that declare a tool with this exact name (e.g. skip Claude Code's side calls). */
  readonly hasTool?: string
  readonly where?: (request: ScriptRequest) => boolean
}

export interface ScriptEntry {
  readonly match?: Match
  readonly reply: Reply
  /** How many requests this entry answers; default 1. `Infinity` for a standing rule. */
  readonly times?: number
  /** Wait this long before answering (headers included). */
  readonly delayMs?: number
  /** A streamed reply: wait this long between its event frames (a slow stream). */
  readonly frameDelayMs?: number
  /** A label that shows in the recorded request, to make failures readable. */
  readonly label?: string
}

/** The parts of a request the script matches on, extracted by each API's codec. */
export interface ScriptRequest {
  readonly api: Api
  readonly model: string
  readonly system: string
  readonly lastUser: string
  readonly toolNames: ReadonlyArray<string>
  readonly raw: string
  readonly body: unknown
}

export const matches = (m: Match | undefined, r: ScriptRequest): boolean => {
  if (m === undefined) return true
  if (m.api !== undefined && m.api !== r.api) return false
  if (m.model !== undefined && !r.model.includes(m.model)) return false
  if (m.lastUser !== undefined && !r.lastUser.includes(m.lastUser)) return false
  if (m.system !== undefined && !r.system.includes(m.system)) return false
  if (m.anywhere !== undefined && !r.raw.includes(m.anywhere)) return false
  if (m.hasTool !== undefined && !r.toolNames.includes(m.hasTool)) return false
  if (m.where !== undefined && !m.where(r)) return false
  return true
}

/** Mutable script state, owned by one server. */
export class ScriptState {
  private entries: Array<{ entry: ScriptEntry; left: number }> = []
  constructor(entries: ReadonlyArray<ScriptEntry>, public fallback: ScriptEntry | undefined) {
    this.push(entries)
  }
  push(entries: ReadonlyArray<ScriptEntry>): void {
    for (const entry of entries) this.entries.push({ entry, left: entry.times ?? 1 })
  }
  replace(entries: ReadonlyArray<ScriptEntry>): void {
    this.entries = []
    this.push(entries)
  }
  /** Entries with uses left (standing rules count once). */
  remaining(): ReadonlyArray<ScriptEntry> {
    return this.entries.filter((e) => e.left > 0).map((e) => e.entry)
  }
  /** Pick and spend the winning entry; `undefined` when neither an entry nor the fallback answers. */
  take(request: ScriptRequest): { readonly entry: ScriptEntry; readonly index: number | "fallback" } | undefined {
    for (let i = 0; i < this.entries.length; i++) {
      const slot = this.entries[i]!
      if (slot.left > 0 && matches(slot.entry.match, request)) {
        slot.left -= 1
        return { entry: slot.entry, index: i }
      }
    }
    return this.fallback === undefined ? undefined : { entry: this.fallback, index: "fallback" }
  }
}

/** Render any JSON-ish value as text for matching (tool-result content may be string or blocks). */
export const contentText = (content: unknown): string => {
  if (typeof content === "string") return content
  if (Array.isArray(content)) return content.map(contentText).join("\n")
  if (content !== null && typeof content === "object") {
    const o = content as Record<string, unknown>
    if (typeof o["text"] === "string") return o["text"]
    if ("content" in o) return contentText(o["content"])
    if ("output" in o) return contentText(o["output"])
    return ""
  }
  return ""
}

let counter = 0
/** Ids shaped like the real ones (`toolu_…`, `msg_…`, `call_…`); unique per process. */
export const freshId = (prefix: string): string => {
  counter += 1
  return `${prefix}${Date.now().toString(36)}${counter.toString(36).padStart(6, "0")}`
}

/** A decoded JSON object, as the codecs read request bodies. */
export type Json = Record<string, unknown>
export const isObj = (u: unknown): u is Json => u !== null && typeof u === "object" && !Array.isArray(u)
export const str = (u: unknown): string => (typeof u === "string" ? u : "")
export type MessageReply = Extract<Reply, { _tag: "Message" }>
