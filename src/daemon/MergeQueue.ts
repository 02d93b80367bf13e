// The merge queue of repository workspaces (docs/sandbox.md, "Branch children and the merge
// queue"). A branch child (`spawn_agent(workspace: "branch")`) works in its own clone; its branch
// enters its parent workspace's queue (`merge.queued` in the parent agent's log: the durable
// record) when a turn of it answers its parent's request, or records changes with no request to
// the child open. One item at a time, and only while no agent has a
// turn running in the parent's workspace, the worker, holding the parent's history repository:
//   1. fetches the child's branch from the child's history repository (the daemon's own);
//   2. merges it onto the parent's branch with `git merge-tree` (objects only), or replays the
//      child's commits onto it (`workspaces.mergeMode = "rebase"`) — a conflict stops here, its
//      paths go to the child with the parent's branch put in its clone as `parent/head`;
//   3. runs the workspace's check (`--check`) on the merged tree (src/sandbox/MergeCheck.ts), checked out into a scratch
//      directory, in a sandbox with the workspace's limits and network (timeout
//      `workspaces.mergeCheckTimeoutSeconds`) — a failure sends the output's tail to the child;
//   4. sets `refs/substrat/merge-pending`, moves the branch (compare-and-swap: the commit point),
//      brings the parent's clone to it inside the sandbox (`git reset --keep`), clears the marker
//      and publishes the branch to the user's repository; `merge.merged` is logged and the parent
//      gets a SYSTEM note with the commit and paths.
// While the marker is set no turn is recorded in that workspace (WorkspaceHistory.commitTurn), so
// a kill -9 at any step leaves the branch at the old or the new head; after a restart the open
// items (queued, never merged or failed) are read back from the logs and retried: an item whose
// branch is already in the parent's is finished (clone, publish, event) and reported once; so are
// the children whose changes wait for their answer (`merge.held`).
//
// Over 300 lines because the worker's steps above run in order on one item and share its state, so
// they read top-down in one file.
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Option, Queue, Stream } from "effect"
import { randomUUID } from "node:crypto"
import { Delivery } from "../agent/Delivery.js"
import { Requests } from "../agent/Requests.js"
import { Tree } from "../agent/Tree.js"
import { Turns } from "../agent/Turns.js"
import { makeEvent } from "../domain/events.js"
import type { AgentId, SessionId, WorkspaceId } from "../domain/ids.js"
import type { WorkspaceSpec } from "../domain/workspace.js"
import { fetchParentInto, syncCloneChecked } from "../sandbox/CloneSync.js"
import { Sandbox } from "../sandbox/Sandbox.js"
import { runMergeCheck } from "../sandbox/MergeCheck.js"
import { type HistoryGit, MERGE_PENDING, type Recorded, threeWay, WorkspaceHistory } from "../sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import { EventLog } from "../storage/EventLog.js"
import { DaemonConfig } from "../config/DaemonConfig.js"

export interface QueueItem {
  readonly item_id: string
  readonly workspace_id: WorkspaceId
  readonly from_workspace: WorkspaceId
  readonly branch: string
  readonly agent_id: AgentId
  readonly agent: string
  readonly head: string
  readonly parent_session: SessionId
  readonly parent_agent: AgentId
  readonly queued_at: string
  state: "queued" | "merging"
}

export interface QueueOutcome {
  readonly item_id: string
  readonly agent: string
  readonly branch: string
  readonly outcome: "merged" | "conflict" | "check" | "error"
  readonly commit: string | null
  readonly paths: ReadonlyArray<string>
  readonly at: string
}

type Result =
  | { readonly _tag: "merged"; readonly commit: string; readonly previous: string; readonly ff: boolean; readonly paths: ReadonlyArray<string>; readonly checked: boolean; readonly parentBranch: string }
  | { readonly _tag: "failed"; readonly reason: "conflict" | "check" | "error"; readonly paths: ReadonlyArray<string>; readonly output: string; readonly parentBranch: string; readonly gitDir: string }

