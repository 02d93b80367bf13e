// A git repository nobody here wrote: the sources of the `ms` package from node_modules, committed
// in three steps into a temp directory (main branch), plus an ignored node_modules/ and a
// .gitignore. For the repository-workspace tests.
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"

const pkg = join(process.cwd(), "node_modules", "ms")

export const gitIn = (dir: string, args: ReadonlyArray<string>, input?: string): string =>
  execFileSync("git", ["-C", dir, ...args], {
    encoding: "utf8",
    // git's stderr goes into the error a failing call throws, not into the suite's output.
    stdio: ["pipe", "pipe", "pipe"],
    ...(input === undefined ? {} : { input }),
    env: {
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: dir,
      GIT_CONFIG_NOSYSTEM: "1",
      // A clone's files may belong to the sandbox uid (a root daemon's agents run unprivileged).
      GIT_CONFIG_PARAMETERS: "'safe.directory'='*'",
      GIT_AUTHOR_NAME: "Maintainer",
      GIT_AUTHOR_EMAIL: "maintainer@example.org",
      GIT_COMMITTER_NAME: "Maintainer",
      GIT_COMMITTER_EMAIL: "maintainer@example.org"
    }
  })

/** Make the repository at `dir` (created). Returns its HEAD commit. */
export const makeForeignRepo = (dir: string): string => {
  fs.mkdirSync(dir, { recursive: true })
  gitIn(dir, ["init", "-q", "-b", "main"])
  gitIn(dir, ["config", "user.name", "Maintainer"])
  gitIn(dir, ["config", "user.email", "maintainer@example.org"])
  fs.copyFileSync(join(pkg, "package.json"), join(dir, "package.json"))
  fs.writeFileSync(join(dir, ".gitignore"), "node_modules/\n")
  gitIn(dir, ["add", "-A"])
  gitIn(dir, ["commit", "-q", "-m", "package.json"])
  fs.copyFileSync(join(pkg, "index.js"), join(dir, "index.js"))
  gitIn(dir, ["add", "-A"])
  gitIn(dir, ["commit", "-q", "-m", "index.js"])
  fs.copyFileSync(join(pkg, "readme.md"), join(dir, "readme.md"))
  fs.copyFileSync(join(pkg, "license.md"), join(dir, "license.md"))
  gitIn(dir, ["add", "-A"])
  gitIn(dir, ["commit", "-q", "-m", "docs"])
  fs.mkdirSync(join(dir, "node_modules", "dep"), { recursive: true })
  fs.writeFileSync(join(dir, "node_modules", "dep", "index.js"), "module.exports = 1\n")
  return gitIn(dir, ["rev-parse", "HEAD"]).trim()
}

/** Everything that says the user's checkout is untouched: HEAD, index, status, config, hooks. */
export const userState = (dir: string) => ({
  head: gitIn(dir, ["rev-parse", "HEAD"]).trim(),
  symbolic: gitIn(dir, ["symbolic-ref", "HEAD"]).trim(),
  status: gitIn(dir, ["status", "--porcelain", "--ignored"]),
  index: fs.readFileSync(join(dir, ".git", "index")).toString("base64"),
  config: fs.readFileSync(join(dir, ".git", "config"), "utf8"),
  hooks: fs.readdirSync(join(dir, ".git", "hooks")).sort(),
  branches: gitIn(dir, ["for-each-ref", "--format=%(refname)", "refs/heads"]).split("\n").filter((l) => l !== "")
})
