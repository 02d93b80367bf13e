// The one mapping of service errors to the admin protocol's wire errors (src/protocol/WireErrors.ts):
// each typed error lands on its wire error and code (docs/protocol.md, "Errors"); a value that only
// looks like a service error, or any other failure, is Internal.
import { describe, expect, it } from "vitest"
import { Schema } from "effect"
import { wireError } from "../../src/http/Errors.js"
import { toRpcError } from "../../src/protocol/WireErrors.js"
import { ErrorCode, RpcError } from "../../src/protocol/AdminRpcs.js"
import { DurableError, EventLogError, NotFoundError, ProviderError, SessionStoreError, storageFault } from "../../src/domain/errors.js"
import { durableError } from "../../src/storage/internal/durableNode.js"
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

  it("a storage fault set where the failure happened is Unavailable; the words of a message decide nothing", () => {
    const full = new EventLogError({ reason: "io", file: "f", fault: "disk_full", message: "write: no space" })
    expect(toRpcError(full)).toMatchObject({ _tag: "Unavailable", code: ErrorCode.unavailable })
    expect(toRpcError(full).message).toMatch(/nothing was acknowledged/)
    expect(toRpcError(new SessionStoreError({ session_id: "s", reason: "io", fault: "read_only", message: "m" }))._tag).toBe("Unavailable")
    // A message that merely mentions an errno name is not a storage fault.
    expect(toRpcError(new DurableError({ op: "write", path: "p", message: "ENOSPC mentioned by a path" }))._tag).toBe("Internal")
  })

  it("the fault comes from the errno code of the failed call", () => {
    const err = (code: string) => Object.assign(new Error(`${code}: something`), { code })
    expect([storageFault(err("ENOSPC")), storageFault(err("EDQUOT")), storageFault(err("EIO")), storageFault(err("EROFS"))]).toEqual(["disk_full", "disk_full", "io", "read_only"])
    expect(storageFault(err("ENOENT"))).toBeUndefined()
    expect(storageFault(new Error("ENOSPC in the words only"))).toBeUndefined()
    expect(durableError("write", "/x", err("ENOSPC"))).toMatchObject({ fault: "disk_full" })
    expect(durableError("write", "/x", err("EACCES")).fault).toBeUndefined()
  })

  it("a refusal carries the service's reason, on the socket's wire and over HTTP, so clients decide on it and not on words", () => {
    const inUse = toRpcError(new WorkspaceError({ workspace_id: "w", reason: "in-use", message: "m" }))
    expect(inUse).toMatchObject({ _tag: "Unavailable", reason: "in-use" })
    expect(toRpcError(new WorkspaceError({ workspace_id: "w", reason: "has-children", message: "m" }))).toMatchObject({ _tag: "InvalidInput", reason: "has-children" })
    expect(toRpcError(new ProviderError({ provider: "codex", reason: "missing-binary", message: "m" }))).toMatchObject({ reason: "missing-binary" })
    expect(toRpcError(new EventLogError({ reason: "io", file: "f", fault: "disk_full", message: "m" }))).toMatchObject({ _tag: "Unavailable", reason: "disk_full" })
    expect(Schema.encodeSync(RpcError)(inUse)).toMatchObject({ _tag: "Unavailable", reason: "in-use" })
    // HTTP cuts a long message and keeps the reason.
    const long = wireError(new WorkspaceError({ workspace_id: "w", reason: "in-use", message: "x".repeat(1000) }))
    expect(long).toMatchObject({ _tag: "Unavailable", reason: "in-use" })
    expect(long.message.length).toBeLessThan(400)
    // Errors without one say nothing.
    expect(toRpcError(new NotFoundError({ kind: "turn", id: "t", message: "m" }))).not.toHaveProperty("reason")
  })
})
