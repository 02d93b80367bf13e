// requires: chromium
// The dashboard in a real browser: Debian's chromium, headless, driven by playwright-core, against
// a real daemon (`daemon start --http 127.0.0.1:0`) running the scripted demo team. Asserts the
// tree appears and updates live (alice and bob show up after the root's first turn; the root's
// state changes), clicking an agent shows its transcript, a turn's workspace diff renders as a
// diff, sending a message to the root from the page shows the answer, terminate removes an agent.
// Screenshots go to the test's temporary directory (kept when SUBSTRAT_KEEP_SCREENSHOTS is set).
import * as fs from "node:fs"
import { join } from "node:path"
import type { BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cliJson, daemons, startDaemon, waitQuiet } from "../integration/daemon.support.js"
import { request, type Target } from "../integration/http.support.js"
import { makeTmpDir } from "../support/tmp.js"
import { finish, launchBrowser } from "./browser.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-dashboard-")
const home = join(dir, "home")
const shots = join(dir, "screenshots")
const unix: Target = { socketPath: join(home, "http.sock") }
let browser: BrowserContext | undefined
let page: Page
let url = ""

beforeAll(async () => {
  fs.mkdirSync(shots, { recursive: true })
  owned.track(await startDaemon(home, ["--http", "127.0.0.1:0"]))
  url = (await cliJson<{ url: string }>(home, ["ui", "--no-open"])).url
  ;({ browser, page } = await launchBrowser(dir))
}, 120_000)

afterAll(() => finish(browser, owned, dir, shots))

const agentItem = (name: string) => page.locator(`#tree li[data-name="${name}"] > button.agent`)
const stateOf = (name: string) => agentItem(name).locator(".state")

