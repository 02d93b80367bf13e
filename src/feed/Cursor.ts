// A position in the daemon's event stream: the global position of the last entry already seen
// (src/storage/EventIndex.ts: the n-th entry the daemon indexed; 0 = nothing seen). Positions are
// kept in `events.index`, so a cursor resumes a stream without loss or repeat across restarts.
// Text form (SSE `id:`): the decimal number — a few bytes however many sessions there are.
// Pure: no Effect requirements.

export type Cursor = number

export const empty: Cursor = 0

export const encode = (cursor: Cursor): string => String(cursor)

/** Parse the text form; undefined when it is not one (the caller says so to its client). */
export const decode = (text: string): Cursor | undefined => {
  const trimmed = text.trim()
  if (trimmed === "") return empty
  return /^\d{1,15}$/.test(trimmed) ? Number(trimmed) : undefined
}
