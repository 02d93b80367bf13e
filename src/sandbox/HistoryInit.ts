// Creating a workspace's history repository without running git. `git init`, the config keys and
// the first empty commit took ten git processes per workspace (each a fork of the daemon); the
// files they leave are few and fixed by git's repository format (gitrepository-layout(5)): HEAD,
// config, the objects and refs directories, and two loose objects — the empty tree and a commit of
// it (zlib-deflated "<type> <size>\0<body>", named by its SHA-1). Everything after this (every
// turn, diff, revert) is still done by git itself.
import type * as FileSystem from "@effect/platform/FileSystem"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { deflateSync } from "node:zlib"
import { WorkspaceHistoryError } from "./errors.js"
import type { GitRepo } from "./git.js"

const config = (workTree: string | null) =>
  [
    "[core]",
    "\trepositoryformatversion = 0",
    "\tfilemode = true",
    "\tbare = false",
    "\tlogallrefupdates = true",
    ...(workTree === null ? [] : [`\tworktree = ${workTree}`]),
    "\tpreloadIndex = true",
    "\tuntrackedCache = true",
    "\tautocrlf = false",
    "\tquotePath = false",
    "[index]",
    "\tversion = 4",
    "[gc]",
    "\tautoDetach = true",
    "[user]",
    "\tname = substrat",
    "\temail = substrat@localhost",
    ""
  ].join("\n")

/** A loose object: its id and the deflated bytes stored at objects/<id[0..2]>/<id[2..]>. */
const looseObject = (type: "tree" | "commit", body: Uint8Array) => {
  const raw = Buffer.concat([Buffer.from(`${type} ${body.length}\0`), body])
  return { id: createHash("sha1").update(raw).digest("hex"), bytes: deflateSync(raw) }
}

/**
 * Create the history repository `repo.gitDir` (work tree `repo.workTree`) with an initial empty
 * commit on `master` (none with `empty: false`: the caller fetches a branch into it), so every turn
 * commit has a parent. What `git init`, `git config` and `git commit --allow-empty` would write.
 */
export const initHistory = (
  fs: FileSystem.FileSystem,
  repo: GitRepo,
  workspaceId: string,
  options: { readonly empty?: boolean; readonly now?: Date } = {}
) =>
  Effect.gen(function*() {
    const g = repo.gitDir
    const empty = options.empty !== false
    for (const d of ["", "/objects/info", "/objects/pack", "/refs/heads", "/refs/tags", "/info"]) {
      yield* fs.makeDirectory(`${g}${d}`, { recursive: true })
    }
    yield* fs.writeFileString(`${g}/config`, config(empty ? repo.workTree : null))
    yield* fs.writeFileString(`${g}/HEAD`, "ref: refs/heads/master\n")
    if (!empty) return
    const tree = looseObject("tree", new Uint8Array(0))
    const when = `${Math.floor((options.now ?? new Date()).getTime() / 1000)} +0000`
    const who = `substrat <substrat@localhost> ${when}`
    const commit = looseObject(
      "commit",
      Buffer.from(`tree ${tree.id}\nauthor ${who}\ncommitter ${who}\n\nworkspace ${workspaceId} created\n`)
    )
    for (const o of [tree, commit]) {
      yield* fs.makeDirectory(`${g}/objects/${o.id.slice(0, 2)}`, { recursive: true })
      yield* fs.writeFile(`${g}/objects/${o.id.slice(0, 2)}/${o.id.slice(2)}`, o.bytes)
    }
    yield* fs.writeFileString(`${g}/refs/heads/master`, `${commit.id}\n`)
  }).pipe(
    Effect.mapError((e) => new WorkspaceHistoryError({ workspace_id: workspaceId, reason: "git", message: `creating the history: ${e.message}` }))
  )
