// requires: chromium
// The dashboard's views of what ran when, in headless chromium against a real daemon running the
// scripted demo team (lead asks alice and bob; lead's second and third turns read their replies):
//   - the timeline of the tree: one lane per agent, turns as bars whose start/end and order are
//     the team's known order (lead's first turn ends before its children's turns start; lead's
//     last turn starts after both replied), message and tool marks, zoom, a new turn drawn live;
//   - the transcript for people: prompts without the daemon's headers (a raw toggle shows them),
//     the answer to USER once (folded into the turn that said it), tool calls collapsed to one
//     line with the result on demand, search and a kind filter;
//   - one 24 h clock; the Messages list newest first;
//   - usable at 800 px wide: the main columns, header and footer controls do not overlap.
// Screenshots go to the test's temporary directory (kept when SUBSTRAT_KEEP_SCREENSHOTS is set).
import { join } from "node:path"
import type { Page } from "playwright-core"
import { beforeAll, describe, expect, it } from "vitest"
import { waitQuiet } from "../integration/daemon.support.js"
import { request } from "../integration/http.support.js"
import { dashboardSuite } from "./browser.support.js"

const suite = dashboardSuite("substrat-timeline-")
const { home, shots, unix } = suite
let page: Page
beforeAll(() => {
  page = suite.page
})

interface Bar {
  readonly state: string | null
  readonly start: string | null
  readonly end: string | null
  readonly left: number
  readonly width: number
}
const bars = (lane: string): Promise<ReadonlyArray<Bar>> =>
  page.locator(`#timeline .lane[data-name="${lane}"] .turn`).evaluateAll((ns) =>
    ns.map((n) => ({
      state: n.getAttribute("data-state"),
      start: n.getAttribute("data-start"),
      end: n.getAttribute("data-end"),
      left: parseFloat((n as unknown as { style: { left: string } }).style.left),
      width: parseFloat((n as unknown as { style: { width: string } }).style.width)
    })))

interface Box {
  readonly x: number
  readonly y: number
  readonly width: number
  readonly height: number
}
const intersects = (a: Box, b: Box) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height

