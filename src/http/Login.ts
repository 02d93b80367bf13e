// The dashboard's login (docs/http.md "The dashboard"): `substrat ui` asks the daemon for a code
// over http.sock (owner only), opens `/login#code=…`, and the page trades the code for a session
// cookie. A code is single-use and short-lived; the bearer token never reaches a command line.
// One owner of the codes and sessions: this store; its Maps are private.
import { randomBytes, timingSafeEqual } from "node:crypto"

/** The session cookie's name. */
export const cookieName = "substrat_session"

/** How long a code lasts, unless the daemon is told otherwise (SUBSTRAT_UI_CODE_TTL_MS, for tests). */
export const defaultCodeTtlMs = 60_000

/** At most this many unused codes are kept; minting more drops the oldest. */
const maxCodes = 64
/** At most this many sessions are kept; a new one past it drops the oldest. */
const maxSessions = 64

export interface Store {
  /** A new code, valid for the TTL and once. */
  readonly mint: () => string
  /** The code's session (a new one), or undefined when the code is unknown, used or expired. */
  readonly exchange: (code: string) => string | undefined
  /** Whether the session is one this daemon gave out. */
  readonly isSession: (session: string) => boolean
}

const same = (a: string, b: string): boolean => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

export const make = (ttlMs: number, now: () => number = Date.now): Store => {
  const codes = new Map<string, number>()
  const sessions = new Set<string>()
  const mint = () => {
    const t = now()
    for (const [c, expires] of codes) if (expires <= t) codes.delete(c)
    while (codes.size >= maxCodes) codes.delete(codes.keys().next().value!)
    const code = randomBytes(24).toString("base64url")
    codes.set(code, t + ttlMs)
    return code
  }
  const exchange = (code: string) => {
    const expires = codes.get(code)
    if (expires === undefined) return undefined
    codes.delete(code)
    if (expires <= now()) return undefined
    while (sessions.size >= maxSessions) sessions.delete(sessions.values().next().value!)
    const session = randomBytes(32).toString("base64url")
    sessions.add(session)
    return session
  }
  const isSession = (session: string) => {
    for (const s of sessions) if (same(s, session)) return true
    return false
  }
  return { mint, exchange, isSession }
}

/** The session cookie of a `Cookie` header, if any. */
export const sessionOf = (cookieHeader: string | undefined): string | undefined => {
  if (cookieHeader === undefined) return undefined
  for (const part of cookieHeader.split(";")) {
    const i = part.indexOf("=")
    if (i > 0 && part.slice(0, i).trim() === cookieName) return part.slice(i + 1).trim()
  }
  return undefined
}
