// One turn of a CLI provider = one sandboxed process. Its stdout is split into lines, each line
// decoded by the CLI's own decoder into ProviderOutput; stderr is collected (its tail goes into
// the error message of a failed turn); at exit the decoder decides whether the turn succeeded.
// The process lives in the stream's scope: when the consumer stops (turn interrupted, provider
// evicted, daemon stopping) the sandbox's process group is killed.
import { Chunk, Effect, Either, Fiber, Stream } from "effect"
import { ProviderError } from "../../domain/errors.js"
import type { ExitStatus, SandboxRequest, SandboxService } from "../../sandbox/Sandbox.js"
import type { ProviderOutput } from "../Provider.js"

/** A per-turn decoder: stateful across lines (pending tool calls, the session id, …). */
export interface TurnDecoder {
  /** The outputs one stdout line produces (often none). Never throws: bad lines are skipped. */
  readonly line: (raw: string) => ReadonlyArray<ProviderOutput>
  /** After exit: the trailing outputs (usage, final), or why the turn failed. */
  readonly end: (exit: ExitStatus) => Either.Either<ReadonlyArray<ProviderOutput>, string>
}

/** Keep the last `max` characters of what was written. */
const tailOf = (text: string, max: number) => (text.length <= max ? text : `…${text.slice(text.length - max)}`)

const STDERR_KEEP = 64 * 1024
const STDERR_IN_ERROR = 2000

const describe = (e: { readonly _tag: string; readonly message: string }) => `${e._tag}: ${e.message}`

/** Run one turn: start the sandboxed process, stream its decoded output, judge the exit. */
export const runTurn = (
  sandbox: SandboxService,
  provider: string,
  request: SandboxRequest,
  decoder: TurnDecoder
): Stream.Stream<ProviderOutput, ProviderError> => {
  const fail = (message: string) => new ProviderError({ provider, reason: "turn", message })
  return Stream.unwrapScoped(Effect.gen(function*() {
    const proc = yield* sandbox.start(request).pipe(Effect.mapError((e) => fail(`cannot start the sandbox: ${describe(e)}`)))
    // Drain stderr concurrently (the sandbox needs it drained before `exit`), keeping a bounded tail.
    const stderrFiber = yield* proc.stderr.pipe(
      Stream.decodeText(),
      Stream.runFold("", (acc, s) => tailOf(acc + s, STDERR_KEEP)),
      Effect.orElseSucceed(() => ""),
      Effect.forkScoped
    )
    const lines = proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.filter((l) => l.trim() !== ""),
      Stream.mapConcat((l) => decoder.line(l)),
      Stream.mapError((e) => fail(`reading output: ${e.message}`))
    )
    const ending = Stream.fromIterableEffect(Effect.gen(function*() {
      const stderr = yield* Fiber.join(stderrFiber)
      const exit = yield* proc.exit.pipe(Effect.mapError((e) => fail(`${describe(e)}${stderr.trim() === "" ? "" : `\nstderr: ${tailOf(stderr.trim(), STDERR_IN_ERROR)}`}`)))
      const verdict = decoder.end(exit)
      if (Either.isLeft(verdict)) {
        const how = exit.signal !== null ? `signal ${exit.signal}` : `exit code ${exit.code}`
        const err = stderr.trim() === "" ? "" : `\nstderr: ${tailOf(stderr.trim(), STDERR_IN_ERROR)}`
        return yield* fail(`${verdict.left} (${how})${err}`)
      }
      return Chunk.fromIterable(verdict.right)
    }))
    return Stream.concat(lines, ending)
  }))
}
