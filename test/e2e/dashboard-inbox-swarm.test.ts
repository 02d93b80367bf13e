// requires: chromium
// The dashboard's inbox, budget and swarm views in a real browser: Debian's chromium, headless,
// driven by playwright-core, against a real daemon (`daemon start --http 127.0.0.1:0`) with
// scripted agents.
//   - A turn budget smaller than the work: the breach shows in the page's inbox and the tree's
//     budget card says parked; the test raises the budget from the page; the parked message's turn
//     runs (in the agent's event log and in the page's transcript) and the breach leaves the inbox;
//     another spent tree is stopped from the page ("Stop subtree": the agent is terminated).
//   - ask_human: the question shows in the inbox, is answered from the page with the keyboard, and
//     the answer is the agent's next turn's prompt (event log and transcript).
//   - A root's answer to USER is marked read from the page (user.read in its log) and a spawn queued
//     past the tree's caps is cancelled from the page (spawn.failed; the child never starts).
//   - A swarm on a code tree made by the test (over 4,000 nodes): the Swarm view shows it collapsed
//     (a few rows), branches expand with the keyboard, a node triggered from the page shows busy
//     and then idle with its turn in the transcript, a node at work inside a collapsed branch is
//     announced on that branch and in "Active now", a chat from the page gets the node's reply, and a
//     function renamed on disk shows its old node's agent orphaned (its transcript kept) and the new one;
//     undoing the rename shows the node's fresh agent and, beside it, its orphaned old one; a selected
//     node shows its lines of the file, numbered, as text.
// Screenshots go to the test's temporary directory (kept when SUBSTRAT_KEEP_SCREENSHOTS is set).
import * as fs from "node:fs"
import { join } from "node:path"
import type { BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Agent, cliJson, daemons, startDaemon, waitFor } from "../integration/daemon.support.js"
import { request, type Target } from "../integration/http.support.js"
import { makeTmpDir } from "../support/tmp.js"
import { finish, launchBrowser } from "./browser.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-dashboard-inbox-")
const home = join(dir, "home")
const code = join(dir, "code")
const shots = join(dir, "screenshots")
// The swarm nodes the test wakes hold their turn on a gate file (gates/<agent name>) until the page
// has been looked at and clicked while they work; `release` lets that node's turns finish.
const gates = join(dir, "gates")
const release = (agent: string) => fs.writeFileSync(join(gates, agent), "")
const unix: Target = { socketPath: join(home, "http.sock") }
let browser: BrowserContext | undefined
let page: Page
let url = ""

type Entry = { readonly event: string; readonly data: Record<string, unknown> }
const events = (sid: string): ReadonlyArray<Entry> => {
  const file = join(home, "agents", sid, "events.jsonl")
  if (!fs.existsSync(file)) return []
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Entry)
}
const of = (sid: string, name: string) => events(sid).filter((e) => e.event === name).map((e) => e.data)

/** Python sources: app/main.py by hand, then PKGS packages of FILES modules, each a class of METHODS methods and FUNCS functions. */
const PKGS = 10
const FILES = 20
const METHODS = 10
const FUNCS = 10
const writeCode = () => {
  fs.mkdirSync(join(code, "app"), { recursive: true })
  fs.writeFileSync(join(code, "app", "main.py"), [
    "class User:",
    "    def display(self):",
    "        return self.name",
    "",
    "def format_date(d):",
    "    return d.isoformat()  # <b>not bold</b>",
    ""
  ].join("\n"))
  for (let p = 0; p < PKGS; p++) {
    fs.mkdirSync(join(code, `pkg${p}`), { recursive: true })
    for (let f = 0; f < FILES; f++) {
      const lines = [`class Thing${f}:`]
      for (let m = 0; m < METHODS; m++) lines.push(`    def m${m}(self):`, `        return ${m}`)
      for (let g = 0; g < FUNCS; g++) lines.push("", `def f${g}(x):`, `    return x + ${g}`)
      fs.writeFileSync(join(code, `pkg${p}`, `mod${f}.py`), lines.join("\n") + "\n")
    }
  }
}
// Nodes: root + app + app/main.py + User + display + format_date; per package its dir, per file the file, class, methods, functions.
const expectedNodes = 6 + PKGS * (1 + FILES * (2 + METHODS + FUNCS))

