// Headless Debian chromium for the dashboard tests (driven by playwright-core with its
// executablePath: nothing is downloaded), with a fresh profile in the test's temp dir, at 1280×800.
import { join } from "node:path"
import { type BrowserContext, chromium, type Page } from "playwright-core"
import { removeDir } from "../support/tmp.js"

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
