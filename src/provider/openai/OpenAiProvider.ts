// The `openai` provider: a bare OpenAI-compatible Chat Completions model (OpenAI, OpenRouter, a
// local server) with the tool loop in the daemon (ARCHITECTURE §9; docs/providers.md).
//   - a turn: send the conversation (system = tool guidance + instructions, earlier turns, the
//     new prompt) with our tool catalog; stream `delta.content` out as TextChunks; when the model
//     asks for tool calls, run each through `ctx.tools` (the agent's ToolHandler, which logs
//     `tool_call.invoked`/`result`), report it as a ToolCall, append the results and call the
//     model again — until a reply without tool calls (its text is the Final), or `maxSteps` model
//     calls (the turn fails). Usage is summed over the calls (cost from `usage.cost` if reported).
//   - conversation: in memory while live (Conversation.ts, the canonical form); `start` and
//     `resume` rebuild it by replaying the session's event log, so after an eviction, a graceful
//     restart (blob) or a kill -9 (no blob: `start`) the next request carries every earlier turn.
//   - suspend blob: `{"v":1,"provider":"openai","model","turns"}` — small; the log is the state.
//   - model: `openai:<model>`, else SUBSTRAT_OPENAI_MODEL; endpoint and key: Settings.ts.
import { Effect, Option, Schema, Stream } from "effect"
import { ProviderError } from "../../domain/errors.js"
import type { SessionId } from "../../domain/ids.js"
import { EventLog, type EventLogService } from "../../storage/EventLog.js"
import { type ModelRequestSpan, Tracing, type TracingService, usageAttributes } from "../../telemetry/Tracing.js"
import { ModelMeter, type ModelMeterShape } from "../ModelMeter.js"
import type { ProviderContext, ProviderFactory, ProviderOutput, ProviderService } from "../Provider.js"
import { ChatAccumulator, type ChatError, streamCompletion } from "./ChatClient.js"
import type { AssembledCall, ChatUsage } from "./ChatStream.js"
import {
  asText,
  type ChatMessage,
  chatTools,
  renderTurns,
  replay,
  systemMessage,
  toolCallOf,
  type ToolExchange,
  type TurnRecord
} from "./Conversation.js"
import { meterCall } from "./Metering.js"
import { checkSettings, modelFor, OpenAiSettings, type OpenAiSettingsShape } from "./Settings.js"

const NAME = "openai"

const Blob = Schema.parseJson(Schema.Struct({
  v: Schema.Literal(1),
  provider: Schema.Literal(NAME),
  model: Schema.String,
  turns: Schema.Number
}))

const fail = (reason: ProviderError["reason"], message: string) => new ProviderError({ provider: NAME, reason, message })

const turnError = (e: ChatError) =>
  fail("turn", `openai: ${e.message}${e.retryable ? "" : e.kind === "http" ? " (not retryable)" : ""}`)

/** Arguments text → JSON value; "" is `{}`. Left: the parse error. */
const parseArguments = (raw: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly message: string } => {
  if (raw.trim() === "") return { ok: true, value: {} }
  try {
    return { ok: true, value: JSON.parse(raw) as unknown }
  } catch (e) {
    return { ok: false, message: e instanceof Error ? e.message : String(e) }
  }
}

/** The conversation the log replays, and the agent's id (from `agent.created`) when the log has it. */
const readLog = (log: EventLogService, session: SessionId) =>
  Stream.runCollect(log.read(session)).pipe(
    Effect.map((c) => {
      let agentId: string | undefined
      for (const e of c) if (e.event === "agent.created") agentId = e.data.agent_id
      return { ...replay(c), agentId }
    }),
    Effect.mapError((e) => fail("resume", `openai: cannot replay the conversation from the event log: ${e.message}`))
  )

