import { describe, expect, it } from "vitest"
import * as Login from "../../src/http/Login.js"

describe("Login store", () => {
  it("a code is good once, within its TTL only", () => {
    let now = 1_000
    const store = Login.make(60_000, () => now)
    const a = store.mint()
    const s = store.exchange(a)
    expect(s).toBeDefined()
    expect(store.isSession(s!)).toBe(true)
    expect(store.exchange(a)).toBeUndefined()
    const b = store.mint()
    now += 60_000
    expect(store.exchange(b)).toBeUndefined()
    expect(store.exchange("unknown")).toBeUndefined()
    expect(store.isSession("forged")).toBe(false)
  })

  it("reads the session cookie out of a Cookie header", () => {
    expect(Login.sessionOf("a=1; substrat_session=xyz; b=2")).toBe("xyz")
    expect(Login.sessionOf("a=1")).toBeUndefined()
    expect(Login.sessionOf(undefined)).toBeUndefined()
  })
})