/** The paths of `git merge-tree --write-tree --name-only` output after its first line (the tree). */
const conflictPaths = (lines: ReadonlyArray<string>) => [...new Set(lines.slice(1).map((l) => l.trim()).filter((l) => l.length > 0))]

/**
 * Rebase mode: replay the child's own commits (`old`'s merge base with `theirs` up to `theirs`,
 * oldest first, merge commits left out) onto `old`, objects only, each commit keeping its author,
 * date and message (trailers included); a commit that becomes empty is dropped. Each step is a
 * three-way merge of that commit's tree with the current head's, its parent as the base
 * (WorkspaceHistory.threeWay). A conflict stops at once; only unreferenced objects remain.
 */
const replay = (git: HistoryGit, old: string, theirs: string) =>
  Effect.gen(function*() {
    const base = (yield* git(["merge-base", old, theirs])).stdout.trim()
    const list = (yield* git(["rev-list", "--reverse", "--topo-order", "--no-merges", `${base}..${theirs}`])).stdout.split("\n").filter((l) => l.length > 0)
    let head = old
    for (const c of list) {
      const meta = (yield* git(["show", "-s", "--format=%P%x00%T%x00%an%x00%ae%x00%ad", "--date=raw", c])).stdout.split("\0")
      const parent = meta[0]?.trim() ?? ""
      const headTree = (yield* git(["rev-parse", `${head}^{tree}`])).stdout.trim()
      let tree = meta[1] ?? ""
      if (parent !== "") {
        const mt = yield* threeWay(git, parent, headTree, tree)
        if (mt._tag === "conflict") return { _tag: "conflict", commit: c, paths: mt.paths } as const
        tree = mt.tree
      }
      if (tree === headTree) continue
      const message = (yield* git(["cat-file", "commit", c])).stdout.replace(/^[\s\S]*?\n\n/, "")
      head = (yield* git(["commit-tree", tree, "-p", head, "-F", "-"], {
        input: message,
        env: { GIT_AUTHOR_NAME: meta[2] ?? "", GIT_AUTHOR_EMAIL: meta[3] ?? "", GIT_AUTHOR_DATE: (meta[4] ?? "").trim() }
      })).stdout.trim()
    }
    return { _tag: "replayed", head } as const
  })

const queueRef = (item: string) => `refs/substrat/queue/${item}`

