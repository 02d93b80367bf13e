// AgentNodeOnWire (src/protocol/admin/agent.ts), the Schema the admin methods send AgentNode with:
// the same JSON as AgentNode's own Schema, decoded into the same checked AgentNode instance, the
// same refusals, and the same JSON Schema (the OpenAPI document is built from it).
import { describe, expect, it } from "@effect/vitest"
import { OpenApiJsonSchema } from "@effect/platform"
import { Arbitrary, Either, JSONSchema, Schema } from "effect"
import fc from "fast-check"
import { AgentNodeOnWire } from "../../src/protocol/admin/agent.js"
import { AgentListRpc } from "../../src/protocol/AdminRpcs.js"
import { AgentNode } from "../../src/domain/agent.js"

const node = new AgentNode({
  id: "0b8f3c2e-6a3f-4d1e-9c7a-2f5e8d9b1a40" as AgentNode["id"],
  name: "alice",
  session_id: "5d3c1b2a-7e6f-4a9b-8c0d-1e2f3a4b5c6d" as AgentNode["session_id"],
  parent_id: null,
  instructions: "review the diff",
  role: "worker",
  provider: "scripted",
  workspace_id: "9a8b7c6d-5e4f-4a3b-9c1d-0e1f2a3b4c5d" as AgentNode["workspace_id"],
  state: "idle"
})

describe("AgentNodeOnWire", () => {
  it("encodes to AgentNode's JSON, byte for byte, and decodes back to an equal AgentNode instance", () => {
    fc.assert(fc.property(Arbitrary.make(AgentNode), (n) => {
      const wire = JSON.stringify(Schema.encodeSync(AgentNodeOnWire)(n))
      expect(wire).toBe(JSON.stringify(Schema.encodeSync(AgentNode)(n)))
      const back = Schema.decodeUnknownSync(AgentNodeOnWire)(JSON.parse(wire))
      expect(back).toBeInstanceOf(AgentNode)
      expect(JSON.stringify(Schema.encodeSync(AgentNode)(back))).toBe(wire)
    }), { numRuns: 200 })
  })

  it("decoding drops fields AgentNode does not have, as AgentNode does", () => {
    const json = { ...JSON.parse(JSON.stringify(Schema.encodeSync(AgentNode)(node))) as Record<string, unknown>, extra: 1 }
    const back = Schema.decodeUnknownSync(AgentNodeOnWire)(json)
    expect(back).toBeInstanceOf(AgentNode)
    expect(back).toEqual(Schema.decodeUnknownSync(AgentNode)(json))
    expect(Object.keys(back)).not.toContain("extra")
    // An optional field, present and absent.
    for (const approve of ["ask", undefined]) {
      const withOptional = Schema.decodeUnknownSync(AgentNodeOnWire)(approve === undefined ? json : { ...json, approve })
      expect(withOptional).toEqual(Schema.decodeUnknownSync(AgentNode)(approve === undefined ? json : { ...json, approve }))
    }
  })

  it("decoding refuses what AgentNode refuses, with AgentNode's message", () => {
    const json = JSON.parse(JSON.stringify(Schema.encodeSync(AgentNode)(node))) as Record<string, unknown>
    for (const bad of [{ ...json, id: "not-a-uuid" }, { ...json, name: "" }, { ...json, state: "asleep" }, { ...json, role: undefined }, null, [], "x"]) {
      const got = Schema.decodeUnknownEither(AgentNodeOnWire)(bad)
      expect(Either.isLeft(got)).toBe(true)
      if (bad !== null && typeof bad === "object" && !Array.isArray(bad)) {
        expect(Either.isLeft(Schema.decodeUnknownEither(AgentNode)(bad))).toBe(true)
      }
    }
    const badName = Schema.decodeUnknownEither(AgentNodeOnWire)({ ...json, name: "" })
    expect(Either.isLeft(badName) && String(badName.left)).toContain("agent names are 1-64 characters")
  })

  it("encoding a value that is not an instance does what AgentNode does: valid fields pass, others are refused", () => {
    const plain = { ...Schema.encodeSync(AgentNode)(node) }
    const wire = Schema.encodeUnknownEither(AgentNodeOnWire)(plain)
    expect(Either.isRight(Schema.encodeUnknownEither(AgentNode)(plain))).toBe(true)
    expect(Either.isRight(wire) && JSON.stringify(wire.right)).toBe(JSON.stringify(Schema.encodeSync(AgentNode)(node)))
    for (const bad of [{ ...plain, name: "" }, { ...plain, id: 7 }, null, [node], "alice"]) {
      expect(Either.isLeft(Schema.encodeUnknownEither(AgentNode)(bad))).toBe(true)
      expect(Either.isLeft(Schema.encodeUnknownEither(AgentNodeOnWire)(bad))).toBe(true)
    }
  })

  it("has AgentNode's JSON Schema (refinements included) and OpenAPI schema", () => {
    expect(JSONSchema.make(AgentNodeOnWire)).toEqual(JSONSchema.make(AgentNode))
    const defs = (s: Schema.Schema.Any) => {
      const d: Record<string, OpenApiJsonSchema.JsonSchema> = {}
      const top = OpenApiJsonSchema.makeWithDefs(s as Schema.Schema<unknown, unknown>, { defs: d, defsPath: "#/components/schemas/" })
      return { top, d }
    }
    const list = defs(AgentListRpc.successSchema)
    expect(JSON.stringify(list.d)).toContain("\"format\":\"uuid\"")
    expect(list.d["AgentNode"]).toEqual(defs(Schema.Array(AgentNode)).d["AgentNode"])
  })
})
