#!/usr/bin/env node
// Placeholder launcher until the CLI lands (issue: Daemon and CLI).
import { readFileSync } from "node:fs"
const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"))
const args = process.argv.slice(2)
if (args.includes("--version")) {
  console.log(pkg.version)
} else {
  console.log(`substrat ${pkg.version} — durable, sandboxed trees of LLM coding agents.\n\nThe CLI is not built yet. Usage: substrat --help | --version`)
}
