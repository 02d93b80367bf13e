// requires: bwrap, chromium
// Egress in the dashboard (headless Debian chromium, playwright-core), with the REAL Claude Code
// binary sandboxed against the scripted Anthropic endpoint: the agent's Bash tool asks for a host
// its workspace does not allow and downloads past the per-turn byte limit from one it does.
//   - The agent's transcript shows each request as an egress line: the refused host (denied,
//     why) and the allowed one (bytes, time, the rule that allowed it, the limit that ended it).
//   - The refused host's inbox item has Approve and Dismiss; the limit's item has Dismiss only.
//   - Approve from the page: the host joins the workspace's allowlist (read back with the CLI)
//     and the item leaves the list; Dismiss from the page drops the limit's item.
import { describe, expect, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { startFakeRegistry } from "../support/fakeRegistry.js"
import { makeTmpDir } from "../support/tmp.js"
import { launchBrowser } from "./browser.support.js"
import { agentEvents, claudeMeteredHome, claudeMeterEnvKeys, daemonTestScope, dataNamed, withLlm } from "./support.js"

const FILES = "files.substrat-test"
const MIRROR = "mirror.substrat-test"
const envKeys = [...claudeMeterEnvKeys, "SUBSTRAT_EGRESS_TEST_RESOLVE", "SUBSTRAT_EGRESS_BYTES_PER_TURN"] as const
const { ds, homes } = daemonTestScope(envKeys)

const bash = (command: string) => Reply.toolCall("Bash", { command, description: "egress" })

describe("dashboard: egress in headless chromium", () => {
  it("shows an agent's egress lines; approves a refused host and dismisses a reached limit from the inbox", async () => {
    const regDir = makeTmpDir("egd-reg-")
    homes.push(regDir)
    const reg = await startFakeRegistry(regDir, "npm.substrat-test", "pypi.substrat-test")
    process.env["SUBSTRAT_EGRESS_TEST_RESOLVE"] = [FILES, MIRROR].map((n) => `${n}=127.0.0.1`).join(",")
    process.env["SUBSTRAT_EGRESS_BYTES_PER_TURN"] = "50000"
    const fetch = `curl -sS -o /dev/null -w '%{http_code}\\n' http://${FILES}:${reg.port}/blob/7; curl -sS -o /dev/null http://${MIRROR}:${reg.port}/blob/400000; true`
    let browser: Awaited<ReturnType<typeof launchBrowser>>["browser"] | undefined
    try {
      await withLlm([
        { match: { system: "AGENT=coder", lastUser: "Try." }, reply: bash(fetch), label: "try" },
        { match: { system: "AGENT=coder" }, reply: Reply.text("tried"), label: "done" }
      ], async (llm) => {
        const home = claudeMeteredHome(llm, homes, "egd-")
        ds.track(await startDaemon(home, ["--http", "127.0.0.1:0"]))
        const coder = await cliJson<Agent & { workspace_id: string }>(home, [
          "agent", "create", "--provider", "claude", "--name", "coder", "--instructions", "AGENT=coder Work.", "--allow-host", `${MIRROR}:${reg.port}`
        ])
        const { url } = await cliJson<{ url: string }>(home, ["ui", "--no-open"])
        const launched = await launchBrowser(regDir)
        browser = launched.browser
        const page = launched.page
        await page.goto(url)
        await page.locator("#conn.live").waitFor({ timeout: 20_000 })
        await page.locator('#tree li[data-name="coder"] > button.agent').click()

        await cli(home, ["agent", "send", "coder", "Try."])
        // The daemon logged both requests (so a missing line below is the page's, not the log's);
        // a sandboxed claude's turn on a loaded machine can take longer than one quiet spell.
        // (Read from its event log on disk: no CLI process per poll while claude runs.)
        await waitFor("both egress requests in coder's log", () => {
          const seen = dataNamed(agentEvents(home, coder.session_id), "egress.request").map((d) => `${String(d["method"])} ${String(d["host"])}:${String(d["port"])}`)
          return seen.includes(`GET ${FILES}:${reg.port}`) && seen.includes(`GET ${MIRROR}:${reg.port}`) ? true : undefined
        }, 120_000)
        await waitQuiet(home)

        // The transcript: one line per request.
        const line = (host: string) => page.locator(`#transcript li[data-event="egress.request"][data-host="${host}"]`)
        await line(FILES).waitFor({ timeout: 30_000 })
        expect(await line(FILES).getAttribute("data-allowed")).toBe("false")
        expect(await line(FILES).locator(".meta").textContent()).toContain("egress · denied")
        expect(await line(FILES).locator(".text").textContent()).toContain(`GET ${FILES}:${reg.port}`)
        await line(MIRROR).waitFor({ timeout: 30_000 })
        expect(await line(MIRROR).getAttribute("data-allowed")).toBe("true")
        expect(await line(MIRROR).locator(".meta").textContent()).toContain("egress · allowed")
        const mirrorText = (await line(MIRROR).locator(".text").textContent()) ?? ""
        expect(mirrorText).toContain(`GET ${MIRROR}:${reg.port}`)
        expect(mirrorText).toContain("egress.bytesPerTurn")

        // The inbox: the refused host takes Approve or Dismiss, the reached limit Dismiss only.
        const items = page.locator('#inbox-items li[data-kind="egress"]')
        await expect.poll(() => items.count(), { timeout: 20_000 }).toBe(2)
        const hostItem = items.filter({ hasText: `coder asked for ${FILES}:${reg.port}` })
        const limitItem = items.filter({ hasText: "egress.bytesPerTurn" })
        const buttons = (li: typeof items) => li.locator("button").allTextContents()
        expect(await buttons(hostItem)).toEqual(["Approve", "Dismiss"])
        expect(await buttons(limitItem)).toEqual(["Dismiss"])

        // Approve: the host joins the workspace's allowlist; the item leaves the list.
        await hostItem.getByRole("button", { name: "Approve" }).click()
        await expect.poll(() => items.filter({ hasText: FILES }).count(), { timeout: 20_000 }).toBe(0)
        const ws = (await cliJson<{ workspaces: ReadonlyArray<{ id: string; egress: { hosts: ReadonlyArray<string> } }> }>(home, ["workspace", "list"]))
          .workspaces.find((w) => w.id === coder.workspace_id)
        expect(ws?.egress.hosts.slice().sort()).toEqual([`${FILES}:${reg.port}`, `${MIRROR}:${reg.port}`])

        // Dismiss the limit's item: gone from the page and from the daemon's inbox.
        await limitItem.getByRole("button", { name: "Dismiss" }).click()
        await expect.poll(() => items.count(), { timeout: 20_000 }).toBe(0)
        const left = await cliJson<{ items: ReadonlyArray<{ kind: string }> }>(home, ["inbox"])
        expect(left.items.filter((i) => i.kind === "egress")).toEqual([])
      })
    } finally {
      await browser?.close()
      await reg.close()
    }
  }, 180_000)
})
