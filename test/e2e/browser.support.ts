// Headless Debian chromium for the dashboard tests (driven by playwright-core with its
// executablePath: nothing is downloaded), with a fresh profile in the test's temp dir, at 1280×800.
import * as fs from "node:fs"
import { join } from "node:path"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll } from "vitest"
import { cliJson, daemons, startDaemon } from "../integration/daemon.support.js"
import type { Target } from "../integration/http.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

export const chromiumPath = process.env["SUBSTRAT_CHROMIUM"] ?? "/usr/bin/chromium"

export const launchBrowser = async (dir: string): Promise<{ readonly browser: BrowserContext; readonly page: Page }> => {
  // playwright passes the profile as --user-data-dir.
  const browser = await chromium.launchPersistentContext(join(dir, "chromium-profile"), {
    executablePath: chromiumPath,
    viewport: { width: 1280, height: 800 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync"
    ]
  })
  const page = browser.pages()[0] ?? await browser.newPage()
  page.on("dialog", (d) => void d.accept())
  return { browser, page }
}

/** After the tests: close the browser, kill the daemons, drop the temp dir unless SUBSTRAT_KEEP_SCREENSHOTS is set. */
export const finish = async (
  browser: BrowserContext | undefined,
  owned: { readonly killAll: () => Promise<void> },
  dir: string,
  shots: string
): Promise<void> => {
  await browser?.close()
  await owned.killAll()
  if (process.env["SUBSTRAT_KEEP_SCREENSHOTS"] === undefined) removeDir(dir)
  else console.log(`screenshots kept in ${shots}`)
}

/**
 * A dashboard suite's daemon and browser: a daemon with the TCP listener (`--http
 * 127.0.0.1:0`), the `substrat ui` URL and a headless chromium, made before the suite's tests and
 * finished after them. The fields are set once `beforeAll` ran.
 */
export const dashboardSuite = (prefix: string) => {
  const owned = daemons()
  const dir = makeTmpDir(prefix)
  const home = join(dir, "home")
  const shots = join(dir, "screenshots")
  const s = {
    owned,
    dir,
    home,
    shots,
    unix: { socketPath: join(home, "http.sock") } as Target,
    url: "",
    browser: undefined as BrowserContext | undefined,
    page: undefined as unknown as Page
  }
  beforeAll(async () => {
    fs.mkdirSync(shots, { recursive: true })
    owned.track(await startDaemon(home, ["--http", "127.0.0.1:0"]))
    s.url = (await cliJson<{ url: string }>(home, ["ui", "--no-open"])).url
    const b = await launchBrowser(dir)
    s.browser = b.browser
    s.page = b.page
  }, 120_000)
  afterAll(() => finish(s.browser, owned, dir, shots))
  return s
}
