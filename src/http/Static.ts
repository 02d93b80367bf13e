// The dashboard's files (src/http/static/: one HTML page, ES modules by view, one stylesheet — no
// framework, no build step; docs/http.md says why), read once at start-up and served from memory.
// Found next to this module when run from src/ (tsx, tests) and from dist/ (the bundle's
// __dirname is dist/, the files stay in src/http/static/).
import { HttpRouter, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import * as fs from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { HttpStartError } from "./Errors.js"

const js = "text/javascript; charset=utf-8"

/** Every file served, by its one path (no directory is served: a path not listed is a 404). */
const assets = {
  "/": { file: "index.html", type: "text/html; charset=utf-8" },
  "/app.js": { file: "app.js", type: js },
  "/lib.js": { file: "lib.js", type: js },
  "/state.js": { file: "state.js", type: js },
  "/tree.js": { file: "tree.js", type: js },
  "/detail.js": { file: "detail.js", type: js },
  "/transcript.js": { file: "transcript.js", type: js },
  "/timeline.js": { file: "timeline.js", type: js },
  "/inbox.js": { file: "inbox.js", type: js },
  "/budgets.js": { file: "budgets.js", type: js },
  "/swarm.js": { file: "swarm.js", type: js },
  "/swarmSource.js": { file: "swarmSource.js", type: js },
  "/feed.js": { file: "feed.js", type: js },
  "/merges.js": { file: "merges.js", type: js },
  "/style.css": { file: "style.css", type: "text/css; charset=utf-8" },
  "/login": { file: "login.html", type: "text/html; charset=utf-8" },
  "/login.js": { file: "login.js", type: js }
} as const

type AssetPath = keyof typeof assets

/** The files, read once. */
export type Files = ReadonlyMap<AssetPath, Uint8Array>

const staticDir = (): string => {
  const here = typeof __dirname === "string" ? __dirname : dirname(fileURLToPath(import.meta.url))
  const candidates = [join(here, "static"), join(here, "..", "src", "http", "static")]
  return candidates.find((d) => fs.existsSync(join(d, "index.html"))) ?? candidates[0]!
}

export const load: Effect.Effect<Files, HttpStartError> = Effect.try({
  try: () => {
    const dir = staticDir()
    return new Map(Object.entries(assets).map(([path, a]) => [path as AssetPath, fs.readFileSync(join(dir, a.file))]))
  },
  catch: (e) => new HttpStartError({ reason: "files", message: `dashboard files missing: ${String(e)}` })
})

const headers = {
  "cache-control": "no-cache",
  "x-content-type-options": "nosniff",
  "content-security-policy": "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
  "referrer-policy": "no-referrer"
}

export const routes = (files: Files): HttpRouter.HttpRouter =>
  (Object.keys(assets) as Array<AssetPath>).reduce(
    (router, path) =>
      HttpRouter.get(router, path, Effect.succeed(HttpServerResponse.uint8Array(files.get(path)!, { contentType: assets[path].type, headers }))),
    HttpRouter.empty
  )
