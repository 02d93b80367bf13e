// requires: chromium
// `substrat ui` signs the browser in with a one-time code, never the bearer token: the opener's
// argv holds `/login#code=…` and no token; a code works once, then 401; a cookie-authenticated
// write from a foreign Origin is 401; the code URL opens the dashboard in chromium with the agent list.
import * as fs from "node:fs"
import { join } from "node:path"
import type { BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cli, cliJson, daemons, startDaemon } from "../integration/daemon.support.js"
import { request, type Target } from "../integration/http.support.js"
import { makeTmpDir } from "../support/tmp.js"
import { finish, launchBrowser } from "./browser.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-ui-login-")
const home = join(dir, "home")
const unix: Target = { socketPath: join(home, "http.sock") }
let tcp: Target
let token = ""
let browser: BrowserContext | undefined
let page: Page

beforeAll(async () => {
  owned.track(await startDaemon(home, ["--http", "127.0.0.1:0"]))
  tcp = { base: fs.readFileSync(join(home, "http.url"), "utf8").trim() }
  token = fs.readFileSync(join(home, "http.token"), "utf8").trim()
  ;({ browser, page } = await launchBrowser(dir))
}, 120_000)

afterAll(() => finish(browser, owned, dir, join(dir, "shots")))

const codeOf = (url: string): string => decodeURIComponent(/#code=([^&]+)$/.exec(url)![1]!)

const exchange = (code: string, headers: Record<string, string> = {}) => request(tcp, "POST", "/login", { code }, headers)

describe("substrat ui login code", () => {
  it("opens /login#code=… with a fake opener; the token is in neither its argv nor the output", async () => {
    const opener = join(dir, "opener.sh")
    const argvFile = join(dir, "opener.argv")
    fs.writeFileSync(opener, `#!/bin/sh\nprintf '%s\\n' "$@" > ${argvFile}.tmp && mv ${argvFile}.tmp ${argvFile}\n`, { mode: 0o755 })
    const saved = { d: process.env["DISPLAY"], o: process.env["SUBSTRAT_OPENER"] }
    process.env["DISPLAY"] = ":99"
    process.env["SUBSTRAT_OPENER"] = opener
    const r = await cli(home, ["ui"]).finally(() => {
      if (saved.d === undefined) delete process.env["DISPLAY"]
      else process.env["DISPLAY"] = saved.d
      if (saved.o === undefined) delete process.env["SUBSTRAT_OPENER"]
      else process.env["SUBSTRAT_OPENER"] = saved.o
    })
    expect(r.code).toBe(0)
    for (let i = 0; i < 200 && !fs.existsSync(argvFile); i++) await new Promise((res) => setTimeout(res, 50))
    const argv = fs.readFileSync(argvFile, "utf8").trim()
    expect(argv).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/login#code=[A-Za-z0-9_-]{20,}$/)
    expect(argv).toBe(r.stdout.trim())
    expect(argv).not.toContain(token)
    expect(r.stdout + r.stderr).not.toContain(token)
    // The opened code is a good one.
    expect((await exchange(codeOf(argv))).status).toBe(204)
  })

  it("a code works once, then 401; an unknown code is 401", async () => {
    const { url } = await cliJson<{ url: string }>(home, ["ui", "--no-open"])
    const first = await exchange(codeOf(url))
    expect(first.status).toBe(204)
    const cookie = String(first.headers["set-cookie"])
    expect(cookie).toMatch(/^substrat_session=[A-Za-z0-9_-]{40,}; HttpOnly; SameSite=Strict; Path=\/$/)
    expect((await exchange(codeOf(url))).status).toBe(401)
    expect((await exchange("not-a-code")).status).toBe(401)
    // Under the same path rules as everything else.
    expect((await request(tcp, "POST", "/login;x", { code: "x" })).status).toBe(400)
  })

  it("the session cookie authorises the API; a cookie write from a foreign Origin is 401, bearer unaffected", async () => {
    const { url } = await cliJson<{ url: string }>(home, ["ui", "--no-open"])
    const ex = await exchange(codeOf(url))
    const cookie = String(ex.headers["set-cookie"]).split(";")[0]!
    expect((await request(tcp, "GET", "/v1/agents")).status).toBe(401)
    expect((await request(tcp, "GET", "/v1/agents", undefined, { cookie })).status).toBe(200)
    expect((await request(tcp, "GET", "/v1/agents", undefined, { cookie: "substrat_session=forged" })).status).toBe(401)
    const body = { name: "x1", provider: "scripted:demo", instructions: "x" }
    const foreign = await request(tcp, "POST", "/v1/agents", body, { cookie, origin: "http://127.0.0.1:1" })
    expect(foreign.status).toBe(401)
    expect((await request(tcp, "GET", "/v1/agents", undefined, { cookie })).json<{ agents: Array<unknown> }>().agents).toHaveLength(0)
    const own = tcp.base!.replace(/\/$/, "")
    expect((await request(tcp, "POST", "/v1/agents", body, { cookie, origin: own })).status).toBe(201)
    const bearer = await request({ ...tcp, token }, "POST", "/v1/agents", { ...body, name: "x2" }, { origin: "http://127.0.0.1:1" })
    expect(bearer.status).toBe(201)
  })

  it("the code URL opens the dashboard in chromium, showing the agent list", async () => {
    expect((await request(unix, "POST", "/v1/agents", { name: "lead", provider: "scripted:demo", instructions: "Lead." })).status).toBe(201)
    const { url } = await cliJson<{ url: string }>(home, ["ui", "--no-open"])
    await page.goto(url)
    await page.locator(`#tree li[data-name="lead"] > button.agent`).waitFor({ timeout: 20_000 })
    expect(new URL(page.url()).pathname).toBe("/")
  })
})
