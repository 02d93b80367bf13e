// Crash recovery's plan (Plan.ts, Requests.ts): one working entry per session directory,
// linked to its parent and children by reference (fields instead of a Map per property: the
// plan runs over 100k sessions).
import type { SessionId } from "../domain/ids.js"
import type { Session } from "../domain/session.js"
import type { SessionLog } from "./Fold.js"

/** Per-session working state (fields instead of a Map per property: 100k sessions). */
export interface Entry {
  readonly id: SessionId
  readonly record: Session | null
  readonly log: SessionLog | null
  /** Sessions whose `agent.created` names this one as parent (valid logs only), in id order. */
  kids: Array<Entry> | undefined
  /** Set when the breadth-first walk reaches this session: the live parent's entry. */
  parent: Entry | null
  candidate: boolean
  live: boolean
  quarantined: boolean
}

/** A session whose log has a valid `agent.created`. */
export type AgentEntry = Entry & { readonly log: SessionLog & { readonly created: NonNullable<SessionLog["created"]> } }
export const isAgent = (e: Entry): e is AgentEntry => e.log !== null && e.log.corrupt === null && e.log.created !== null

export const entry = (id: SessionId, record: Session | null, log: SessionLog | null): Entry => ({
  id,
  record,
  log,
  kids: undefined,
  parent: null,
  candidate: false,
  live: false,
  quarantined: false
})
