// Requests: the sync requests waiting for their reply, the ones that timed out (a reply still
// comes, marked late) and the reply-timeout timers.
import type { AgentId, MessageId } from "../domain/ids.js"

/** A sync request waiting for its reply. */
export interface PendingRequest {
  readonly id: MessageId
  readonly from: AgentId | "USER"
  readonly to: AgentId
  /** The request's reply timeout, seconds; absent: waits indefinitely. */
  readonly timeout_s?: number | undefined
}
