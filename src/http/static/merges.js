// The merge queues and overlaps of repository workspaces, from the event feed alone (docs/http.md,
// "The dashboard"): which branch children's changes wait in their parent workspace's queue
// (`merge.queued` with no outcome yet), which merged as which commit (`merge.merged`), which were
// refused and why — a conflict and its files, a failing check and its output's end
// (`merge.failed`); overlaps between sibling branch children's pending changes (the paths of each
// branch workspace's recorded turns, `workspace.diff`, since its last merge: the same file changed
// on two branches conflicts or needs a look when both merge), and overlapping turns of two agents
// in one shared workspace (`workspace.overlap`). Outcomes newest first, the last MAX kept.
import { $, api, el, short } from "/lib.js"
import { clock } from "/timeline.js"
import { agents } from "/tree.js"

const MAX = 50
const items = new Map() // item_id → what merge.queued said, then its outcome
const pending = new Map() // workspace id → Set of paths recorded since its last merge
const forkOf = new Map() // branch workspace id → the workspace it merges into
const sharedOverlaps = [] // workspace.overlap events (data + ts)
let listing = null // the workspace list being fetched (fork_of of workspaces no merge event named yet)

const agentOfSession = (s) => agents.find((a) => a.session_id === s)
const agentOfWorkspace = (ws) => {
  for (const it of items.values()) if (it.from === ws) return it.agent
  const a = agents.find((x) => x.workspace_id === ws)
  return a ? a.name : String(ws).slice(0, 8)
}

const learnForks = () => {
  if (listing) return listing
  listing = api("GET", "/v1/workspaces")
    .then((r) => { for (const w of r.workspaces || []) if (w.fork_of) forkOf.set(w.id, w.fork_of) })
    .catch(() => {})
    .finally(() => { listing = null; render() })
  return listing
}

/** One feed event: only the merge queue's and overlap events (and recorded turns) matter here. */
export const onMergeEvent = (e) => {
  const d = e.data
  switch (e.event) {
    case "merge.queued":
      forkOf.set(d.from_workspace, d.workspace_id)
      if (!items.has(d.item_id)) items.set(d.item_id, { item: d.item_id, agent: d.agent, branch: d.branch, from: d.from_workspace, into: d.workspace_id, queued: e.ts, outcome: null })
      break
    case "merge.merged": case "merge.failed": {
      const it = items.get(d.item_id)
      if (!it) return
      it.outcome = e.event === "merge.merged" ? "merged" : d.reason
      it.at = e.ts
      it.paths = d.paths
      if (e.event === "merge.merged") { it.commit = d.commit; it.checked = d.checked; pending.delete(it.from) } else it.output = d.output
      break
    }
    case "workspace.diff": {
      const set = pending.get(d.workspace_id) || new Set()
      for (const p of d.paths) set.add(p.path)
      pending.set(d.workspace_id, set)
      if (!forkOf.has(d.workspace_id)) learnForks()
      break
    }
    case "workspace.overlap":
      sharedOverlaps.push({ ...d, ts: e.ts })
      if (sharedOverlaps.length > MAX) sharedOverlaps.shift()
      break
    default:
      return
  }
  render()
}

/** Pairs of branch workspaces merging into one workspace whose pending paths meet. */
const pendingOverlaps = () => {
  const out = []
  const forks = [...pending.keys()].filter((w) => forkOf.has(w)).sort()
  for (let i = 0; i < forks.length; i++) {
    for (let j = i + 1; j < forks.length; j++) {
      const a = forks[i], b = forks[j]
      if (forkOf.get(a) !== forkOf.get(b)) continue
      const both = [...pending.get(a)].filter((p) => pending.get(b).has(p)).sort()
      if (both.length > 0) out.push({ agents: [agentOfWorkspace(a), agentOfWorkspace(b)].sort(), paths: both })
    }
  }
  return out
}

const render = () => {
  const all = [...items.values()]
  const waiting = all.filter((it) => it.outcome === null).sort((a, b) => (a.queued < b.queued ? -1 : 1))
  $("merge-waiting").replaceChildren(...waiting.map((it) =>
    el("li", { "data-agent": it.agent, "data-item": it.item },
      el("strong", { text: it.agent }), " · " + it.branch + " waits since " + clock(it.queued))))
  const overlaps = [
    ...pendingOverlaps().map((o) =>
      el("li", { "data-kind": "pending", "data-agents": o.agents.join(","), "data-paths": o.paths.join(",") },
        el("strong", { text: o.agents.join(" and ") }), " both change " + o.paths.join(", ") + " (not merged yet)")),
    ...sharedOverlaps.slice().reverse().map((o) => {
      const who = o.turns.map((t) => t.agent)
      return el("li", { "data-kind": "turns", "data-agents": who.join(","), "data-paths": o.paths.join(",") },
        el("span", { class: "meta muted", text: clock(o.ts) + " " }),
        el("strong", { text: who.join(" and ") }), " changed " + o.paths.join(", ") + " in overlapping turns (one workspace)")
    })
  ]
  $("overlaps").replaceChildren(...overlaps)
  const done = all.filter((it) => it.outcome !== null).sort((a, b) => (a.at < b.at ? 1 : -1)).slice(0, MAX)
  $("merge-outcomes").replaceChildren(...done.map((it) => {
    const what = it.outcome === "merged"
      ? " merged as " + it.commit.slice(0, 12) + (it.checked ? " (check passed)" : "") + (it.paths.length > 0 ? ": " + it.paths.join(", ") : "")
      : it.outcome === "conflict"
      ? " refused: conflict in " + it.paths.join(", ")
      : it.outcome === "check"
      ? " refused: the check failed"
      : " not merged: " + short(it.output || "error")
    return el("li", { "data-agent": it.agent, "data-outcome": it.outcome, "data-commit": it.commit || "", "data-paths": (it.paths || []).join(",") },
      el("span", { class: "meta muted", text: clock(it.at) + " " }),
      el("strong", { text: it.agent }), what,
      it.outcome === "check" ? el("pre", { class: "small", text: short(it.output || "") }) : null)
  }))
  // A part with nothing in it is hidden with its heading.
  for (const [id, n] of [["merge-waiting", waiting.length], ["overlaps", overlaps.length], ["merge-outcomes", done.length]]) {
    $(id).hidden = n === 0
    $(id).previousElementSibling.hidden = n === 0
  }
  $("merges-empty").hidden = waiting.length + overlaps.length + done.length > 0
}
