// TurnScheduler: runs turns. One turn at a time per session (later submissions queue behind,
// FIFO); turns of different sessions run concurrently, bounded by the Multiplexer's slots.
// A turn logs `turn.start` (prompt) before sending, `usage` and `turn.complete` (response)
// after; a failure logs `provider.error` instead of `turn.complete` and leaves the session
// usable (its provider stays live for the next turn). `beforeEnd` runs before either end event
// is logged: what it makes durable is part of the turn (the Orchestrator births the children
// the turn spawned there — seed 001: the spawn is acknowledged when the turn ends). If it fails,
// the turn fails. A failed end-event append makes the turn fail too (nothing is acknowledged
// that is not durable); `usage` and `provider.error` are best-effort (a warning when lost).
// The provider's own tool calls (`ToolCall` with `source: "provider"`: claude's Write/Bash,
// codex's exec_command — our tools are logged by the ToolHandler) are logged here as a
// `tool_call.invoked` + `tool_call.result` pair when the provider reports them, best-effort too.
import { Deferred, Effect, Option, Ref, Schema, Stream, type Tracer } from "effect"
import { ProviderError } from "../domain/errors.js"
import { isJsonValue, makeEvent } from "../domain/events.js"
import { newTurnId, type SessionId, type TurnId } from "../domain/ids.js"
import { addUsage, type UsageTotals, zeroUsage } from "../domain/usage.js"
import { EventLog } from "../storage/EventLog.js"
import type { ProviderOutput } from "../provider/Provider.js"
import { Tracing } from "../telemetry/Tracing.js"
import { Multiplexer, type SessionBinding } from "./Multiplexer.js"

/** A provider tool's result as logged: JSON, and at most this many characters of it. */
const PROVIDER_RESULT_MAX = 8192
const loggable = (u: unknown): unknown => {
  const json = isJsonValue(u) ? u : String(u)
  const text = JSON.stringify(json)
  return text.length <= PROVIDER_RESULT_MAX ? json : { truncated: true, chars: text.length, preview: text.slice(0, PROVIDER_RESULT_MAX) }
}

export interface TurnOutcome {
  readonly turn_id: TurnId
  readonly prompt: string
  /** The final text (or the concatenated chunks); "" when the turn failed. */
  readonly response: string
  readonly usage: UsageTotals
  /** Null when the turn completed. */
  readonly error: { readonly reason: string; readonly message: string } | null
  /** Set when the failed turn was parked (`parkedBy`): why. */
  readonly parked?: string
}

export interface TurnCallbacks {
  readonly onStart?: (turn_id: TurnId, prompt: string) => Effect.Effect<void>
  readonly onOutput?: (turn_id: TurnId, output: ProviderOutput) => Effect.Effect<void>
  /**
   * Runs once the provider is done (or failed), before `turn.complete` / `provider.error` is
   * logged. A failure fails the turn (`provider.error` with the error's tag and message).
   */
  readonly beforeEnd?: (turn_id: TurnId) => Effect.Effect<void, { readonly _tag: string; readonly message: string }>
  /**
   * Asked when the turn failed, before its `provider.error` is logged: why the turn is parked
   * (a budget on the path ran out), or null when it simply failed. The reason is logged with
   * the error (`parked`), so recovery after a crash keeps the turn parked too.
   */
  readonly parkedBy?: (turn_id: TurnId) => Effect.Effect<string | null>
  /** Runs after the turn, still before the session's next turn starts. */
  readonly after?: (outcome: TurnOutcome) => Effect.Effect<void>
  /**
   * With tracing on: the turn's span (its parent — none: a root — links and attributes), asked
   * once the prompt is taken. The span covers the turn and `after`.
   */
  readonly span?: () => TurnSpan
}

export interface TurnSpan {
  readonly parent: Tracer.AnySpan | undefined
  readonly links: ReadonlyArray<Tracer.SpanLink>
  readonly attributes: Record<string, unknown>
}

/** `beforeEnd` failed: the turn fails with its error (and `beforeEnd` is not run again). */
class EndingFailed {
  constructor(readonly cause: unknown) {}
}
const ending = <E>(eff: Effect.Effect<void, E>) => Effect.mapError(eff, (e) => new EndingFailed(e))