beforeAll(async () => {
  fs.mkdirSync(shots, { recursive: true })
  fs.mkdirSync(join(home, "scripts"), { recursive: true })
  // scripted:b — every turn reports usage; "asker" asks the human first. scripted:slow — the swarm's provider: gated turns for the nodes the test wakes, 5 s for any other
  fs.writeFileSync(join(home, "scripts", "b.json"), JSON.stringify({
    "*": { steps: [{ text: "done", usage: { input_tokens: 100, output_tokens: 10, cost_usd: 0.01 } }], after: "repeat-last" },
    boss: {
      steps: [{ tools: ["h1", "h2"].map((name) => ({ tool: "spawn_agent", args: { name, instructions: `You are ${name}.` } })), text: "spawned" }],
      after: "echo"
    },
    asker: {
      steps: [{ tools: [{ tool: "ask_human", args: { question: "Which color?" } }], text: "asked" }, { text: "got: {{prompt}}" }],
      after: "echo"
    }
  }))
  fs.mkdirSync(gates)
  const gated = { steps: [{ text: "slow done", wait_for: join(gates, "{{agent}}") }], after: "repeat-last" }
  fs.writeFileSync(join(home, "scripts", "slow.json"), JSON.stringify({
    "*": { steps: [{ text: "slow done", delay_ms: 5000 }], after: "repeat-last" },
    func_format_date: gated,
    func_f2: gated,
    method_user_display: gated
  }))
  writeCode()
  owned.track(await startDaemon(home, ["--http", "127.0.0.1:0"]))
  url = (await cliJson<{ url: string }>(home, ["ui", "--no-open"])).url
  ;({ browser, page } = await launchBrowser(dir))
  await page.goto(url)
  await page.locator("#conn.live").waitFor({ timeout: 20_000 })
}, 120_000)

afterAll(() => finish(browser, owned, dir, shots))

const agentItem = (name: string) => page.locator(`#tree li[data-name="${name}"] > button.agent`)
const inboxItem = (kind: string) => page.locator(`#inbox-items li[data-kind="${kind}"]`)
const transcriptTexts = (event: string) => page.locator(`#transcript li[data-event="${event}"] .text`).allTextContents()