describe("dashboard in headless chromium", () => {
  it("ui prints the TCP URL with a one-time login code in the fragment", () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/login#code=[A-Za-z0-9_-]{20,}$/)
  })

  it("shows the tree live, the transcript of a clicked agent, the answer to a message, a diff; terminates", async () => {
    const lead = await request(unix, "POST", "/v1/agents", { name: "lead", provider: "scripted:demo", instructions: "Lead the team." })
    expect(lead.status).toBe(201)

    await page.goto(url)
    await agentItem("lead").waitFor({ timeout: 20_000 })
    expect(await stateOf("lead").textContent()).toBe("idle")
    expect(await page.locator("#tree li").count()).toBe(1)
    await expect.poll(() => page.locator("#conn").textContent(), { timeout: 20_000 }).toBe("live")
    // The token left the address bar (kept in sessionStorage only).
    expect(page.url()).not.toContain("token")
    // Record every state the page shows for lead from now on (it changes faster than polling).
    // (Page code as a string: the test's TypeScript has no DOM types.)
    await page.evaluate(`(() => {
      const seen = []
      window.leadStates = seen
      new MutationObserver(() => {
        const s = document.querySelector('#tree li[data-name="lead"] > button .state')?.textContent
        if (s && seen[seen.length - 1] !== s) seen.push(s)
      }).observe(document.getElementById("tree"), { childList: true, subtree: true, characterData: true })
    })()`)
    await page.screenshot({ path: join(shots, "1-lead-alone.png") })

    // Send to the root from the page; the answer shows, the children appear live.
    await page.locator("#send-to").selectOption({ label: "lead" })
    await page.locator("#send-text").fill("Plan the project")
    await page.locator("#send-text").press("Enter")
    await expect.poll(() => page.locator("#answer").textContent(), { timeout: 60_000 }).toBe(
      "lead: Both workers answered; the team is done."
    )
    await agentItem("alice").waitFor({ timeout: 30_000 })
    await agentItem("bob").waitFor({ timeout: 30_000 })
    await waitQuiet(home)
    await expect.poll(() => stateOf("lead").textContent(), { timeout: 20_000 }).toBe("idle")
    const states = await page.evaluate<ReadonlyArray<string>>("window.leadStates")
    expect(states.some((s) => s === "busy" || s === "waiting")).toBe(true)
    expect(states.at(-1)).toBe("idle")
    // alice and bob are lead's children in the tree.
    expect(await page.locator('#tree li[data-name="lead"] > ul > li').evaluateAll((ls) => ls.map((l) => l.getAttribute("data-name")).sort()))
      .toEqual(["alice", "bob"])

    // Click alice (keyboard: focus + Enter): her transcript streams in.
    await agentItem("alice").focus()
    await page.keyboard.press("Enter")
    await expect.poll(() => page.locator("#agent-name").textContent()).toBe("alice")
    const transcript = page.locator("#transcript")
    await expect.poll(() => transcript.locator('li[data-event="message.enqueued"] .text').allTextContents(), { timeout: 20_000 })
      .toContain("What should we build first?")
    await expect.poll(() => transcript.locator('li[data-event="turn.complete"] .text').allTextContents(), { timeout: 20_000 })
      .toContain("Build the parser first.")
    expect(await transcript.locator('li[data-event="tool_call.invoked"] .text').allTextContents()).toEqual([
      expect.stringContaining("broadcast(")
    ])
    await page.screenshot({ path: join(shots, "2-alice-transcript.png") })

    // The message flow between agents (the whole daemon's feed), names resolved.
    const flow = () =>
      page.locator("#flow li").evaluateAll((ls) => ls.map((l) => [l.getAttribute("data-from"), l.getAttribute("data-to"), l.getAttribute("data-kind")].join(" ")))
    await expect.poll(flow, { timeout: 20_000 }).toEqual(expect.arrayContaining([
      "USER lead request",
      "lead alice request",
      "alice lead response",
      "lead bob request",
      "bob lead response",
      "alice bob multicast"
    ]))
    expect(await page.locator('#flow li[data-from="lead"][data-to="alice"] .text').textContent()).toBe("What should we build first?")

    // A busy agent shows its elapsed time (ticking) and current step in the tree.
    fs.mkdirSync(join(home, "scripts"), { recursive: true })
    // Its turn is held until the test creates `go`, after it has watched the step tick.
    const go = join(dir, "go")
    fs.writeFileSync(join(home, "scripts", "slow.json"), JSON.stringify({ "*": { steps: [{ text: "slow done", wait_for: go }], after: "silent" } }))
    expect((await request(unix, "POST", "/v1/agents", { name: "slowpoke", provider: "scripted:slow" })).status).toBe(201)
    expect((await request(unix, "POST", "/v1/agents/slowpoke/messages", { text: "take your time", wait: false })).status).toBe(202)
    const step = agentItem("slowpoke").locator(".step")
    await expect.poll(() => step.textContent(), { timeout: 20_000 }).toMatch(/^\d+s · thinking$/)
    const seconds = async () => Number(/^(\d+)s/.exec((await step.textContent()) ?? "")?.[1] ?? -1)
    const first = await seconds()
    await expect.poll(seconds, { timeout: 10_000 }).toBeGreaterThan(first)
    expect(await stateOf("slowpoke").textContent()).toBe("busy")
    await page.screenshot({ path: join(shots, "5-busy-and-flow.png") })
    fs.writeFileSync(go, "")
    await expect.poll(() => stateOf("slowpoke").textContent(), { timeout: 30_000 }).toBe("idle")
    expect(await agentItem("slowpoke").locator(".step").count()).toBe(0)

    // A turn that changed a workspace: its diff renders as a diff.
    const ws = (await request(unix, "POST", "/v1/workspaces", { name: "site" })).json<{ id: string; root_path: string }>()
    const writer = await request(unix, "POST", "/v1/agents", { name: "writer", provider: "scripted", workspace_id: ws.id })
    expect(writer.status).toBe(201)
    fs.writeFileSync(join(ws.root_path, "hello.txt"), "hello from the turn\n")
    const answered = await request(unix, "POST", "/v1/agents/writer/messages", { text: "write it", wait: true })
    expect(answered.status).toBe(200)
    await agentItem("writer").waitFor({ timeout: 20_000 })
    await agentItem("writer").click()
    const diff = transcript.locator('li[data-event="workspace.diff"] .diff')
    await diff.waitFor({ timeout: 20_000 })
    await expect.poll(() => diff.locator(".add").allTextContents(), { timeout: 20_000 }).toContain("+hello from the turn")
    expect(await diff.locator(".file").allTextContents()).toEqual([expect.stringContaining("hello.txt")])
    await page.screenshot({ path: join(shots, "3-writer-diff.png") })

    // Terminate bob from the page: he leaves the live tree (and shows as terminated with "all").
    await agentItem("bob").click()
    await page.locator("#terminate").click()
    await expect.poll(() => page.locator('#tree li[data-name="bob"]').count(), { timeout: 20_000 }).toBe(0)
    const live = (await request(unix, "GET", "/v1/agents")).json<{ agents: ReadonlyArray<{ name: string }> }>().agents
    expect(live.map((a) => a.name).sort()).toEqual(["alice", "lead", "slowpoke", "writer"])
    await page.locator("#show-all").check()
    await expect.poll(() => stateOf("bob").textContent(), { timeout: 20_000 }).toBe("terminated")
    await page.screenshot({ path: join(shots, "4-after-terminate.png") })
    expect(fs.readdirSync(shots).sort()).toEqual([
      "1-lead-alone.png",
      "2-alice-transcript.png",
      "3-writer-diff.png",
      "4-after-terminate.png",
      "5-busy-and-flow.png"
    ])
  }, 240_000)
})