export class MergeQueue extends Effect.Service<MergeQueue>()("substrat/MergeQueue", {
  scoped: Effect.gen(function*() {
    const history = yield* WorkspaceHistory
    const store = yield* WorkspaceStore
    const tree = yield* Tree
    const turns = yield* Turns
    const requests = yield* Requests
    const delivery = yield* Delivery
    const log = yield* EventLog
    const executor = yield* CommandExecutor.CommandExecutor
    const fs = yield* FileSystem.FileSystem
    const sandbox = yield* Effect.serviceOption(Sandbox)
    const config = yield* Effect.serviceOption(DaemonConfig)
    const checkTimeout = Option.match(config, { onNone: () => 600, onSome: (c) => c.workspaces.mergeCheckTimeoutSeconds })
    const moveDelay = Option.match(config, { onNone: () => 0, onSome: (c) => c.workspaces.mergeMoveDelayMs })
    const mode = Option.match(config, { onNone: () => "merge" as const, onSome: (c) => c.workspaces.mergeMode })

    const items: Array<QueueItem> = []
    /**
     * Branch children whose recorded changes wait for the child to be done (a request was still
     * open when they were recorded). Durable: `merge.held` in the parent's log, until that child's
     * next `merge.queued` (read back by `recover`).
     */
    const held = new Set<WorkspaceId>()
    const recent = new Map<WorkspaceId, Array<QueueOutcome>>()
    const wake = yield* Queue.sliding<null>(1)

    const tell = (to: AgentId, text: string) =>
      delivery.deliver(delivery.envelope({ sender: "SYSTEM", recipient: to, kind: "notification", text })).pipe(
        Effect.catchAll((e) => Effect.logWarning(`merge queue note to ${to} not delivered: ${e.message}`)),
        Effect.asVoid
      )

    const headOf = (ws: WorkspaceId) =>
      history.exclusive(ws, (_loc, git) => Effect.map(git(["rev-parse", "HEAD"]), (r) => r.stdout.trim()))

    /** Put a branch child's workspace in its parent's queue (one waiting item per child: it takes the latest head). */
    const enqueue = (childWs: WorkspaceId, childAgent: AgentId) =>
      Effect.gen(function*() {
        const loc = yield* history.locationOf(childWs)
        if (loc.fork_of === null || loc.repo === null || loc.prefix !== "") return
        const child = tree.current().get(childAgent)
        if (child === undefined || child.parent_id === null) return
        const parent = tree.current().get(child.parent_id)
        if (parent === undefined) return
        if (items.some((i) => i.from_workspace === childWs && i.state === "queued")) return
        const item: QueueItem = {
          item_id: randomUUID(),
          workspace_id: loc.fork_of,
          from_workspace: childWs,
          branch: loc.repo.branch,
          agent_id: child.id,
          agent: child.name,
          head: yield* headOf(childWs),
          parent_session: parent.session_id,
          parent_agent: parent.id,
          queued_at: new Date().toISOString(),
          state: "queued"
        }
        yield* log.append(parent.session_id, makeEvent("merge.queued", {
          item_id: item.item_id,
          workspace_id: item.workspace_id,
          from_workspace: childWs,
          branch: item.branch,
          agent_id: child.id,
          agent: child.name,
          head: item.head
        }))
        items.push(item)
        yield* wake.offer(null)
      })

    /** Does an agent have a turn running in `ws`? */
    const busy = (ws: WorkspaceId) => turns.runningAgents().some((a) => tree.current().get(a)?.workspace_id === ws)

    /** The workspace's check on `commit` (src/sandbox/MergeCheck.ts). Null: passed; else the output's tail. */
    const runCheck = (spec: WorkspaceSpec, git: HistoryGit, gitDir: string, commit: string, item: string) =>
      spec.check === null
        ? Effect.succeed(null)
        : Option.isNone(sandbox)
        ? Effect.succeed("no sandbox to run the check in")
        : runMergeCheck({ spec, git, gitDir, commit, item, timeoutSeconds: checkTimeout }).pipe(
          Effect.provideService(Sandbox, sandbox.value),
          Effect.provideService(CommandExecutor.CommandExecutor, executor),
          Effect.provideService(FileSystem.FileSystem, fs)
        )

    /** Bring the parent's clone to its branch and clear the marker (after a branch move). */
    const finishMove = (git: HistoryGit, loc: Parameters<typeof syncCloneChecked>[0], publish: Effect.Effect<void>) =>
      Effect.gen(function*() {
        yield* git(["read-tree", "HEAD"])
        const synced = Option.isNone(sandbox) ? true : yield* syncCloneChecked(loc, "files").pipe(Effect.provideService(Sandbox, sandbox.value))
        yield* git(["update-index", "-q", "--refresh"], { okCodes: [0, 1] })
        if (!synced) return false
        yield* git(["update-ref", "-d", MERGE_PENDING])
        yield* publish
        return true
      })

    const mergeOne = (item: QueueItem) =>
      Effect.gen(function*() {
        const childLoc = yield* history.locationOf(item.from_workspace)
        const spec = yield* store.get(item.workspace_id)
        return yield* history.exclusive(item.workspace_id, (loc, git, publish) =>
          Effect.gen(function*() {
            const parentBranch = loc.repo?.branch ?? ""
            const fail = (reason: "conflict" | "check" | "error", paths: ReadonlyArray<string>, output: string): Result => ({ _tag: "failed", reason, paths, output, parentBranch, gitDir: loc.gitDir })
            if (loc.repo === null) return fail("error", [], `workspace ${item.workspace_id} is not a repository workspace`)
            // A move a crash interrupted: finish it first.
            if ((yield* git(["rev-parse", "--verify", "-q", MERGE_PENDING], { okCodes: [0, 1] })).code === 0) {
              if (!(yield* finishMove(git, loc, publish))) return fail("error", [], "the workspace's clone could not be brought to the merged branch (a local change in the way?); retried with the next item")
            }
            const old = (yield* git(["rev-parse", "--verify", `refs/heads/${parentBranch}^{commit}`])).stdout.trim()
            const fetched = yield* git([
              "fetch", "-q", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
              `file://${childLoc.gitDir}`, `+refs/heads/${item.branch}:${queueRef(item.item_id)}`
            ], { okCodes: [0, 1, 128] })
            if (fetched.code !== 0) return fail("error", [], `the branch ${item.branch} could not be read: ${fetched.stderr.trim()}`)
            const theirs = (yield* git(["rev-parse", "--verify", `${queueRef(item.item_id)}^{commit}`])).stdout.trim()
            const isAncestor = (a: string, b: string) => Effect.map(git(["merge-base", "--is-ancestor", a, b], { okCodes: [0, 1] }), (r) => r.code === 0)
            const done = (r: Result) => Effect.as(git(["update-ref", "-d", queueRef(item.item_id)], { okCodes: [0, 1] }), r)
            // Already in (a crash after the move, or nothing new): reported as merged, nothing moves.
            if (yield* isAncestor(theirs, old)) return yield* done({ _tag: "merged", commit: old, previous: old, ff: true, paths: [], checked: false, parentBranch })
            const ff = yield* isAncestor(old, theirs)
            let next = theirs
            if (!ff && mode === "rebase") {
              const r = yield* replay(git, old, theirs)
              if (r._tag === "conflict") return yield* done(fail("conflict", r.paths, `replaying ${r.commit.slice(0, 12)} onto ${parentBranch}`))
              next = r.head
            } else if (!ff) {
              const mt = yield* git(["merge-tree", "--write-tree", "--name-only", "--no-messages", old, theirs], { okCodes: [0, 1] })
              const lines = mt.stdout.split("\n")
              if (mt.code === 1) return yield* done(fail("conflict", conflictPaths(lines), ""))
              const message = `Merge ${item.branch} (${item.agent}) into ${parentBranch}\n\nSubstrat-Workspace: ${item.workspace_id}\nSubstrat-Agent: ${item.agent}\nSubstrat-Merge: ${item.item_id}\n`
              next = (yield* git(["commit-tree", lines[0]!.trim(), "-p", old, "-p", theirs, "-F", "-"], { input: message })).stdout.trim()
            }
            const paths = (yield* git(["diff", "--name-only", "-z", "--no-renames", old, next])).stdout.split("\0").filter((p) => p.length > 0)
            const checkFailed = yield* runCheck(spec, git, loc.gitDir, next, item.item_id)
            if (checkFailed !== null) return yield* done(fail("check", [], checkFailed))
            yield* git(["update-ref", MERGE_PENDING, next])
            const moved = yield* git(["update-ref", "-m", `merge queue: ${item.branch}`, `refs/heads/${parentBranch}`, next, old], { okCodes: [0, 1, 128] })
            if (moved.code !== 0) {
              yield* git(["update-ref", "-d", MERGE_PENDING])
              return yield* done(fail("error", [], `${parentBranch} moved meanwhile: ${moved.stderr.trim()}`))
            }
            if (moveDelay > 0) yield* Effect.sleep(moveDelay)
            yield* finishMove(git, loc, publish)
            return yield* done({ _tag: "merged", commit: next, previous: old, ff, paths, checked: spec.check !== null, parentBranch })
          }))
      })

    const report = (item: QueueItem, r: Result) =>
      Effect.gen(function*() {
        const at = new Date().toISOString()
        const list = recent.get(item.workspace_id) ?? []
        list.push({ item_id: item.item_id, agent: item.agent, branch: item.branch, outcome: r._tag === "merged" ? "merged" : r.reason, commit: r._tag === "merged" ? r.commit : null, paths: r.paths, at })
        recent.set(item.workspace_id, list.slice(-50))
        if (r._tag === "merged") {
          yield* log.append(item.parent_session, makeEvent("merge.merged", {
            item_id: item.item_id,
            workspace_id: item.workspace_id,
            commit: r.commit,
            previous: r.previous,
            fast_forward: r.ff,
            paths: r.paths,
            checked: r.checked,
            queued_ms: Math.max(0, Date.now() - Date.parse(item.queued_at))
          }))
          if (r.paths.length > 0) {
            yield* tell(
              item.parent_agent,
              `Merged ${item.agent}'s branch (${item.branch}) into ${r.parentBranch}: commit ${r.commit.slice(0, 12)}${r.checked ? " (the check passed)" : ""}. Paths: ${r.paths.join(", ")}. Your workspace has these changes now.`
            )
          }
          return
        }
        yield* log.append(item.parent_session, makeEvent("merge.failed", {
          item_id: item.item_id,
          workspace_id: item.workspace_id,
          reason: r.reason,
          paths: r.paths,
          output: r.output
        }))
        if (!tree.current().has(item.agent_id)) return
        if (r.reason === "conflict") {
          const child = yield* store.get(item.from_workspace)
          const err = Option.isNone(sandbox)
            ? "no sandbox"
            : yield* fetchParentInto(child.root_path, { gitDir: r.gitDir, branch: r.parentBranch }).pipe(Effect.provideService(Sandbox, sandbox.value))
          yield* tell(
            item.agent_id,
            `Your branch (${item.branch}) was not merged into ${r.parentBranch}: it conflicts with what was merged there since you started, in ${r.paths.join(", ")}. ` +
              (err === ""
                ? `The parent's branch is in your clone as parent/head: run \`git merge parent/head\`, resolve the conflicts in those files, then \`git add\` them and \`git commit\` (the merge must be committed). Your next recorded turn puts your branch back in the queue.`
                : `Ask your parent how to reconcile them (the parent's branch could not be put in your clone: ${err}).`)
          )
        } else if (r.reason === "check") {
          yield* tell(item.agent_id, `Your branch (${item.branch}) was not merged into ${r.parentBranch}: the check failed. Its output ends with:\n${r.output}\nFix it; your next recorded turn puts your branch back in the queue.`)
        } else {
          yield* tell(item.parent_agent, `The merge of ${item.agent}'s branch (${item.branch}) failed: ${r.output}`)
        }
      }).pipe(Effect.catchAll((e) => Effect.logWarning(`merge queue: outcome of ${item.item_id} not reported: ${e.message}`)))

    const process1 = (item: QueueItem) =>
      Effect.gen(function*() {
        // Only while nobody works in the parent's workspace.
        for (let i = 0; busy(item.workspace_id); i++) yield* Effect.sleep(i < 20 ? 50 : 250)
        item.state = "merging"
        const r = yield* mergeOne(item).pipe(
          Effect.catchAll((e) => Effect.succeed<Result>({ _tag: "failed", reason: "error", paths: [], output: e.message, parentBranch: "", gitDir: "" }))
        )
        yield* report(item, r)
      }).pipe(
        Effect.ensuring(Effect.sync(() => {
          const i = items.indexOf(item)
          if (i >= 0) items.splice(i, 1)
        }))
      )

    // Open items of an earlier daemon run (queued in a live parent's log, never merged or failed),
    // and the outcomes it logged (`workspace queue`'s recent list survives a restart).
    const recover = Effect.gen(function*() {
      const all = yield* store.list()
      const parents = new Set(all.filter((w) => w.fork_of !== null).map((w) => w.fork_of))
      for (const n of tree.current().nodes.values()) {
        if (n.workspace_id === null || !parents.has(n.workspace_id)) continue
        const open = new Map<string, QueueItem>()
        const ended: Array<QueueOutcome & { readonly workspace_id: WorkspaceId }> = []
        const waiting = new Set<WorkspaceId>()
        yield* log.read(n.session_id).pipe(
          Stream.runForEach((e) =>
            Effect.sync(() => {
              if (e.event === "merge.held") {
                waiting.add(e.data.from_workspace)
              } else if (e.event === "merge.queued") {
                const d = e.data
                waiting.delete(d.from_workspace)
                open.set(d.item_id, { ...d, parent_session: n.session_id, parent_agent: n.id, queued_at: e.ts, state: "queued" })
              } else if (e.event === "merge.merged" || e.event === "merge.failed") {
                const q = open.get(e.data.item_id)
                open.delete(e.data.item_id)
                if (q === undefined) return
                ended.push({
                  workspace_id: e.data.workspace_id,
                  item_id: q.item_id,
                  agent: q.agent,
                  branch: q.branch,
                  outcome: e.event === "merge.merged" ? "merged" : e.data.reason,
                  commit: e.event === "merge.merged" ? e.data.commit : null,
                  paths: e.data.paths,
                  at: e.ts
                })
              }
            })
          )
        )
        for (const it of open.values()) items.push(it)
        for (const w of waiting) held.add(w)
        for (const { workspace_id, ...o } of ended) {
          const list = recent.get(workspace_id) ?? []
          if (!list.some((x) => x.item_id === o.item_id)) list.push(o)
          list.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
          recent.set(workspace_id, list.slice(-50))
        }
      }
      if (items.length > 0) yield* wake.offer(null)
    }).pipe(Effect.catchAllCause((c) => Effect.logWarning("merge queue: open items not read back", c)))

    yield* Effect.forkScoped(
      Effect.forever(
        Effect.gen(function*() {
          yield* wake.take
          for (let next = items.find((i) => i.state === "queued"); next !== undefined; next = items.find((i) => i.state === "queued")) {
            yield* process1(next).pipe(Effect.catchAllCause((c) => Effect.logWarning("merge queue: an item failed", c)))
          }
        })
      )
    )


    /**
     * A branch child's turn ended (called for every turn, while it still counts as running: its
     * reply is not sent yet). Its branch enters the queue when the turn answers its parent's
     * request, or when it recorded changes and no request to the child is open.
     */
    const turnEnded = (r: Recorded, childAgent: AgentId) =>
      Effect.gen(function*() {
        const child = tree.current().get(childAgent)
        if (child === undefined || child.parent_id === null) return
        const trigger = turns.triggerOf(childAgent)
        const answering = trigger?._tag === "message" && requests.awaitsReply(trigger.id, childAgent) ? trigger.id : null
        const answersParent = answering !== null && requests.find(answering)?.request.from === child.parent_id
        const open = requests.addressedTo(childAgent).filter((q) => q.id !== answering)
        const changed = r.commit !== null
        if (!(answersParent ? changed || held.has(r.workspace) : changed && open.length === 0)) {
          if (!changed || held.has(r.workspace)) return
          const loc = yield* history.locationOf(r.workspace)
          const parent = tree.current().get(child.parent_id)
          if (loc.fork_of === null || parent === undefined) return
          // Logged before the turn's reply goes out: a kill -9 after it keeps the changes waiting.
          yield* log.append(parent.session_id, makeEvent("merge.held", {
            workspace_id: loc.fork_of,
            from_workspace: r.workspace,
            agent_id: child.id,
            agent: child.name
          }))
          held.add(r.workspace)
          return
        }
        held.delete(r.workspace)
        yield* enqueue(r.workspace, childAgent)
      })

    yield* history.onRecorded((r) =>
      r.agentId === null
        ? Effect.void
        : turnEnded(r, r.agentId).pipe(Effect.catchAllCause((c) => Effect.logWarning(`merge queue: ${r.workspace} not queued`, c))), { everyTurn: true })

    /** What waits in `ws`'s queue (the one merging first) and its recent outcomes (read back from the logs at start-up). */
    const view = (ws: WorkspaceId) => ({
      items: items.filter((i) => i.workspace_id === ws).map(({ parent_session: _s, parent_agent: _a, ...rest }) => ({ ...rest })),
      recent: [...(recent.get(ws) ?? [])].reverse()
    })

    /** After start-up recovery (the tree is back): read the open items back and go on. */
    const resume = recover

    return { view, resume } as const
  })
}) {}


