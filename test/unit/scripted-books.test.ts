// Scripted books from a directory (`scripted:<name>` → <booksDir>/<name>.json): lookup order,
// strict decoding, name and size limits, and the registry refusing a bad variant up front.
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Fiber, Schema, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ProviderError } from "../../src/domain/errors.js"
import { SessionId } from "../../src/domain/ids.js"
import type { ProviderContext } from "../../src/provider/Provider.js"
import { makeRegistry } from "../../src/provider/ProviderRegistry.js"
import { ScriptBookJson } from "../../src/provider/scripted/Script.js"
import * as ScriptedProvider from "../../src/provider/scripted/ScriptedProvider.js"
import { namedScripts } from "../../src/provider/scripted/scripts.js"
import { tmpDir } from "../support/tmpDir.js"

const ctx = (variant: string | null, agent_name = "lead"): ProviderContext => ({
  session_id: SessionId.make("00000000-0000-4000-8000-000000000001"),
  agent_name,
  role: "manager",
  variant,
  tools: { invoke: () => Effect.succeed({ is_error: false, result: {} }) }
})

/** One turn's final text. */
const say = (variant: string | null, booksDir: string, prompt: string, agent = "lead") =>
  Effect.scoped(Effect.gen(function*() {
    const p = yield* ScriptedProvider.scriptedFactory({ booksDir }).make(ctx(variant, agent))
    yield* p.start(ctx(variant).session_id, "")
    const out = yield* Stream.runCollect(p.send(prompt))
    return Chunk.toReadonlyArray(out).flatMap((o) => (o._tag === "Final" ? [o.text] : [])).join("")
  }))

const failure = <A>(e: Effect.Effect<A, ProviderError>) =>
  Effect.map(Effect.exit(e), (x) => {
    if (Exit.isSuccess(x)) throw new Error("expected a failure")
    const err = x.cause._tag === "Fail" ? x.cause.error : null
    if (err === null) throw new Error(`unexpected cause ${String(x.cause)}`)
    return err
  })

describe("scripted books from a directory", () => {
  it("the built-in books are plain JSON: they round-trip through the strict decoder", () => {
    for (const book of Object.values(namedScripts)) {
      expect(Schema.decodeUnknownSync(ScriptBookJson, { onExcessProperty: "error" })(JSON.stringify(book))).toEqual(book)
    }
  })

  it.scoped("scripted:<name> reads <dir>/<name>.json (per agent, templated); built-in names win over files", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("books-")
      Fs.writeFileSync(Path.join(dir, "mine.json"), JSON.stringify({ lead: { steps: [{ text: "lead: {{prompt}}" }] }, "*": { steps: [{ text: "other" }] } }))
      Fs.writeFileSync(Path.join(dir, "echo.json"), JSON.stringify({ "*": { steps: [{ text: "file echo" }] } }))
      expect(yield* say("mine", dir, "hi")).toBe("lead: hi")
      expect(yield* say("mine", dir, "hi", "someone")).toBe("other")
      expect(yield* say("echo", dir, "hi")).toBe("echo: hi")
      expect(yield* say(null, dir, "plain")).toBe("echo: plain")
    }))

  it.scoped("missing, undecodable, misspelt, oversized books and path-like names are unknown-provider, with the reason", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("books-")
      Fs.writeFileSync(Path.join(dir, "typo.json"), JSON.stringify({ lead: { steps: [{ text: "ok", tool: [] }] } }))
      Fs.writeFileSync(Path.join(dir, "bad-after.json"), JSON.stringify({ lead: { steps: [], after: "loop" } }))
      Fs.writeFileSync(Path.join(dir, "garbage.json"), "{")
      Fs.writeFileSync(Path.join(dir, "huge.json"), " ".repeat(ScriptedProvider.maxBookBytes + 1))
      Fs.mkdirSync(Path.join(dir, "adir.json"))
      const cases: ReadonlyArray<readonly [string, RegExp]> = [
        ["absent", /no scripted book named "absent" \(built in: echo, demo; no .*absent\.json\)/],
        ["typo", /typo\.json: invalid script book: at lead\.steps\.0\.tool: is unexpected/],
        ["bad-after", /bad-after\.json: invalid script book: at lead\.after/],
        ["garbage", /garbage\.json: invalid script book/],
        ["huge", /huge\.json: larger than 1048576 bytes/],
        ["adir", /adir\.json: not a regular file/],
        ["../books/typo", /not a scripted book name/],
        [".hidden", /not a scripted book name/],
        ["", /not a scripted book name/]
      ]
      for (const [name, message] of cases) {
        const e = yield* failure(ScriptedProvider.bookFor(name, { booksDir: dir }))
        expect(e.reason, name).toBe("unknown-provider")
        expect(e.message, name).toMatch(message)
        expect(e.message, name).not.toContain("\n")
      }
      // Without a books directory only the built-in names exist.
      expect((yield* failure(ScriptedProvider.bookFor("typo"))).message).toMatch(/no scripted book named "typo" \(built in: echo, demo\)$/)
    }))

  it.scoped("the registry refuses a bad variant when the provider string is resolved", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("books-")
      Fs.writeFileSync(Path.join(dir, "ok.json"), JSON.stringify({ "*": { steps: [] } }))
      const registry = makeRegistry([ScriptedProvider.scriptedFactory({ booksDir: dir })])
      expect((yield* registry.get("scripted:ok")).name).toBe("scripted")
      expect((yield* registry.get("scripted")).name).toBe("scripted")
      const e = yield* failure(registry.get("scripted:nope"))
      expect([e.reason, e.provider]).toEqual(["unknown-provider", "scripted"])
      // The file is read at each resolution: a book written later is found.
      Fs.writeFileSync(Path.join(dir, "nope.json"), JSON.stringify({ "*": { steps: [] } }))
      expect((yield* registry.get("scripted:nope")).name).toBe("scripted")
    }))
  it.live("wait_for holds the turn until the file exists (templated per agent)", () =>
    Effect.scoped(Effect.gen(function*() {
      const dir = yield* tmpDir("books-")
      Fs.writeFileSync(Path.join(dir, "gated.json"), JSON.stringify({ "*": { steps: [{ wait_for: Path.join(dir, "go-{{agent}}"), text: "released" }] } }))
      const turn = yield* Effect.fork(say("gated", dir, "hi", "w"))
      yield* Effect.sleep("300 millis")
      expect(turn.unsafePoll()).toBeNull()
      Fs.writeFileSync(Path.join(dir, "go-w"), "")
      expect(yield* Fiber.join(turn)).toBe("released")
    })))
})
