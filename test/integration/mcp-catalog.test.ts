// requires: git
// The MCP-facing catalog (src/domain/tools.ts) must say exactly what the ToolHandler
// accepts (src/agent/ToolHandler.ts): same tools, same descriptions, same fields, and — checked
// by a property over arbitrary argument objects — the same accept/reject decision and the same
// decoded value. If either side changes alone, this fails.
import { describe, expect, it } from "@effect/vitest"
import { Either, JSONSchema, Schema } from "effect"
import fc from "fast-check"
import * as Handler from "../../src/agent/ToolHandler.js"
import { BroadcastRpc, CheckInboxRpc, InspectAgentRpc, SendMessageRpc, SpawnAgentRpc } from "../../src/protocol/AgentRpcs.js"
import { AgentRpcs } from "../../src/protocol/AgentRpcs.js"
import { argsSchemaOf, inputJsonSchema, toolDescriptions, toolNames, type ToolName } from "../../src/domain/tools.js"
import { fuzzParams, fuzzProfile } from "../support/fuzz.js"

const handlerArgs: Record<ToolName, Schema.Schema.AnyNoContext> = {
  send_message: Handler.SendMessageArgs,
  broadcast: Handler.BroadcastArgs,
  check_inbox: Handler.CheckInboxArgs,
  spawn_agent: Handler.SpawnAgentArgs,
  inspect_agent: Handler.InspectAgentArgs,
  ask_human: Handler.AskHumanArgs
}

/** Drop what only documents (descriptions, titles, defaults) to compare the shapes. */
const shape = (u: unknown): unknown => {
  if (Array.isArray(u)) return u.map(shape)
  if (typeof u !== "object" || u === null) return u
  return Object.fromEntries(
    Object.entries(u).filter(([k]) => !["description", "title", "default", "$schema"].includes(k)).map(([k, v]) => [k, shape(v)])
  )
}

/** What the ToolHandler does with raw arguments (its decode + check_inbox's emptiness check). */
const handlerDecode = (tool: ToolName, args: Record<string, unknown>): Either.Either<unknown, unknown> => {
  const r = Schema.decodeUnknownEither(handlerArgs[tool], { onExcessProperty: "error" })(args)
  if (tool === "check_inbox" && Object.keys(args).length > 0) return Either.left("check_inbox takes no arguments")
  return r
}
const catalogDecode = (tool: ToolName, args: Record<string, unknown>): Either.Either<unknown, unknown> =>
  Schema.decodeUnknownEither(argsSchemaOf(tool), { onExcessProperty: "error" })(args)

describe("tool catalog (MCP) vs ToolHandler", () => {
  it("same tools, same descriptions, same RPC methods", () => {
    expect([...toolNames].sort()).toEqual(Object.keys(Handler.toolCatalog).sort())
    for (const t of toolNames) expect(toolDescriptions[t]).toBe(Handler.toolCatalog[t].description)
    expect([...AgentRpcs.requests.keys()].sort()).toEqual([...toolNames].sort())
    expect([SendMessageRpc, BroadcastRpc, CheckInboxRpc, SpawnAgentRpc, InspectAgentRpc].map((r) => r._tag)).toEqual([
      "send_message",
      "broadcast",
      "check_inbox",
      "spawn_agent",
      "inspect_agent"
    ])
  })

  it("same JSON Schema shapes (check_inbox: an object with no properties on both sides)", () => {
    for (const t of toolNames) {
      const mine = inputJsonSchema(t)
      expect(mine.type).toBe("object")
      expect(mine.additionalProperties).toBe(false)
      if (t === "check_inbox") {
        expect(mine.properties).toEqual({})
        expect(Object.keys(Handler.CheckInboxArgs.fields)).toEqual([])
        continue
      }
      expect(shape(mine)).toEqual(shape(JSONSchema.make(handlerArgs[t])))
    }
  })

  it(`property: same accept/reject decision and decoded value for arbitrary arguments (${fuzzProfile.name})`, () => {
    const value = fc.oneof(
      fc.string({ maxLength: 8 }),
      fc.constantFrom("", "worker", "reviewer", "USER", "kid"),
      fc.uuid(),
      fc.boolean(),
      fc.constant(null),
      fc.integer(),
      fc.array(fc.string({ maxLength: 3 }), { maxLength: 2 })
    )
    const extraKeys = ["agent_id", "from", "extra"]
    for (const t of toolNames) {
      const keys = [...Object.keys(Handler.toolCatalog[t].args.fields), ...extraKeys]
      const args = fc.record(Object.fromEntries(keys.map((k) => [k, value])), { requiredKeys: [] })
      fc.assert(
        fc.property(args, (a) => {
          const mine = catalogDecode(t, a)
          const theirs = handlerDecode(t, a)
          expect(Either.isRight(mine), `${t} ${JSON.stringify(a)}`).toBe(Either.isRight(theirs))
          if (Either.isRight(mine) && Either.isRight(theirs)) expect(mine.right).toEqual(theirs.right)
        }),
        fuzzParams(200)
      )
    }
  })

  it("spawn_agent: optional provider and workspace_subdir (string or null), described as applied", () => {
    const spawn = inputJsonSchema("spawn_agent")
    expect(spawn.required).toEqual(["name", "instructions"])
    const props = spawn.properties as Record<string, { readonly description?: string }>
    expect(Object.keys(props).sort()).toEqual(["budget_tokens", "budget_turns", "budget_usd", "instructions", "name", "provider", "role", "workspace", "workspace_subdir"])
    expect(props["workspace"]!.description).toMatch(/branch/)
    expect(Either.isLeft(catalogDecode("spawn_agent", { name: "kid", instructions: "x", workspace: "fork" }))).toBe(true)
    expect(props["workspace_subdir"]!.description).not.toMatch(/reserved|not applied/i)
    expect(props["workspace_subdir"]!.description).toMatch(/own workspace/)
    expect(props["provider"]!.description).toMatch(/codex/)
    for (const provider of ["codex", null]) {
      const decoded = catalogDecode("spawn_agent", { name: "kid", instructions: "x", provider })
      expect(decoded).toEqual(Either.right({ name: "kid", instructions: "x", role: "worker", provider }))
    }
    expect(Either.isLeft(catalogDecode("spawn_agent", { name: "kid", instructions: "x", provider: 7 }))).toBe(true)
  })
})
