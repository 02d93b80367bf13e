// The one mapping of service errors to the admin protocol's wire errors (src/daemon/Handlers.ts):
// each typed error lands on its wire error and code (docs/protocol.md, "Errors"); a value that only
// looks like a service error, or any other failure, is Internal.
import { describe, expect, it } from "vitest"
import { toRpcError } from "../../src/daemon/WireErrors.js"
import { ErrorCode } from "../../src/daemon/Rpcs.js"
import { NotFoundError, ProviderError, SessionStoreError } from "../../src/domain/errors.js"
import { WorkspaceError, WorkspaceHistoryError } from "../../src/sandbox/errors.js"

describe("service errors → wire errors", () => {
  it("maps each typed error to its wire error and code", () => {
    expect(toRpcError(new NotFoundError({ kind: "turn", id: "t", message: "m" }))).toMatchObject({
      _tag: "NotFound",
      kind: "turn",
      id: "t",
      code: ErrorCode.notFound
    })
    expect(toRpcError(new SessionStoreError({ session_id: "s", reason: "not-found", message: "m" }))).toMatchObject({ _tag: "NotFound", kind: "session", id: "s" })
    expect(toRpcError(new SessionStoreError({ session_id: "s", reason: "io", message: "disk" }))).toMatchObject({ _tag: "Internal", message: "disk" })
    expect(toRpcError(new ProviderError({ provider: "x", reason: "unknown-provider", message: "m" }))).toMatchObject({ _tag: "InvalidInput", field: "provider", code: ErrorCode.invalidInput })
    expect(toRpcError(new WorkspaceError({ workspace_id: "w", reason: "in-use", message: "m" }))).toMatchObject({ _tag: "Unavailable", code: ErrorCode.unavailable })
    expect(toRpcError(new WorkspaceError({ workspace_id: "w", reason: "has-children", message: "m" }))._tag).toBe("InvalidInput")
    expect(toRpcError(new WorkspaceHistoryError({ workspace_id: "w", reason: "conflict", message: "m" }))).toMatchObject({ _tag: "InvalidInput", field: "turn" })
  })

  it("anything else is Internal, with its message", () => {
    expect(toRpcError({ _tag: "NotFoundError", kind: "agent", id: "a", message: "fake" })._tag).toBe("Internal")
    expect(toRpcError(new Error("boom"))).toMatchObject({ _tag: "Internal", message: "boom", code: ErrorCode.internal })
    expect(toRpcError("text")).toMatchObject({ _tag: "Internal", message: "text" })
  })
})
