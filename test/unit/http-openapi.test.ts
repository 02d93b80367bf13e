// The OpenAPI document is generated from the one declaration of the HTTP API
// (src/protocol/HttpApi.ts): every endpoint but /openapi.json is in it, each with the document's
// credentials (no operation says it needs none), the admin Schemas' bodies and the wire errors.
import { describe, expect, it } from "vitest"
import { openApiDocument } from "../../src/http/Api.js"
import { SubstratApi } from "../../src/protocol/HttpApi.js"

describe("GET /openapi.json's document", () => {
  const doc = openApiDocument()
  const operations = Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item as Record<string, unknown>).map(([method, op]) => ({ path, method, op: op as Record<string, unknown> })))

  it("lists every endpoint of the API except itself", () => {
    const declared = Object.values(SubstratApi.groups).flatMap((g) =>
      Object.values(g.endpoints).map((e) => `${e.method.toLowerCase()} ${e.path.replace(/:(\w+)/g, "{$1}")}`))
    const listed = operations.map((o) => `${o.method} ${o.path}`)
    expect(listed.sort()).toEqual(declared.filter((r) => r !== "get /openapi.json").sort())
    expect(listed.length).toBeGreaterThan(30)
  })

  it("every operation needs the bearer token or the session cookie", () => {
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(["bearer", "session"])
    expect(doc.security).toEqual([{ bearer: [] }, { session: [] }])
    for (const o of operations) expect({ route: `${o.method} ${o.path}`, security: o.op["security"] }).toEqual({ route: `${o.method} ${o.path}`, security: undefined })
  })

  it("bodies, statuses and errors come from the declaration", () => {
    const send = doc.paths["/v1/agents/{ref}/messages"] as Record<string, { requestBody?: unknown; responses: Record<string, unknown> }>
    expect(send["post"]!.requestBody).toBeDefined()
    expect(Object.keys(send["post"]!.responses)).toEqual(expect.arrayContaining(["200", "202", "400", "401", "404", "413", "500", "503"]))
    const create = doc.paths["/v1/agents"] as Record<string, { responses: Record<string, unknown> }>
    expect(Object.keys(create["post"]!.responses)).toContain("201")
    const events = doc.paths["/v1/events"] as Record<string, { responses: Record<string, { content: Record<string, unknown> }> }>
    expect(Object.keys(events["get"]!.responses["200"]!.content)).toEqual(["text/event-stream"])
  })
})
