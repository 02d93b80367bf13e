// A position in the daemon's event stream: for each session, the last line of its events.jsonl
// already seen (1-based; a session not named is at 0). Line numbers are stable across daemon
// restarts (the log is append-only), so a cursor resumes a stream without loss or repeat.
// Text form (SSE `id:`, `substrat logs --since`): `<key>:<line>` joined by commas, the key being the
// first 16 hex digits of the session id (64 random bits: unique in one home in practice).
// Pure: no Effect requirements.

/** The 16-hex-digit key of a session id in a cursor. */
export const keyOf = (session: string): string => session.replace(/-/g, "").slice(0, 16).toLowerCase()

export type Cursor = ReadonlyMap<string, number>

export const empty: Cursor = new Map()

/** Text form of a cursor (sessions at line 0 left out). */
export const encode = (cursor: Cursor): string => {
  const parts: Array<string> = []
  for (const [k, n] of cursor) if (n > 0) parts.push(`${k}:${n}`)
  return parts.join(",")
}

/** Parse the text form; undefined when it is not one (the caller says so to its client). */
export const decode = (text: string): Cursor | undefined => {
  const out = new Map<string, number>()
  const trimmed = text.trim()
  if (trimmed === "") return out
  for (const part of trimmed.split(",")) {
    const m = /^([0-9a-fA-F]{16}):(\d{1,12})$/.exec(part.trim())
    if (m === null) return undefined
    out.set(m[1]!.toLowerCase(), Number(m[2]))
  }
  return out
}

/** The line already seen of a session. */
export const lineOf = (cursor: Cursor, session: string): number => cursor.get(keyOf(session)) ?? 0
