// The scripted provider: an in-process fake that replies from a script (see Script.ts and
// docs/providers.md). First-class: used by tests, the demo and embedders' tests.
// Its suspend blob is `{"v":1,"agent","key","turn"}` as JSON, so an evicted agent resumes at
// the step where it stopped.
import { Duration, Effect, Layer, Schema, Stream } from "effect"
import { ProviderError } from "../../domain/errors.js"
import type { SessionId } from "../../domain/ids.js"
import type { ProviderContext, ProviderFactory, ProviderOutput, ProviderService } from "../Provider.js"
import { ProviderRegistry } from "../ProviderRegistry.js"
import { lookupScript, replyFor, type ScriptBook, ScriptBookJson, type Scripts } from "./Script.js"
import { namedScripts } from "./scripts.js"

const Blob = Schema.parseJson(Schema.Struct({
  v: Schema.Literal(1),
  agent: Schema.String,
  key: Schema.String,
  turn: Schema.Number
}))

export interface ScriptedOptions {
  /** The book used when the provider string has no variant (`scripted`). Default: echo. */
  readonly scripts?: Scripts
  /** Books picked by `scripted:<name>`. Default: `namedScripts` (echo, demo). */
  readonly named?: Readonly<Record<string, Scripts | ScriptBook>>
}

const fail = (reason: ProviderError["reason"], message: string) =>
  new ProviderError({ provider: "scripted", reason, message })

const chunksOf = (text: string): ReadonlyArray<string> => text.match(/\S+\s*|\s+/g) ?? []

const estimate = (s: string) => Math.ceil(s.length / 4)

export const makeScripted = (
  ctx: ProviderContext,
  options: ScriptedOptions = {}
): Effect.Effect<ProviderService, ProviderError> =>
  Effect.gen(function*() {
    const named = options.named ?? namedScripts
    const book: Scripts | undefined = ctx.variant === null ? options.scripts ?? namedScripts["echo"] : named[ctx.variant]
    if (book === undefined) {
      return yield* fail("start", `no scripted book named "${ctx.variant}" (known: ${Object.keys(named).join(", ")})`)
    }
    const found = lookupScript(book, ctx.agent_name, ctx.role)
    let turn = 0
    let live = false
    let stopped = false
    const key = found?.key ?? "(none)"

    const guard = (what: string) =>
      stopped ? Effect.fail(fail("turn", `${what}: provider was stopped`)) : Effect.void

    const send = (message: string): Stream.Stream<ProviderOutput, ProviderError> =>
      Stream.unwrap(Effect.gen(function*() {
        yield* guard("send")
        if (!live) return yield* fail("turn", "send before start/resume")
        const input = { prompt: message, turn, agent: ctx.agent_name, role: ctx.role }
        turn += 1
        const step = found === null ? { text: "" } : replyFor(found.script, input)
        if (step.delay_ms !== undefined && step.delay_ms > 0) yield* Effect.sleep(Duration.millis(step.delay_ms))
        if (step.error !== undefined) return yield* fail("turn", step.error)
        const text = step.text ?? ""
        const tools = step.tools ?? []
        const toolEvents = Stream.fromIterable(tools.map((t, i) => [t, i] as const)).pipe(
          Stream.mapEffect(([t, i]) =>
            ctx.tools.invoke(t.tool, t.args).pipe(
              Effect.map((r): ProviderOutput => ({
                _tag: "ToolCall",
                call_id: `${ctx.session_id.slice(0, 8)}-${input.turn}-${i}`,
                tool: t.tool,
                arguments: t.args,
                result: r.result,
                is_error: r.is_error
              }))
            )
          )
        )
        const tail: ReadonlyArray<ProviderOutput> = [
          ...chunksOf(text).map((c): ProviderOutput => ({ _tag: "TextChunk", text: c })),
          {
            _tag: "Usage",
            ...(step.usage ?? { input_tokens: estimate(message), output_tokens: estimate(text), cost_usd: 0 })
          },
          { _tag: "Final", text }
        ]
        return Stream.concat(toolEvents, Stream.fromIterable(tail))
      }))

    const service: ProviderService = {
      name: "scripted",
      start: (_session: SessionId, _instructions: string) =>
        guard("start").pipe(Effect.andThen(Effect.sync(() => {
          live = true
          turn = 0
        }))),
      send,
      suspend: guard("suspend").pipe(
        Effect.andThen(Effect.suspend(() => Schema.encode(Blob)({ v: 1, agent: ctx.agent_name, key, turn })).pipe(
            Effect.map((s) => new TextEncoder().encode(s)),
            Effect.mapError((e) => fail("suspend", e.message))
        ))
      ),
      resume: (state: Uint8Array) =>
        guard("resume").pipe(
          Effect.andThen(Schema.decode(Blob)(new TextDecoder().decode(state))),
          Effect.mapError((e) => e instanceof ProviderError ? e : fail("resume", `bad scripted blob: ${e.message}`)),
          Effect.flatMap((b) =>
            b.agent === ctx.agent_name
              ? Effect.sync(() => {
                turn = b.turn
                live = true
              })
              : Effect.fail(fail("resume", `blob belongs to ${b.agent}, not ${ctx.agent_name}`))
          )
        ),
      stop: Effect.sync(() => {
        stopped = true
        live = false
      })
    }
    return service
  })

/** The `scripted` factory, for `ProviderRegistry.layer(...)` next to other providers. */
export const scriptedFactory = (options: ScriptedOptions = {}): ProviderFactory => ({
  name: "scripted",
  make: (ctx) =>
    Effect.acquireRelease(makeScripted(ctx, options), (p) => p.stop.pipe(Effect.ignore))
})

/** A registry holding only the scripted provider. */
export const layer = (options: ScriptedOptions = {}): Layer.Layer<ProviderRegistry> =>
  ProviderRegistry.layer(scriptedFactory(options))

/** Decode a JSON script book (e.g. from a file or an RPC payload). */
export const decodeBook = (json: string): Effect.Effect<ScriptBook, ProviderError> =>
  Schema.decode(ScriptBookJson)(json).pipe(Effect.mapError((e) => fail("start", `invalid script book: ${e.message}`)))
