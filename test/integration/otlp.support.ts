// An OTLP/HTTP (JSON) receiver inside a test: it decodes the daemon's exports to `/v1/traces`
// into plain spans, with helpers to read attributes and walk parents.
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { waitFor } from "./daemon.support.js"
import { request, type Target } from "./http.support.js"

export interface AnyValue {
  readonly stringValue?: string
  readonly intValue?: number | string
  readonly doubleValue?: number
  readonly boolValue?: boolean
}
export interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: AnyValue }>
  readonly links: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>
  /** code 1: ok, 2: error. */
  readonly status?: { readonly code?: number; readonly message?: string }
}
interface Export {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: AnyValue }> }
    readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<OtlpSpan> }>
  }>
}

export interface OtlpReceiver {
  /** Base URL for SUBSTRAT_OTLP_ENDPOINT. */
  readonly endpoint: string
  readonly spans: Array<OtlpSpan>
  /** `service.name` of every resource received. */
  readonly services: Array<string>
  readonly close: () => Promise<void>
}

export const startReceiver = async (): Promise<OtlpReceiver> => {
  const spans: Array<OtlpSpan> = []
  const services: Array<string> = []
  const server = http.createServer((req, res) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (d: string) => (body += d))
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/v1/traces") {
        const data = JSON.parse(body) as Export
        for (const rs of data.resourceSpans) {
          services.push(String(rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue))
          for (const ss of rs.scopeSpans) spans.push(...ss.spans)
        }
      }
      res.writeHead(200, { "content-type": "application/json" })
      res.end("{}")
    })
  })
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  const port = (server.address() as AddressInfo).port
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    services,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((r) => server.close(() => r()))
    }
  }
}

/** An attribute's value (int values arrive as numbers or decimal strings). */
export const attr = (s: OtlpSpan, key: string): string | number | boolean | undefined => {
  const v = s.attributes.find((a) => a.key === key)?.value
  if (v === undefined) return undefined
  if (v.intValue !== undefined) return Number(v.intValue)
  return v.stringValue ?? v.doubleValue ?? v.boolValue
}

/**
 * Every span the daemon ended before this call has arrived, without a fixed wait: a marker agent is
 * created (its request's root span `user.agent.create` is exported) and its span awaited. The
 * exporter takes its whole buffer each time and sends one batch after the other, so a span that
 * ended before the marker's comes in the marker's batch or an earlier one. Call it once the spans
 * of the earlier creations have arrived (they ended before spans already awaited). Returns the
 * marker's trace id.
 */
export const exportedSoFar = async (receiver: OtlpReceiver, target: Target): Promise<string> => {
  const creations = () => receiver.spans.filter((s) => s.name === "user.agent.create" && s.parentSpanId === undefined)
  const before = creations().length
  const created = await request(target, "POST", "/v1/agents", { name: `export-marker-${before}`, provider: "scripted" })
  if (created.status !== 201) throw new Error(`the marker agent was not created: ${created.status} ${created.body}`)
  return waitFor("the marker's span exported", () => creations()[before]?.traceId, 30_000)
}
