// Tracing: OpenTelemetry traces of the agent tree's work, exported over OTLP/HTTP (JSON) by
// @effect/opentelemetry's OtlpTracer when an endpoint is configured (`otlp.endpoint`, else
// OTEL_EXPORTER_OTLP_ENDPOINT); off otherwise — then `Tracing` is the default value below, no
// span is made for turns, messages or tool calls, and envelopes carry no trace context.
//
// One trace per user request: a `user.*` root span (Handlers: agent.send, agent.create) → a
// `message` span per delivery → the recipient's `turn` (parent: the waking message's span, carried
// in the envelope's `trace` field as a W3C traceparent, so it survives a restart; links: the other
// messages the turn's prompt took) → its `tool_call`s (ours and the provider's own), its
// `model.request`s (each request through the agent's forwarder socket, or the openai provider's
// own calls: tokens, cost, HTTP status; a refused one has an error status), its `egress.request`s
// (each request through its egress proxy: host, port, method, rule, bytes; refused or ended by a
// limit: an error status) and the messages it
// sends, whose turns follow in the same trace. Spans that belong to no such tree (the daemon's own
// background work, the dashboard's reads) are not exported: a root span is kept only when it is a
// `user.*` request or a `turn` (one woken with no trace context), and a child only when its parent
// is kept (docs/tracing.md).
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { Clock, Context, Data, type Duration, Effect, Exit, Layer, Option, type Scope, Tracer } from "effect"
import type { RequestUsage } from "../domain/requestUsage.js"
import { version } from "../version.js"

/** Attribute values of our spans. */
export type Attributes = Readonly<Record<string, string | number | boolean>>

/** Why a model request's span ended in error (its status is ERROR; `error.type` says the kind). */
export class ModelRequestFailed extends Data.TaggedError("ModelRequestFailed")<{
  readonly type: string
  readonly message: string
}> {}

/**
 * One model request's span (`model.request`), begun before the request is admitted and ended by
 * whoever sees the response finish — a forwarder's socket callbacks or the openai provider's
 * stream. `end` is idempotent: the first call wins.
 */
export interface ModelRequestSpan {
  readonly annotate: (attributes: Attributes) => void
  readonly end: (failure?: { readonly type: string; readonly message: string }) => Effect.Effect<void>
}

/** A model request's usage as span attributes (OpenTelemetry gen_ai names where there are some). */
export const usageAttributes = (u: RequestUsage, cost_usd: number): Attributes => ({
  ...(u.model === null ? {} : { "gen_ai.response.model": u.model }),
  "gen_ai.usage.input_tokens": u.input_tokens,
  "gen_ai.usage.output_tokens": u.output_tokens,
  "gen_ai.usage.cache_read.input_tokens": u.cache_read_tokens,
  "gen_ai.usage.cache_creation.input_tokens": u.cache_write_tokens,
  "substrat.cost_usd": cost_usd
})

const noSpan: ModelRequestSpan = { annotate: () => undefined, end: () => Effect.void }

