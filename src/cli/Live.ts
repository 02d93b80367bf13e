// Renderings of the live view (`substrat logs`, `agent list -w`): effect-free strings, colours
// only when asked for (a terminal, no NO_COLOR, TERM not dumb).
import { SAME_AS_TURN } from "../protocol/FeedMarks.js"
import type { AgentActivity, FeedItem } from "../protocol/AdminRpcs.js"

export { wantsColor } from "./Help.js"

const palette = [36, 33, 35, 32, 34, 31, 96, 93, 95, 92, 94, 91] as const

/** One colour per agent name, the same in every run. */
export const colourOf = (name: string): number => {
  if (name === "USER" || name === "SYSTEM") return 1
  let h = 0
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0
  return palette[h % palette.length]!
}

export const paint = (text: string, code: number, color: boolean): string => (color ? `\x1b[${code}m${text}\x1b[0m` : text)

const clock = (ts: string) => (ts.length >= 19 ? ts.slice(11, 19) : ts)

/** One line of `substrat logs`: `[12:00:01] alice  → lead: Build the parser first.` (null: nothing for people). */
export const feedText = (item: FeedItem, color: boolean, width = 8): string | null => {
  if (item.kind !== "event" || item.text === null) return null
  return `[${clock(item.ts)}] ${paint(item.agent.padEnd(width), colourOf(item.agent), color)} ${item.text}`
}

const rawClip = (s: string, n = 200): string => {
  const one = s.replace(/\r?\n/g, " ↵ ")
  return one.length <= n ? one : `${one.slice(0, n - 1)}…`
}

/**
 * `logs --raw`: a feed item as the agent read it — a turn's prompt with the daemon's message
 * headers, a message's whole text even when the turn's line above already showed it.
 */
export const rawFeedItem = (item: FeedItem): FeedItem => {
  if (item.kind !== "event" || item.text === null) return item
  const e = item.entry
  if (e.event === "turn.start") return { ...item, text: `▶ turn: ${rawClip(e.data.prompt)}` }
  if (e.event === "message.enqueued" && item.text.endsWith(SAME_AS_TURN)) {
    return { ...item, text: `${item.text.slice(0, -SAME_AS_TURN.length)}${rawClip(e.data.payload)}` }
  }
  return item
}

/** `1m05s`, `12s`, `2h03m`. */
export const elapsed = (ms: number): string => {
  const s = Math.max(0, Math.floor(ms / 1000))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`
}

/** What a busy agent is doing, in one cell: `12s · tool send_message → bob (request)`. */
export const activityText = (a: AgentActivity | undefined, now: number): string =>
  a === undefined ? "" : `${elapsed(now - Date.parse(a.since))} · ${a.step}`
