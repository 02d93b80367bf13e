// The scripted provider: an in-process fake that replies from a script (see Script.ts and
// docs/providers.md). First-class: used by tests, the demo and embedders' tests.
// Its suspend blob is `{"v":1,"agent","key","turn"}` as JSON, so an evicted agent resumes at
// the step where it stopped.
import { Duration, Effect, Either, Layer, Option, ParseResult, Schedule, Schema, Stream } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { NAME_PATTERN } from "../../domain/agent.js"
import { ProviderError } from "../../domain/errors.js"
import type { SessionId } from "../../domain/ids.js"
import type { LogPosition, ProviderContext, ProviderFactory, ProviderOutput, ProviderService } from "../Provider.js"
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
  /**
   * A directory of JSON books, `<name>.json` (a `ScriptBook`), picked by `scripted:<name>` when
   * `named` has no book of that name. Read when a provider instance is made (and checked by the
   * registry whenever the provider string is resolved). The daemon: `$SUBSTRAT_HOME/scripts`.
   */
  readonly booksDir?: string | undefined
}

/** Largest book file read from `booksDir`. */
export const maxBookBytes = 1024 * 1024
/** What `scripted:<name>` may name in `booksDir`: one file name, no path — the agent-name pattern. */
const bookNameRe = NAME_PATTERN

const fail = (reason: ProviderError["reason"], message: string) =>
  new ProviderError({ provider: "scripted", reason, message })

const chunksOf = (text: string): ReadonlyArray<string> => text.match(/\S+\s*|\s+/g) ?? []

const estimate = (s: string) => Math.ceil(s.length / 4)

/** Completes once a file exists at `path` (looked at every 20 ms; interruptible). */
const fileAppears = (path: string): Effect.Effect<void> =>
  Effect.promise(() => Fs.access(path).then(() => true, () => false)).pipe(
    Effect.repeat({ schedule: Schedule.spaced(Duration.millis(20)), until: (found) => found }),
    Effect.asVoid
  )

const decodeStrict = Schema.decodeUnknown(ScriptBookJson, { onExcessProperty: "error" })

/** A decode error as one line: `at <path>: <message>` per issue (the CLI prints errors on one line). */
const oneLine = (e: ParseResult.ParseError): string =>
  ParseResult.ArrayFormatter.formatErrorSync(e)
    .map((i) => `${i.path.length > 0 ? `at ${i.path.map(String).join(".")}: ` : ""}${i.message.replaceAll("\n", " ")}`)
    .join("; ")

/**
 * Read and decode one JSON book file (unknown keys are errors, so a typo does not go unseen).
 * `missing` is the error for a file that does not exist.
 */
export const loadBook = (
  file: string,
  missing: () => ProviderError = () => fail("unknown-provider", `scripted book ${file}: no such file`)
): Effect.Effect<ScriptBook, ProviderError> =>
  Effect.gen(function*() {
    const unknown = (why: string) => fail("unknown-provider", `scripted book ${file}: ${why}`)
    const st = yield* Effect.tryPromise({
      try: () => Fs.stat(file),
      catch: (e) => (e as NodeJS.ErrnoException).code === "ENOENT" ? missing() : unknown(String(e))
    })
    if (!st.isFile()) return yield* unknown("not a regular file")
    if (st.size > maxBookBytes) return yield* unknown(`larger than ${maxBookBytes} bytes`)
    const text = yield* Effect.tryPromise({ try: () => Fs.readFile(file, "utf8"), catch: (e) => unknown(String(e)) })
    return yield* decodeStrict(text).pipe(Effect.mapError((e) => unknown(`invalid script book: ${oneLine(e)}`)))
  })

/**
 * The book a provider string's variant names: none → `scripts` (default echo); a `named` book;
 * else `<booksDir>/<variant>.json`. Anything else fails with `reason: "unknown-provider"`.
 */
export const bookFor = (variant: string | null, options: ScriptedOptions = {}): Effect.Effect<Scripts, ProviderError> =>
  Effect.suspend(() => {
    if (variant === null) return Effect.succeed(options.scripts ?? namedScripts["echo"] ?? {})
    const named = options.named ?? namedScripts
    if (Object.prototype.hasOwnProperty.call(named, variant)) return Effect.succeed(named[variant] ?? {})
    const known = `built in: ${Object.keys(named).join(", ")}`
    if (options.booksDir === undefined) {
      return Effect.fail(fail("unknown-provider", `no scripted book named "${variant}" (${known})`))
    }
    if (!bookNameRe.test(variant)) {
      return Effect.fail(fail(
        "unknown-provider",
        `"${variant}" is not a scripted book name (1-64 of letters, digits, '_', '.', '-', starting with a letter or digit)`
      ))
    }
    const file = Path.join(options.booksDir, `${variant}.json`)
    return loadBook(file, () => fail("unknown-provider", `no scripted book named "${variant}" (${known}; no ${file})`))
  })

export const makeScripted = (
  ctx: ProviderContext,
  options: ScriptedOptions = {}
): Effect.Effect<ProviderService, ProviderError> =>
  Effect.gen(function*() {
    const book = yield* bookFor(ctx.variant, options)
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
        if (step.wait_for !== undefined) yield* fileAppears(step.wait_for)
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
        return tools.length === 0 ? Stream.fromIterable(tail) : Stream.concat(toolEvents, Stream.fromIterable(tail))
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

const decodeBlob = Schema.decodeUnknownEither(Blob)
const encodeBlob = Schema.encodeSync(Blob)

/**
 * Crash recovery: the blob lags the log when the agent ran turns since its last suspend. Its
 * `turn` becomes the sends that completed or failed (an interrupted one is sent again), so the
 * agent continues at the script step after the last one it finished.
 */
export const recoverState = (state: Uint8Array, position: LogPosition): Option.Option<Uint8Array> => {
  const turn = position.turnsStarted - (position.interrupted ? 1 : 0)
  if (turn <= 0 && state.byteLength === 0) return Option.none()
  const current = decodeBlob(new TextDecoder().decode(state))
  if (Either.isRight(current) && current.right.turn === turn && current.right.agent === position.agent_name) {
    return Option.none()
  }
  return Option.some(new TextEncoder().encode(encodeBlob({ v: 1, agent: position.agent_name, key: "(recovered)", turn })))
}

/** The `scripted` factory, for `ProviderRegistry.layer(...)` next to other providers. */
export const scriptedFactory = (options: ScriptedOptions = {}): ProviderFactory => ({
  name: "scripted",
  make: (ctx) =>
    Effect.acquireRelease(makeScripted(ctx, options), (p) => p.stop.pipe(Effect.ignore)),
  checkVariant: (variant) => Effect.asVoid(bookFor(variant, options)),
  recoverState
})

/** A registry holding only the scripted provider. */
export const layer = (options: ScriptedOptions = {}): Layer.Layer<ProviderRegistry> =>
  ProviderRegistry.layer(scriptedFactory(options))

/** Decode a JSON script book (e.g. from a file or an RPC payload). */
export const decodeBook = (json: string): Effect.Effect<ScriptBook, ProviderError> =>
  Schema.decode(ScriptBookJson)(json).pipe(Effect.mapError((e) => fail("start", `invalid script book: ${e.message}`)))