describe("dashboard: timeline, transcript for people, clock, 800 px", () => {
  it("draws the demo team's turns in their order, live; the transcript says who said what once", async () => {
    expect((await request(unix, "POST", "/v1/agents", { name: "lead", provider: "scripted:demo", instructions: "Lead." })).status).toBe(201)
    const answered = await request(unix, "POST", "/v1/agents/lead/messages", { text: "Plan the project", wait: true })
    expect(answered.status).toBe(200)
    await waitQuiet(home)

    await page.goto(suite.url)
    const lead = page.locator('#tree li[data-name="lead"] > button.agent')
    await lead.waitFor({ timeout: 20_000 })
    await lead.click()
    const transcript = page.locator("#transcript")
    await expect.poll(() => transcript.locator('li[data-event="turn.complete"]').count(), { timeout: 20_000 }).toBe(3)

    // Who said what: the prompt without headers; the raw toggle shows them.
    const firstPrompt = transcript.locator('li[data-event="turn.start"] .text').first()
    expect(await firstPrompt.textContent()).toBe("USER: Plan the project")
    await page.locator("#t-raw").check()
    expect(await firstPrompt.textContent()).toMatch(/^Message from USER \(message [0-9a-f-]{36}, reply expected\):\nPlan the project$/)
    await page.locator("#t-raw").uncheck()
    // The answer to USER once: folded into the turn that said it (no separate message line).
    const final = "Both workers answered; the team is done."
    expect(await transcript.locator(".text", { hasText: final }).count()).toBe(1)
    expect(await transcript.locator('li[data-event="turn.complete"]').last().locator(".meta").textContent()).toMatch(/→ USER$/)
    expect(await transcript.locator('li[data-event="message.enqueued"][data-group="messages"] .text').allTextContents()).not.toContain(final)
    // Tool calls: one line each, the result on demand; no separate result lines.
    const calls = transcript.locator('li[data-event="tool_call.invoked"]')
    expect(await calls.count()).toBe(4)
    expect(await transcript.locator('li[data-event="tool_call.result"]').count()).toBe(0)
    const spawn = calls.first()
    expect(await spawn.locator(".text").textContent()).toMatch(/^spawn_agent\(/)
    expect(await spawn.locator(".result").isVisible()).toBe(false)
    await spawn.locator("summary").click()
    expect(await spawn.locator(".result").isVisible()).toBe(true)
    expect(await spawn.locator(".result").textContent()).toContain('"status": "created"')
    expect(await spawn.locator(".outcome").textContent()).toBe(" → done")
    // One clock: 24 h HH:MM:SS everywhere.
    for (const m of await transcript.locator(".meta").allTextContents()) expect(m).toMatch(/^\d\d:\d\d:\d\d · /)
    for (const m of await page.locator("#flow .meta").allTextContents()) expect(m).toMatch(/^\d\d:\d\d:\d\d $/)
    // Search and filter.
    await page.locator("#t-search").fill("bob")
    const shown = () => transcript.locator("li:not([hidden])")
    expect(await shown().count()).toBeGreaterThan(0)
    for (const t of await shown().allTextContents()) expect(t.toLowerCase()).toContain("bob")
    expect(await page.locator("#t-count").textContent()).toMatch(/^\d+ of \d+$/)
    await page.locator("#t-search").fill("")
    await page.locator("#t-kind").selectOption("tools")
    expect(await shown().evaluateAll((ls) => ls.map((l) => l.getAttribute("data-group")))).toEqual(["tools", "tools", "tools", "tools"])
    await page.locator("#t-kind").selectOption("all")
    await page.screenshot({ path: join(shots, "1-transcript.png") })

    // Messages newest first.
    const flowTs = await page.locator("#flow li").evaluateAll((ls) => ls.map((l) => l.getAttribute("data-ts") ?? ""))
    expect(flowTs.length).toBeGreaterThanOrEqual(6)
    expect([...flowTs].sort().reverse()).toEqual(flowTs)

    // The timeline of the tree.
    await page.locator("#view-timeline").click()
    await expect.poll(() => page.locator("#timeline .lane").evaluateAll((ls) => ls.map((l) => l.getAttribute("data-name"))), { timeout: 20_000 })
      .toEqual(["lead", "alice", "bob"])
    await expect.poll(async () => (await bars("lead")).length, { timeout: 20_000 }).toBe(3)
    const [l1, l2, l3] = await bars("lead")
    const [a1] = await bars("alice")
    const [b1] = await bars("bob")
    for (const b of [l1, l2, l3, a1, b1]) {
      expect(b!.state).toBe("complete")
      expect(b!.end! >= b!.start!).toBe(true)
    }
    // Known order: the children's turns start after lead's first turn ended; lead's second turn
    // reads the first reply, its third starts after both replies.
    expect(a1!.start! >= l1!.end!).toBe(true)
    expect(b1!.start! >= l1!.end!).toBe(true)
    expect(l2!.start! >= (a1!.end! < b1!.end! ? a1!.end! : b1!.end!)).toBe(true)
    expect(l3!.start! >= (a1!.end! > b1!.end! ? a1!.end! : b1!.end!)).toBe(true)
    // Drawn on one time axis: positions follow the times.
    expect(a1!.left).toBeGreaterThanOrEqual(l1!.left + l1!.width - 3.5)
    expect(l3!.left).toBeGreaterThanOrEqual(a1!.left)
    // Marks: lead's tool calls and messages, with what they were on hover.
    expect(await page.locator('#timeline .lane[data-name="lead"] .mark.tool').count()).toBe(4)
    expect(await page.locator('#timeline .lane[data-name="lead"] .mark.message').count()).toBeGreaterThanOrEqual(3)
    expect(await page.locator('#timeline .lane[data-name="alice"] .mark.message').first().getAttribute("title"))
      .toMatch(/^\d\d:\d\d:\d\d lead → alice \(request\): What should we build first\?$/)
    await page.screenshot({ path: join(shots, "2-timeline.png") })

    // Zoom: + doubles the scale.
    const width = () => page.locator('#timeline .lane[data-name="lead"] .track').evaluate((t) => parseFloat((t as unknown as { style: { width: string } }).style.width))
    const before = (await bars("lead"))[2]!.left
    await page.locator("#tl-in").click()
    expect((await bars("lead"))[2]!.left).toBeCloseTo(before * 2, 0)
    expect(await width()).toBeGreaterThan(0)
    await page.locator("#tl-fit").click()

    // Live: a new turn of lead is drawn as it happens.
    expect((await request(unix, "POST", "/v1/agents/lead/messages", { text: "Again", wait: true })).status).toBe(200)
    await expect.poll(async () => (await bars("lead")).length, { timeout: 20_000 }).toBe(4)
    await expect.poll(async () => (await bars("lead"))[3]!.state, { timeout: 20_000 }).toBe("complete")
  }, 180_000)

  it("at 800 px wide the columns and controls do not overlap", async () => {
    await page.setViewportSize({ width: 800, height: 900 })
    await page.locator("#view-transcript").click()
    const boxes = async (selectors: ReadonlyArray<string>) => {
      const out: Array<[string, Box]> = []
      for (const s of selectors) {
        const b = await page.locator(s).boundingBox()
        expect(b, s).not.toBeNull()
        expect(b!.width, s).toBeGreaterThan(0)
        out.push([s, b!])
      }
      return out
    }
    const groups = [
      ["nav", "#detail", "#side"],
      ["header h1", "#daemon", "#inbox-link", "#conn"],
      ["#send-to", "#send-text", "#send-button"],
      ["#t-search", "#t-kind", "#view-transcript", "#view-timeline"]
    ]
    for (const g of groups) {
      const bs = await boxes(g)
      for (let i = 0; i < bs.length; i++) {
        for (let j = i + 1; j < bs.length; j++) expect(intersects(bs[i]![1], bs[j]![1]), `${bs[i]![0]} overlaps ${bs[j]![0]}`).toBe(false)
      }
      for (const [s, b] of bs) expect(b.x + b.width, `${s} inside the window`).toBeLessThanOrEqual(800.5)
    }
    // The transcript's entries stay in the transcript (none drawn over the header).
    const list = (await page.locator("#transcript").boundingBox())!
    for (const b of await page.locator("#transcript > li:not([hidden])").evaluateAll((ls) => ls.slice(0, 12).map((l) => {
      const r = (l as unknown as { getBoundingClientRect: () => Box }).getBoundingClientRect()
      return { x: r.x, y: r.y, width: r.width, height: r.height }
    }))) {
      expect(b.y).toBeGreaterThanOrEqual(list.y - 1)
      expect(b.x).toBeGreaterThanOrEqual(list.x - 1)
    }
    // A tool call is one line.
    expect((await page.locator('#transcript li[data-event="tool_call.invoked"] summary').first().boundingBox())!.height).toBeLessThan(28)
    // The transcript column keeps a usable width.
    expect((await page.locator("#detail").boundingBox())!.width).toBeGreaterThan(400)
    await page.screenshot({ path: join(shots, "3-800px.png"), fullPage: true })
  }, 60_000)
})
