// requires: bwrap, git
// `--bind-ignored <path>` (docs/sandbox.md "Repository workspaces"): one ignored directory of the
// user's repository bound read-only at the same place. Refused, nothing created: a path git does
// not ignore, `..`, an absolute path, a link pointing out, a linked parent, a missing path, a link
// into $SUBSTRAT_HOME, `.git`. Attacks: the sandbox cannot write into the bound directory; a link
// swapped in for it after creation refuses the sandbox's start instead of binding its target.
import { Effect } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { WorkspaceSpec } from "../../src/domain/workspace.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { gitIn, makeForeignRepo } from "../support/foreignRepo.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { identities, makeRuntime, openTraversal, type Runtime, sh } from "./sandbox.support.js"

const idc = identities[0]!
const dir = makeTmpDir("substrat-bind-ignored-")
const home = join(dir, "home")
const repo = join(dir, "repo")
const outside = join(dir, "outside")
let rt: Runtime

beforeAll(() => {
  fs.chmodSync(dir, 0o755)
  makeForeignRepo(repo)
  fs.mkdirSync(join(repo, "lib"))
  fs.writeFileSync(join(repo, "lib", "x.js"), "x\n")
  gitIn(repo, ["add", "-A"])
  gitIn(repo, ["commit", "-q", "-m", "lib"])
  fs.mkdirSync(join(repo, "node_modules", "dep"), { recursive: true })
  fs.writeFileSync(join(repo, "node_modules", "dep", "index.js"), "module.exports = 42\n")
  fs.mkdirSync(join(outside, "node_modules"), { recursive: true })
  fs.writeFileSync(join(outside, "secret.txt"), "outside secret\n")
  fs.mkdirSync(home)
  fs.symlinkSync(outside, join(repo, "out"))
  fs.symlinkSync(outside, join(repo, "linked"))
  fs.symlinkSync(home, join(repo, "home-link"))
  fs.appendFileSync(join(repo, ".git", "info", "exclude"), "out\nlinked\nhome-link\ngone/\n")
  if (idc.needsTraversal) openTraversal(repo)
  rt = makeRuntime(home, idc.identity)
})

afterAll(async () => {
  await rt.dispose()
  removeDir(dir)
})

const create = (bind: string, name: string) =>
  rt.runPromise(
    Effect.flatMap(WorkspaceStore, (s) => s.create({ name, repo: { path: repo, bind_ignored: bind }, ...(idc.owner ? { owner: idc.owner } : {}) })).pipe(
      Effect.either
    )
  )
const workspaces = () => rt.runPromise(Effect.flatMap(WorkspaceStore, (s) => s.list()))
const run = (ws: WorkspaceSpec, script: string) =>
  rt.runPromise(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws, command: sh(script) })).pipe(Effect.either))

describe("--bind-ignored", () => {
  it("refuses a path that is not ignored, escapes the repository, goes through a link, is missing, or is .git; nothing created", async () => {
    const cases: ReadonlyArray<readonly [string, RegExp]> = [
      ["lib", /not ignored by git/],
      ["index.js", /not a directory/],
      [".", /not ignored by git|empty|\./],
      ["../outside", /\.\./],
      [`${outside}/node_modules`, /relative/],
      ["out", /symbolic link/],
      ["linked/node_modules", /symbolic link/],
      ["home-link", /symbolic link/],
      ["gone", /does not exist/],
      [".git", /\.git/],
      ["node_modules/../out", /\.\./]
    ]
    for (const [bind, why] of cases) {
      const r = await create(bind, `bad-${cases.findIndex((c) => c[0] === bind)}`)
      expect(r._tag, bind).toBe("Left")
      if (r._tag === "Left") {
        expect(r.left._tag, bind).toBe("WorkspaceError")
        expect(r.left.message, bind).toMatch(why)
      }
    }
    expect(await workspaces()).toEqual([])
    expect(fs.readdirSync(join(home, "workspaces"))).toEqual([])
    expect(gitIn(repo, ["for-each-ref", "--format=%(refname)", "refs/heads"]).trim()).toBe("refs/heads/main")
  })

  it("binds the ignored directory read-only; writes into it fail; a link swapped in later is refused, not bound", async () => {
    const made = await create("node_modules", "ok")
    expect(made._tag).toBe("Right")
    if (made._tag !== "Right") return
    const ws = made.right
    expect(ws.symlinks.map((s) => [s.host_path, s.mount_path, s.mode])).toEqual([[join(fs.realpathSync(repo), "node_modules"), "node_modules", "ro"]])
    const r = await run(ws, "cat /workspace/node_modules/dep/index.js; echo pwned > /workspace/node_modules/dep/index.js; echo new > /workspace/node_modules/new.txt; rm -rf /workspace/node_modules/dep; git -C /workspace status --porcelain; echo done")
    expect(r._tag).toBe("Right")
    if (r._tag !== "Right") return
    expect(r.right.stdout).toContain("module.exports = 42")
    expect(r.right.stdout).toContain("done")
    // Nothing the sandbox did reached the user's directory, and git in the clone sees no change.
    expect(fs.readFileSync(join(repo, "node_modules", "dep", "index.js"), "utf8")).toBe("module.exports = 42\n")
    expect(fs.existsSync(join(repo, "node_modules", "new.txt"))).toBe(false)
    expect(r.right.stdout.replace(/module\.exports = 42\n/, "").replace(/done\n?/, "").trim()).toBe("")

    // The user's node_modules is swapped for a link to a directory outside the repository.
    fs.renameSync(join(repo, "node_modules"), join(dir, "node_modules.moved"))
    fs.symlinkSync(outside, join(repo, "node_modules"))
    const swapped = await run(ws, "cat /workspace/node_modules/secret.txt")
    expect(swapped._tag).toBe("Left")
    if (swapped._tag === "Left") expect(swapped.left.message).toMatch(/symlink/)
    // Put back: the bind works again.
    fs.rmSync(join(repo, "node_modules"))
    fs.renameSync(join(dir, "node_modules.moved"), join(repo, "node_modules"))
    const again = await run(ws, "cat /workspace/node_modules/dep/index.js")
    expect(again._tag).toBe("Right")
  })
})