describe("dashboard: inbox, budgets and the swarm in headless chromium", () => {
  it("shows a budget breach in the inbox; raising the budget from the page resumes the agent", async () => {
    const created = await request(unix, "POST", "/v1/agents", { name: "lead", provider: "scripted:b", budget: { turns: 2 } })
    expect(created.status).toBe(201)
    const lead = created.json<Agent>()
    for (const text of ["one", "two", "three"]) {
      expect((await request(unix, "POST", "/v1/agents/lead/messages", { text, wait: false })).status).toBe(202)
    }

    // The breach: in the inbox (with the daemon's words), on the tree, and on lead's budget card.
    const item = inboxItem("budget")
    await item.waitFor({ timeout: 30_000 })
    expect(await item.locator(".text").textContent()).toContain("turn budget spent")
    expect(await item.locator(".agent-link").textContent()).toBe("lead")
    // (Other kinds may wait too — e.g. lead's replies to USER as unread answers: the count is the list's.)
    // Both read in one tick of the page: answers arriving between two reads would re-render the list.
    const [shownCount, listed] = await page.evaluate<[string | null, number]>(
      `[document.getElementById("inbox-count").textContent, document.querySelectorAll("#inbox-items > li").length]`
    )
    expect(shownCount).toBe(String(listed))
    await expect.poll(() => agentItem("lead").locator(".flag").textContent(), { timeout: 20_000 }).toBe("parked: budget")
    const card = page.locator('#budget-list li[data-name="lead"]')
    await expect.poll(() => card.getAttribute("data-state"), { timeout: 20_000 }).toBe("parked")
    await expect.poll(() => card.locator('tr[data-limit="turns"] td').allTextContents(), { timeout: 20_000 }).toEqual(["2", "2", "0"])
    expect(await card.locator(".reason").textContent()).toContain("turn budget spent")
    // No third turn while parked.
    expect(of(lead.session_id, "turn.start")).toHaveLength(2)
    await page.screenshot({ path: join(shots, "1-budget-breach.png") })

    // Raise it from the inbox item: the form shows the limit in force; 5 turns.
    const turns = item.locator('input[name="turns"]')
    expect(await turns.inputValue()).toBe("2")
    await turns.fill("5")
    await item.getByRole("button", { name: "Raise budget" }).click()
    await waitFor("lead's third turn", () => (of(lead.session_id, "turn.complete").length === 3 ? true : undefined))
    expect(String(of(lead.session_id, "turn.start")[2]!["prompt"])).toContain("three")
    expect(of(lead.session_id, "budget.set").map((d) => d["turns"])).toEqual([2, 5])
    await expect.poll(() => inboxItem("budget").count(), { timeout: 20_000 }).toBe(0)
    await expect.poll(() => card.getAttribute("data-state"), { timeout: 20_000 }).toBe("ok")
    await expect.poll(() => card.locator('tr[data-limit="turns"] td').allTextContents(), { timeout: 20_000 }).toEqual(["5", "3", "2"])
    expect(await agentItem("lead").locator(".flag").count()).toBe(0)
    // The card's own form (opened with the keyboard) shows the limit now in force.
    await card.locator("summary").focus()
    await page.keyboard.press("Enter")
    expect(await card.locator('input[name="turns"]').inputValue()).toBe("5")

    // The page's usage of lead is the daemon's (inspect): tokens with cache, cost.
    const own = (await request(unix, "GET", "/v1/agents/lead/inspect")).json<{ usage: { own: Record<string, number> } }>().usage.own
    const tokens = own["input_tokens"]! + own["output_tokens"]! + (own["cache_read_tokens"] ?? 0) + (own["cache_write_tokens"] ?? 0)
    expect(tokens).toBe(330)
    await expect.poll(() => agentItem("lead").locator(".usage").textContent(), { timeout: 20_000 }).toBe(`${tokens} tok · $${own["cost_usd"]!.toFixed(2)}`)

    // The resumed turn in lead's transcript.
    await agentItem("lead").click()
    await expect.poll(() => transcriptTexts("turn.start"), { timeout: 20_000 }).toEqual([
      expect.stringContaining("one"),
      expect.stringContaining("two"),
      expect.stringContaining("three")
    ])
    await page.screenshot({ path: join(shots, "2-budget-raised.png") })
  }, 120_000)

  it("stops a subtree whose budget is spent from the page", async () => {
    const spender = (await request(unix, "POST", "/v1/agents", { name: "spender", provider: "scripted:b", budget: { turns: 1 } })).json<Agent>()
    for (const text of ["first", "second"]) {
      expect((await request(unix, "POST", "/v1/agents/spender/messages", { text, wait: false })).status).toBe(202)
    }
    const item = page.locator('#inbox-items li[data-kind="budget"]').filter({ has: page.locator(".agent-link", { hasText: "spender" }) })
    await item.waitFor({ timeout: 30_000 })
    await item.getByRole("button", { name: "Stop subtree" }).click() // the confirm dialog is accepted
    await waitFor("spender terminated", () => (of(spender.session_id, "agent.terminated").length === 1 ? true : undefined))
    expect(of(spender.session_id, "turn.start")).toHaveLength(1)
    await expect.poll(() => agentItem("spender").count(), { timeout: 20_000 }).toBe(0)
    await expect.poll(() => inboxItem("budget").count(), { timeout: 20_000 }).toBe(0)
    const live = (await request(unix, "GET", "/v1/agents")).json<{ agents: ReadonlyArray<{ name: string }> }>().agents
    expect(live.map((a) => a.name)).not.toContain("spender")
  }, 120_000)

  it("an ask_human question answered from the page reaches the agent", async () => {
    const asker = (await request(unix, "POST", "/v1/agents", { name: "asker", provider: "scripted:b" })).json<Agent>()
    expect((await request(unix, "POST", "/v1/agents/asker/messages", { text: "start", wait: false })).status).toBe(202)
    const item = inboxItem("question")
    await item.waitFor({ timeout: 30_000 })
    expect(await item.locator(".text").textContent()).toBe("Which color?")
    await expect.poll(() => agentItem("asker").locator(".flag").textContent(), { timeout: 20_000 }).toBe("asks you")
    await page.screenshot({ path: join(shots, "3-question.png") })

    // Keyboard: the header's inbox link moves the focus into the inbox; the answer is typed and sent with Enter.
    await page.locator("#inbox-link").focus()
    await page.keyboard.press("Enter")
    await expect.poll(() => page.evaluate("document.activeElement?.closest('#inbox') !== null")).toBe(true)
    await item.locator('input[type="text"]').focus()
    await page.keyboard.type("blue")
    await page.keyboard.press("Enter")
    await waitFor("the answer's turn", () => (of(asker.session_id, "turn.complete").length >= 2 ? true : undefined))
    expect(of(asker.session_id, "human.answered").map((d) => d["answer"])).toEqual(["blue"])
    const prompt = String(of(asker.session_id, "turn.start")[1]!["prompt"])
    expect(prompt).toContain("Which color?")
    expect(prompt).toContain("blue")
    await expect.poll(() => inboxItem("question").count(), { timeout: 20_000 }).toBe(0)
    // Both read in one tick of the page: answers arriving between two reads would re-render the list.
    const [shownCount, listed] = await page.evaluate<[string | null, number]>(
      `[document.getElementById("inbox-count").textContent, document.querySelectorAll("#inbox-items > li").length]`
    )
    expect(shownCount).toBe(String(listed))

    await agentItem("asker").click()
    await expect.poll(() => transcriptTexts("turn.complete"), { timeout: 20_000 }).toEqual(["asked", expect.stringContaining("blue")])
    await page.screenshot({ path: join(shots, "4-question-answered.png") })
  }, 120_000)

  it("marks an answer to USER read and cancels a spawn queued past the tree's caps from the page", async () => {
    const created = await request(unix, "POST", "/v1/agents", { name: "boss", provider: "scripted:b", caps: { max_children: 1 } })
    expect(created.status).toBe(201)
    const boss = created.json<Agent>()
    expect((await request(unix, "POST", "/v1/agents/boss/messages", { text: "go", wait: false })).status).toBe(202)
    const ofBoss = (kind: string) => inboxItem(kind).filter({ has: page.locator(".agent-link", { hasText: /^boss$/ }) })
    await ofBoss("queued_spawn").waitFor({ timeout: 30_000 })
    expect(await ofBoss("queued_spawn").locator(".text").textContent()).toContain("spawn of h2 waits")
    await ofBoss("answer").waitFor({ timeout: 30_000 })
    expect(await ofBoss("answer").locator(".text").textContent()).toBe("spawned")
    await page.screenshot({ path: join(shots, "4a-answer-and-queued-spawn.png") })

    // Cancel the queued spawn (the confirm dialog is accepted): h2 never starts.
    await ofBoss("queued_spawn").getByRole("button", { name: "Cancel spawn" }).click()
    await waitFor("the spawn dropped", () => (of(boss.session_id, "spawn.failed").length === 1 ? true : undefined))
    await expect.poll(() => ofBoss("queued_spawn").count(), { timeout: 20_000 }).toBe(0)
    // Mark the answer read: user.read in boss's log names it, and it leaves the inbox.
    const answerId = await ofBoss("answer").getAttribute("data-id")
    await ofBoss("answer").getByRole("button", { name: "Mark read" }).click()
    await waitFor("the answer read", () => (of(boss.session_id, "user.read").length === 1 ? true : undefined))
    expect(of(boss.session_id, "user.read")[0]!["message_ids"]).toEqual([answerId])
    await expect.poll(() => ofBoss("answer").count(), { timeout: 20_000 }).toBe(0)
    const live = (await request(unix, "GET", "/v1/agents")).json<{ agents: ReadonlyArray<{ name: string }> }>().agents
    expect(live.map((a) => a.name)).toContain("h1")
    expect(live.map((a) => a.name)).not.toContain("h2")
  }, 120_000)

  it("shows a swarm of 4k+ nodes as the code tree: collapsed, lazily expanded, node states live, transcripts, chat", async () => {
    const started = await request(unix, "POST", "/swarm/start", { path: code, provider: "scripted:slow" })
    expect(started.status).toBe(200)
    expect(started.json<{ nodes: number }>().nodes).toBe(expectedNodes)
    expect(expectedNodes).toBeGreaterThan(4000)

    await page.locator("#tab-swarm").click()
    const row = (node: string) => page.locator(`#swarm-tree li[data-node="${node}"]`)
    const nodeButton = (node: string) => row(node).locator(":scope > .row .node")
    const statusOf = (node: string) => row(node).getAttribute("data-status")
    await row(".#dir").waitFor({ timeout: 30_000 })
    await expect.poll(() => page.locator("#tab-swarm .small").textContent(), { timeout: 20_000 }).toBe(String(expectedNodes))
    // Collapsed below the root: the root and its 11 directories, nothing else in the DOM.
    expect(await page.locator("#swarm-tree li").count()).toBe(1 + 1 + PKGS)
    expect(await row("pkg3#dir").getAttribute("aria-expanded")).toBe("false")
    expect(await nodeButton("pkg3#dir").locator(".count").textContent()).toBe(String(FILES))
    // The agent tree lists the swarm's root, not its thousands of node agents.
    expect(await page.locator("#tab-agents").getAttribute("aria-selected")).toBe("false")
    const treeNames = () => page.locator("#tree li").evaluateAll((ls) => ls.map((l) => l.getAttribute("data-name")))
    await expect.poll(treeNames, { timeout: 20_000 }).toContain("code")
    const names = await treeNames()
    expect(names).not.toContain("func_format_date")
    expect(names.length).toBeLessThan(10)

    // Keyboard: Right expands a directory, Down moves into it, Right again opens the file.
    await nodeButton("app#dir").focus()
    await page.keyboard.press("ArrowRight")
    await row("app/main.py#file").waitFor()
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("ArrowRight")
    await row("app/main.py#function:format_date").waitFor()
    expect(await row("app/main.py#file").locator(":scope > ul > li").evaluateAll((ls) => ls.map((l) => l.getAttribute("data-node"))))
      .toEqual(["app/main.py#class:User", "app/main.py#function:format_date"])
    expect(await page.locator("#swarm-tree li").count()).toBe(1 + 1 + PKGS + 1 + 2)
    expect(await statusOf("app/main.py#function:format_date")).toBe("dormant")

    // Select a dormant node: its place in the code, no transcript yet.
    await nodeButton("app/main.py#function:format_date").click()
    await expect.poll(() => page.locator("#agent-name").textContent()).toBe("func_format_date")
    expect(await page.locator("#agent-state").textContent()).toBe("dormant")
    expect(await page.locator("#dormant-note").isVisible()).toBe(true)
    expect(await page.locator("#node-where").textContent()).toBe("function · app/main.py:5–6 · app/main.py#function:format_date")
    // Its source: the node's lines of the file, numbered, as text (the markup in the comment is not markup).
    const sourceLines = () => page.locator("#node-source .src-line").evaluateAll((ls) =>
      ls.map((l) => [l.querySelector(".ln")?.textContent, l.querySelector(".src")?.textContent]))
    await expect.poll(sourceLines, { timeout: 10_000 }).toEqual([["5", "def format_date(d):"], ["6", "    return d.isoformat()  # <b>not bold</b>"]])
    expect(await page.locator("#node-source-where").textContent()).toBe("app/main.py:5–6")
    expect(await page.locator("#node-source b").count()).toBe(0)
    await page.screenshot({ path: join(shots, "5-swarm-tree.png") })

    // Trigger it from the page: busy in the tree and the head, then idle; the turn in its transcript.
    await page.locator("#node-trigger").click()
    await expect.poll(() => statusOf("app/main.py#function:format_date"), { timeout: 20_000 }).toBe("busy")
    expect(await page.locator("#agent-state").textContent()).toBe("busy")
    expect(await page.locator('#swarm-active li[data-node="app/main.py#function:format_date"]').count()).toBe(1)
    await page.screenshot({ path: join(shots, "6-swarm-busy.png") })
    release("func_format_date")
    await expect.poll(() => statusOf("app/main.py#function:format_date"), { timeout: 30_000 }).toBe("idle")
    await expect.poll(() => transcriptTexts("turn.complete"), { timeout: 20_000 }).toEqual(["slow done"])
    expect(await page.locator("#dormant-note").isVisible()).toBe(false)

    // A node deep in a collapsed branch wakes (triggered over HTTP): its branch says so, "Active now"
    // lists it, and clicking it there reveals and selects it.
    const deep = "pkg3/mod5.py#function:f2"
    expect((await request(unix, "POST", `/swarm/agents/${encodeURIComponent(deep)}/trigger`)).status).toBe(200)
    await expect.poll(() => row("pkg3#dir").locator(":scope > .row .inside").textContent(), { timeout: 20_000 }).toBe("1 at work inside")
    expect(await row(deep).count()).toBe(0)
    await page.locator(`#swarm-active li[data-node="${deep}"] a`).click()
    await row(deep).waitFor()
    expect(await statusOf(deep)).toBe("busy")
    await expect.poll(() => page.locator("#agent-name").textContent()).toBe("func_f2")
    await page.screenshot({ path: join(shots, "7-swarm-deep-busy.png") })
    release("func_f2")
    await expect.poll(() => statusOf(deep), { timeout: 30_000 }).toBe("idle")
    expect(await row("pkg3#dir").locator(":scope > .row .inside").textContent()).toBe("")

    // Chat from the page with a dormant method: it wakes and the reply shows.
    await nodeButton("app/main.py#file").click()
    await row("app/main.py#class:User").locator(":scope > .row .node").click()
    await nodeButton("app/main.py#method:User.display").click()
    await expect.poll(() => page.locator("#agent-name").textContent()).toBe("method_user_display")
    await expect.poll(sourceLines, { timeout: 10_000 }).toEqual([["2", "    def display(self):"], ["3", "        return self.name"]])
    await page.locator("#node-text").fill("what do you do?")
    await page.locator("#node-text").press("Enter")
    release("method_user_display")
    await expect.poll(() => page.locator("#node-reply").textContent(), { timeout: 60_000 }).toBe("method_user_display: slow done")
    await expect.poll(() => transcriptTexts("message.enqueued"), { timeout: 20_000 }).toContain("what do you do?")
    await page.screenshot({ path: join(shots, "8-swarm-chat.png") })

    // Its file is saved with a new body while the node stays selected: the source pane follows.
    const mainPy = join(code, "app", "main.py")
    fs.writeFileSync(mainPy, fs.readFileSync(mainPy, "utf8").replace("        return self.name", "        return self.full_name"))
    await expect.poll(sourceLines, { timeout: 30_000 }).toEqual([["2", "    def display(self):"], ["3", "        return self.full_name"]])
    expect(await page.locator("#agent-name").textContent()).toBe("method_user_display")

    // Find a node by name: Enter reveals the first match (its ancestors expanded) and selects it.
    await page.locator("#swarm-find").fill("class_thing19")
    await expect.poll(() => page.locator("#swarm-found li").count(), { timeout: 10_000 }).toBe(PKGS)
    await page.locator("#swarm-find").press("Enter")
    await row("pkg0/mod19.py#class:Thing19").waitFor()
    await expect.poll(() => page.locator("#agent-name").textContent()).toBe("class_thing19")
    expect(await row("pkg0#dir").getAttribute("aria-expanded")).toBe("true")
    expect(await row("pkg1#dir").getAttribute("aria-expanded")).toBe("false")

    // Rename a function while the swarm runs: the old node's agent shows orphaned, the new node dormant.
    fs.writeFileSync(join(code, "app", "main.py"), fs.readFileSync(join(code, "app", "main.py"), "utf8").replace("def format_date(d):", "def format_day(d):"))
    await row("app/main.py#function:format_day").waitFor({ timeout: 30_000 })
    await expect.poll(() => statusOf("app/main.py#function:format_date"), { timeout: 30_000 }).toBe("orphaned")
    expect(await statusOf("app/main.py#function:format_day")).toBe("dormant")
    await nodeButton("app/main.py#function:format_date").click()
    expect(await page.locator("#node-trigger").isDisabled()).toBe(true)
    await expect.poll(() => transcriptTexts("turn.complete"), { timeout: 20_000 }).toEqual(["slow done"])
    await page.screenshot({ path: join(shots, "9-swarm-orphaned.png") })

    // Undo the rename: format_date's node is back with a fresh (dormant) agent, its old agent stays
    // listed beside it as orphaned, and format_day's agent is orphaned now.
    fs.writeFileSync(join(code, "app", "main.py"), fs.readFileSync(join(code, "app", "main.py"), "utf8").replace("def format_day(d):", "def format_date(d):"))
    await expect.poll(() => statusOf("app/main.py#function:format_day"), { timeout: 30_000 }).toBe("orphaned")
    await expect.poll(() => statusOf("app/main.py#function:format_date"), { timeout: 30_000 }).toBe("dormant")
    const kept = row("app/main.py#file").locator(':scope > ul > li[data-node^="app/main.py#function:format_date (orphaned "]')
    expect(await kept.getAttribute("data-status")).toBe("orphaned")

    expect(fs.readdirSync(shots).sort()).toEqual([
      "1-budget-breach.png",
      "2-budget-raised.png",
      "3-question.png",
      "4-question-answered.png",
      "4a-answer-and-queued-spawn.png",
      "5-swarm-tree.png",
      "6-swarm-busy.png",
      "7-swarm-deep-busy.png",
      "8-swarm-chat.png",
      "9-swarm-orphaned.png"
    ])
  }, 180_000)
})
