// `session/request_permission` for an ACP agent, by the `acp.approve` policy:
//   auto    allow (the option of kind allow_once, else allow_always): inside the sandbox the
//           sandbox is the boundary, as for claude's bypassPermissions
//   reject  refuse (reject_once, else reject_always)
// Each answer is shown in the turn's output as a ⚙ `permission` line (the tool's title and the
// option chosen). A request the agent withdraws (its signal aborts) is answered `cancelled`.
import type * as Acp from "@agentclientprotocol/sdk"
import type { ProviderOutput } from "../Provider.js"

export type Approve = "auto" | "reject"

const pick = (options: ReadonlyArray<Acp.PermissionOption>, kinds: ReadonlyArray<Acp.PermissionOptionKind>) => {
  for (const k of kinds) {
    const o = options.find((x) => x.kind === k)
    if (o !== undefined) return o
  }
  return undefined
}

export const make = (o: { readonly approve: Approve; readonly emit: (out: ProviderOutput) => void }) => {
  let n = 0
  const decide = (r: Acp.RequestPermissionRequest, signal: AbortSignal): Promise<Acp.RequestPermissionResponse> => {
    if (signal.aborted) return Promise.resolve({ outcome: { outcome: "cancelled" } })
    const option = o.approve === "auto"
      ? pick(r.options, ["allow_once", "allow_always"])
      : pick(r.options, ["reject_once", "reject_always"])
    n += 1
    const title = r.toolCall.title ?? r.toolCall.toolCallId
    o.emit({
      _tag: "ToolCall",
      call_id: `permission-${n}`,
      tool: "permission",
      arguments: { tool: title, options: r.options.map((x) => x.kind) },
      result: option === undefined ? `no ${o.approve === "auto" ? "allow" : "reject"} option: cancelled` : `${option.kind} (policy ${o.approve})`,
      is_error: option === undefined || o.approve === "reject",
      source: "provider"
    })
    return Promise.resolve(option === undefined ? { outcome: { outcome: "cancelled" } } : { outcome: { outcome: "selected", optionId: option.optionId } })
  }
  return { decide }
}