export const makeOpenAi = (
  ctx: ProviderContext,
  settings: OpenAiSettingsShape,
  log: EventLogService,
  meter: ModelMeterShape | null = null,
  tracing: TracingService | null = null
): Effect.Effect<ProviderService, ProviderError> =>
  Effect.gen(function*() {
    const model = modelFor(settings, ctx.variant)
    if (model === null) {
      return yield* fail("start", "openai: no model — use the provider string openai:<model> or set SUBSTRAT_OPENAI_MODEL")
    }
    const tools = chatTools()
    let agentId: string | undefined = ctx.agent_id
    const traced = tracing ?? (yield* Tracing)
    /** Each model call's span, below the running turn (Tracing.modelRequest). */
    const beginSpan = Effect.suspend(() => traced.modelRequest(ctx.session_id, {
      "gen_ai.agent.name": ctx.agent_name,
      ...(agentId === undefined ? {} : { "gen_ai.agent.id": agentId }),
      "gen_ai.provider.name": NAME,
      "gen_ai.request.model": model,
      "substrat.model.api": "openai",
      "substrat.session.id": ctx.session_id,
      "http.request.method": "POST"
    }))
    let system: ChatMessage = systemMessage("")
    let turns: Array<TurnRecord> = []
    let live = false
    let stopped = false

    /** Rebuild the conversation from the log; `instructions` when the log has none. */
    const load = (session: SessionId, instructions: string | null) =>
      Effect.map(readLog(log, session), (r) => {
        system = systemMessage(r.instructions ?? instructions ?? "")
        turns = [...r.turns]
        live = true
        agentId = ctx.agent_id ?? r.agentId
      })

    const send = (message: string): Stream.Stream<ProviderOutput, ProviderError> =>
      Stream.unwrap(Effect.sync(() => {
        if (stopped) return Stream.fail(fail("turn", "openai: provider was stopped"))
        if (!live) return Stream.fail(fail("turn", "openai: send before start/resume"))
        const turnIndex = turns.length
        const history = [system, ...renderTurns(turns)]
        const current: Array<ChatMessage> = [{ role: "user", content: message }]
        const done: Array<ToolExchange> = []
        let usage: ChatUsage | null = null
        let committed = false
        const commit = (response: string | null) =>
          Effect.sync(() => {
            if (committed) return
            committed = true
            turns.push({ prompt: message, tools: done, response })
          })

        /** Run one tool call of the model's; the messages fed back and the ToolCall reported. */
        const runCall = (call: AssembledCall): Effect.Effect<ProviderOutput> => {
          const parsed = parseArguments(call.arguments)
          if (!parsed.ok) {
            // Never reaches the tools (nor the log): the model gets the error and may retry.
            const result = { error: { type: "invalid_arguments", message: `arguments are not JSON: ${parsed.message}` } }
            current.push({ role: "tool", tool_call_id: call.id, content: asText(result) })
            return Effect.succeed({ _tag: "ToolCall", call_id: call.id, tool: call.name, arguments: call.arguments, result, is_error: true })
          }
          return Effect.map(ctx.tools.invoke(call.name, parsed.value), (r): ProviderOutput => {
            done.push({ tool: call.name, arguments: parsed.value, result: r.result, is_error: r.is_error })
            current.push({ role: "tool", tool_call_id: call.id, content: asText(r.result) })
            return { _tag: "ToolCall", call_id: call.id, tool: call.name, arguments: parsed.value, result: r.result, is_error: r.is_error }
          })
        }

        const step = (n: number): Stream.Stream<ProviderOutput, ProviderError> => {
          if (n >= settings.maxSteps) {
            return Stream.fail(fail("turn", `openai: the model was still calling tools after ${settings.maxSteps} model calls (SUBSTRAT_OPENAI_MAX_STEPS)`))
          }
          const acc = new ChatAccumulator()
          const request = {
            model,
            messages: [...history, ...current],
            tools,
            stream: true,
            stream_options: { include_usage: true }
          }
          const metering = meterCall(meter, ctx, model)
          let span: ModelRequestSpan | undefined
          const endSpan = (failure?: { readonly type: string; readonly message: string }) =>
            Effect.suspend(() => span === undefined ? Effect.void : span.end(failure))
          const admitted = beginSpan.pipe(
            Effect.flatMap((s) => {
              span = s
              return metering.reserve(request)
            }),
            Effect.tapError((e) => {
              span?.annotate({ "substrat.model.refused": true })
              return endSpan({ type: "substrat_budget", message: e.message })
            })
          )
          const text = Stream.fromEffect(admitted).pipe(
            Stream.drain,
            Stream.concat(streamCompletion(settings, request, acc).pipe(
              Stream.map((t): ProviderOutput => ({ _tag: "TextChunk", text: t })),
              Stream.tapError((e) => {
                const status = e.status ?? acc.status
                if (status !== null) span?.annotate({ "http.response.status_code": status })
                return endSpan({ type: e.kind === "http" && e.status !== null ? String(e.status) : e.kind, message: e.message })
              }),
              Stream.mapError(turnError)
            )),
            // Settled however the call ends (a hold left open would stall the tree's other requests).
            Stream.ensuring(metering.settle(acc))
          )
          const after = Stream.unwrap(Effect.sync(metering.recorded).pipe(Effect.tap((recorded) =>
            Effect.suspend(() => {
              span?.annotate({
                ...(acc.status === null ? {} : { "http.response.status_code": acc.status }),
                "substrat.model.streamed": acc.streamed,
                ...(recorded === null ? {} : usageAttributes(recorded.usage, recorded.cost_usd))
              })
              return endSpan()
            })
          ), Effect.map(() => {
            if (acc.usage !== null) {
              const u = acc.usage
              usage = usage === null
                ? u
                : { input_tokens: usage.input_tokens + u.input_tokens, output_tokens: usage.output_tokens + u.output_tokens, cost_usd: usage.cost_usd + u.cost_usd }
            }
            const calls = acc.toolCalls.filter((c) => c.name !== "")
            if (calls.length === 0) {
              const tail: Array<ProviderOutput> = []
              if (usage !== null) tail.push({ _tag: "Usage", ...usage })
              tail.push({ _tag: "Final", text: acc.text })
              return Stream.fromEffect(commit(acc.text)).pipe(Stream.drain, Stream.concat(Stream.fromIterable(tail)))
            }
            current.push({
              role: "assistant",
              content: acc.text === "" ? null : acc.text,
              tool_calls: calls.map((c) => toolCallOf(c.id, c.name, c.arguments))
            })
            return Stream.fromIterable(calls).pipe(
              Stream.mapEffect(runCall),
              Stream.concat(Stream.suspend(() => step(n + 1)))
            )
          })))
          // A call cut short (the turn was stopped) ends its span in error; otherwise it ended already.
          return Stream.concat(text, after).pipe(Stream.ensuring(endSpan({ type: "cancelled", message: "the model call was cut short" })))
        }

        // A failed or cut-short turn is kept without a response, as the log replays it.
        return step(0).pipe(
          Stream.ensuring(commit(null)),
          Stream.withSpan("OpenAiProvider.turn", { attributes: { model, turn: turnIndex } })
        )
      }))

    const service: ProviderService = {
      name: NAME,
      start: (session: SessionId, instructions: string) =>
        stopped ? Effect.fail(fail("start", "openai: provider was stopped")) : load(session, instructions),
      send,
      suspend: Effect.suspend(() => Schema.encode(Blob)({ v: 1, provider: NAME, model, turns: turns.length })).pipe(
        Effect.map((s) => new TextEncoder().encode(s)),
        Effect.mapError((e) => fail("suspend", e.message))
      ),
      resume: (state: Uint8Array) =>
        Schema.decode(Blob)(new TextDecoder().decode(state)).pipe(
          Effect.mapError((e) => fail("resume", `openai: bad blob: ${e.message}`)),
          Effect.andThen(() => (stopped ? Effect.fail(fail("resume", "openai: provider was stopped")) : load(ctx.session_id, null)))
        ),
      stop: Effect.sync(() => {
        stopped = true
        live = false
      })
    }
    return service
  })

/** The `openai` factory over given settings (needs the EventLog: resume replays it). */
export const factoryWith = (settings: OpenAiSettingsShape): Effect.Effect<ProviderFactory, never, EventLog> =>
  Effect.map(Effect.all([EventLog, Effect.serviceOption(ModelMeter), Tracing]), ([log, meter, tracing]) => ({
    name: NAME,
    make: (ctx) => Effect.acquireRelease(makeOpenAi(ctx, settings, log, Option.getOrNull(meter), tracing), (p) => p.stop.pipe(Effect.ignore)),
    check: checkSettings(settings),
    checkVariant: (variant) =>
      modelFor(settings, variant) === null
        ? Effect.fail(fail("unknown-provider", "openai needs a model: openai:<model>, or SUBSTRAT_OPENAI_MODEL in the daemon's environment"))
        : Effect.void
  }))

/** The `openai` factory over the `OpenAiSettings` service. */
export const factory: Effect.Effect<ProviderFactory, never, EventLog | OpenAiSettings> = Effect.flatMap(OpenAiSettings, factoryWith)