/** The turn was stopped from outside (`stopTurn`: e.g. its workspace is being deleted). */
export class TurnStopped extends Schema.TaggedError<TurnStopped>()("TurnStopped", { message: Schema.String }) {}

const describe = (e: unknown): { reason: string; message: string } =>
  e instanceof ProviderError
    ? { reason: e.reason, message: e.message }
    : typeof e === "object" && e !== null && "_tag" in e && "message" in e
    ? { reason: String(e._tag), message: String(e.message) }
    : { reason: "unknown", message: String(e) }

export class TurnScheduler extends Effect.Service<TurnScheduler>()("substrat/TurnScheduler", {
  effect: Effect.gen(function*() {
    const mux = yield* Multiplexer
    const log = yield* EventLog
    const tails = yield* Ref.make(new Map<SessionId, Deferred.Deferred<void>>())
    const tracing = yield* Tracing
    /** The running turn of each session: failing `stop` ends its provider stream with TurnStopped. */
    const running = new Map<SessionId, { readonly stop: Deferred.Deferred<never, TurnStopped>; readonly done: Deferred.Deferred<void> }>()

    /** Run `eff` after every earlier submission for this session, and before later ones. */
    const serialize = <A, E, R>(session: SessionId, eff: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.gen(function*() {
        const mine = yield* Deferred.make<void>()
        const prev = yield* Ref.modify(tails, (m) => [m.get(session), new Map(m).set(session, mine)] as const)
        const done = Deferred.succeed(mine, undefined).pipe(
          Effect.andThen(Ref.update(tails, (m) => {
            if (m.get(session) !== mine) return m
            const next = new Map(m)
            next.delete(session)
            return next
          }))
        )
        return yield* (prev ? Deferred.await(prev) : Effect.void).pipe(Effect.andThen(eff), Effect.ensuring(done))
      })

    const execute = (binding: SessionBinding, prompt: string, cb: TurnCallbacks) =>
      Effect.gen(function*() {
        const turn_id = newTurnId()
        const id = binding.session_id
        let chunks = ""
        let final: string | null = null
        let usage = zeroUsage
        let sawUsage = false
        const stop = yield* Deferred.make<never, TurnStopped>()
        const done = yield* Deferred.make<void>()
        running.set(id, { stop, done })
        const body = mux.use(binding, (provider) =>
          Effect.gen(function*() {
            yield* log.append(id, makeEvent("turn.start", { turn_id, prompt }))
            if (cb.onStart) yield* cb.onStart(turn_id, prompt)
            yield* provider.send(prompt).pipe(
              Stream.interruptWhen(Deferred.await(stop)),
              Stream.runForEach((out) =>
                Effect.gen(function*() {
                  if (out._tag === "TextChunk") chunks += out.text
                  else if (out._tag === "Final") final = out.text
                  else if (out._tag === "Usage") {
                    sawUsage = true
                    usage = addUsage(usage, out)
                  } else if (out._tag === "ToolCall" && out.source === "provider") {
                    const { call_id, tool } = out
                    // The provider ran it before telling us: a span of no length below the turn.
                    if (tracing.enabled) {
                      yield* Effect.withSpan(Effect.void, "tool_call", {
                        attributes: { "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id, "substrat.tool.source": "provider", "error": out.is_error }
                      })
                    }
                    yield* log.append(id, makeEvent("tool_call.invoked", { call_id, tool, arguments: loggable(out.arguments), source: "provider" })).pipe(
                      Effect.zipRight(log.append(id, makeEvent("tool_call.result", { call_id, tool, result: loggable(out.result), is_error: out.is_error, source: "provider" }))),
                      Effect.catchAll((e) => Effect.logWarning(`provider tool call ${tool} of turn ${turn_id} not logged: ${e.message}`))
                    )
                  }
                  if (cb.onOutput) yield* cb.onOutput(turn_id, out)
                })
              )
            )
            const response = final ?? chunks
            if (sawUsage) {
              yield* log.append(id, makeEvent("usage", { turn_id, ...usage })).pipe(
                Effect.catchAll((e) => Effect.logWarning(`usage of turn ${turn_id} not logged: ${e.message}`))
              )
            }
            if (cb.beforeEnd) yield* ending(cb.beforeEnd(turn_id))
            yield* log.append(id, makeEvent("turn.complete", { turn_id, response }))
            return { turn_id, prompt, response, usage, error: null } satisfies TurnOutcome
          })
        )
        return yield* body.pipe(
          Effect.catchAll((e) =>
            Effect.gen(function*() {
              // The turn's own side effects (births) are durable before its end is logged, also
              // when it failed; a second run is a no-op when the first one already ran.
              const before = e instanceof EndingFailed || !cb.beforeEnd
                ? Effect.void
                : cb.beforeEnd(turn_id).pipe(
                  Effect.catchAll((b) => Effect.logWarning(`turn ${turn_id}: ${b._tag}: ${b.message}`))
                )
              yield* before
              const error = describe(e instanceof EndingFailed ? e.cause : e)
              const parked = cb.parkedBy === undefined ? null : yield* cb.parkedBy(turn_id)
              yield* log.append(id, makeEvent("provider.error", { turn_id, ...error, ...(parked === null ? {} : { parked }) })).pipe(
                Effect.catchAll((le) => Effect.logWarning(`provider.error of turn ${turn_id} not logged: ${le.message}`))
              )
              return { turn_id, prompt, response: "", usage, error, ...(parked === null ? {} : { parked }) } satisfies TurnOutcome
            })
          ),
          Effect.ensuring(Effect.suspend(() => {
            if (running.get(id)?.done === done) running.delete(id)
            return Deferred.succeed(done, undefined)
          }))
        )
      })

    /**
     * Stop the session's running turn, if any: its provider stream ends with TurnStopped (the
     * provider's process is interrupted), the turn ends as failed (`provider.error`, reason
     * `TurnStopped`) like any failed turn. Returns once it has ended; false: no turn was running.
     */
    const stopTurn = (session: SessionId, message: string): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        const r = running.get(session)
        if (r === undefined) return Effect.succeed(false)
        return Deferred.fail(r.stop, new TurnStopped({ message })).pipe(
          Effect.zipRight(Deferred.await(r.done)),
          Effect.as(true)
        )
      })

    /** The turn as a `turn` span: the session's running turn, with its outcome as attributes. */
    const traced = <E, R>(binding: SessionBinding, span: TurnSpan, turn: Effect.Effect<TurnOutcome, E, R>) =>
      turn.pipe(
        Effect.tap((o) =>
          Effect.annotateCurrentSpan({
            "substrat.turn.id": o.turn_id,
            "gen_ai.usage.input_tokens": o.usage.input_tokens,
            "gen_ai.usage.output_tokens": o.usage.output_tokens,
            "substrat.cost_usd": o.usage.cost_usd,
            ...(o.error === null ? {} : { "error": true, "error.type": o.error.reason, "substrat.error.message": o.error.message })
          })
        ),
        tracing.asTurnOf(binding.session_id),
        Effect.withSpan("turn", {
          ...(span.parent === undefined ? { root: true } : { parent: span.parent }),
          links: span.links,
          attributes: { "substrat.session.id": binding.session_id, ...span.attributes }
        })
      )

    /**
     * Queue a turn for the session. When its predecessors are done, `prompt` is evaluated; None
     * skips the turn (nothing to say, agent gone). Never fails: errors are in the outcome.
     */
    const run = Effect.fn("TurnScheduler.run")(function*(
      binding: SessionBinding,
      prompt: Effect.Effect<Option.Option<string>>,
      cb: TurnCallbacks = {}
    ) {
      return yield* serialize(
        binding.session_id,
        prompt.pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.succeed(Option.none<TurnOutcome>()),
            onSome: (p) => {
              const turn = execute(binding, p, cb).pipe(Effect.tap((o) => cb.after ? cb.after(o) : Effect.void))
              const span = tracing.enabled && cb.span ? cb.span() : undefined
              return Effect.map(span === undefined ? turn : traced(binding, span, turn), Option.some)
            }
          }))
        )
      )
    })

    /** Convenience: one turn with a fixed prompt. */
    const send = Effect.fn("TurnScheduler.send")(function*(binding: SessionBinding, prompt: string, cb: TurnCallbacks = {}) {
      const out = yield* run(binding, Effect.succeed(Option.some(prompt)), cb)
      return Option.getOrThrow(out)
    })

    return { run, send, serialize, stopTurn } as const
  })
}) {}