export interface TracingService {
  /** False: no spans of ours, no trace context in envelopes. */
  readonly enabled: boolean
  /** The current span as a W3C traceparent (`00-<trace>-<span>-01`); undefined when off or none. */
  readonly traceparent: Effect.Effect<string | undefined>
  /** The span a traceparent names, as a parent or link; undefined when it is not one. */
  readonly spanOf: (traceparent: string | undefined) => Tracer.ExternalSpan | undefined
  /** Run `effect` as the session's running turn: tool calls that reach the daemon over the agent's socket hang below it. */
  readonly asTurnOf: (session: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** The running turn's span of a session, if any. */
  readonly turnOf: (session: string) => Tracer.AnySpan | undefined
  /** Begin a model request's span below the session's running turn (a no-op span when off). */
  readonly modelRequest: (session: string, attributes: Attributes) => Effect.Effect<ModelRequestSpan>
  /** Begin an egress request's span (`egress.request`: one request through the agent's egress proxy) below the session's running turn. */
  readonly egressRequest: (session: string, attributes: Attributes) => Effect.Effect<ModelRequestSpan>
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/

const spanOf = (traceparent: string | undefined): Tracer.ExternalSpan | undefined => {
  const m = traceparent === undefined ? null : TRACEPARENT.exec(traceparent)
  return m === null ? undefined : Tracer.externalSpan({ traceId: m[1]!, spanId: m[2]!, sampled: true })
}

const off: TracingService = {
  enabled: false,
  traceparent: Effect.succeed(undefined),
  spanOf: () => undefined,
  asTurnOf: () => (effect) => effect,
  turnOf: () => undefined,
  modelRequest: () => Effect.succeed(noSpan),
  egressRequest: () => Effect.succeed(noSpan)
}

const requestSpan = (span: Tracer.Span): ModelRequestSpan => {
  let ended = false
  return {
    annotate: (attributes) => {
      if (ended) return
      for (const [k, v] of Object.entries(attributes)) span.attribute(k, v)
    },
    end: (failure) =>
      Effect.flatMap(Clock.currentTimeNanos, (now) =>
        Effect.sync(() => {
          if (ended) return
          ended = true
          if (failure !== undefined) {
            span.attribute("error", true)
            span.attribute("error.type", failure.type)
          }
          span.end(now, failure === undefined ? Exit.void : Exit.fail(new ModelRequestFailed(failure)))
        }))
  }
}

const makeOn = (): TracingService => {
  const turns = new Map<string, Tracer.AnySpan>()
  /** A request's client span below the session's running turn. */
  const clientSpan = (name: string, session: string, attributes: Attributes) =>
    Effect.suspend(() => {
      const turn = turns.get(session)
      return Effect.map(Effect.makeSpan(name, { ...(turn === undefined ? {} : { parent: turn }), kind: "client", attributes }), requestSpan)
    })
  return {
    enabled: true,
    traceparent: Effect.map(Effect.option(Effect.currentSpan), (s) => Option.isSome(s) ? `00-${s.value.traceId}-${s.value.spanId}-01` : undefined),
    spanOf,
    asTurnOf: (session) => (effect) =>
      Effect.flatMap(Effect.option(Effect.currentSpan), (span) => {
        if (Option.isNone(span)) return effect
        turns.set(session, span.value)
        return Effect.ensuring(effect, Effect.sync(() => {
          if (turns.get(session) === span.value) turns.delete(session)
        }))
      }),
    turnOf: (session) => turns.get(session),
    modelRequest: (session, attributes) => clientSpan("model.request", session, attributes),
    egressRequest: (session, attributes) => clientSpan("egress.request", session, attributes)
  }
}

export class Tracing extends Context.Reference<Tracing>()("substrat/Tracing", { defaultValue: () => off }) {}

/** Whether a span belongs to an exported trace (see the header). */
const keptRoot = (name: string) => name.startsWith("user.") || name === "turn"

/**
 * A tracer that exports through `otlp` the spans of kept traces and gives every other span to
 * `native` (Effect's default tracer: a span in memory, dropped when it ends).
 */
const filtering = (otlp: Tracer.Tracer, native: Tracer.Tracer): Tracer.Tracer => {
  const kept = new WeakSet<Tracer.AnySpan>()
  return Tracer.make({
    span(name, parent, context, links, startTime, kind, options) {
      const keep = Option.isSome(parent)
        ? parent.value._tag === "ExternalSpan" || kept.has(parent.value)
        : keptRoot(name)
      if (!keep) return native.span(name, parent, context, links, startTime, kind, options)
      const span = otlp.span(name, parent, context, links, startTime, kind, options)
      kept.add(span)
      return span
    },
    context: otlp.context
  })
}

/**
 * Install the OTLP tracer for the rest of the scope (every fiber forked from here on uses it) and
 * return the Tracing service to provide. Spans are batched and exported every `exportInterval`,
 * and flushed when the scope closes.
 */
export const installOtlp = (options: {
  readonly endpoint: string
  readonly exportInterval?: Duration.DurationInput
}): Effect.Effect<TracingService, never, Scope.Scope> =>
  Effect.gen(function*() {
    const native = yield* Effect.tracer
    const otlp = yield* OtlpTracer.make({
      url: `${options.endpoint.replace(/\/+$/, "")}/v1/traces`,
      resource: { serviceName: "substrat", serviceVersion: version },
      exportInterval: options.exportInterval ?? "2 seconds"
    }).pipe(Effect.provide(Layer.merge(OtlpSerialization.layerJson, FetchHttpClient.layer)))
    yield* Effect.withTracerScoped(filtering(otlp, native))
    return makeOn()
  })

/**
 * Tracing on, with whatever tracer the caller installed (an embedder's `NodeSdk.layer`, a test's
 * recording tracer): our spans are made and envelopes carry trace context.
 */
export const layerOn: Layer.Layer<Tracing> = Layer.sync(Tracing, makeOn)
