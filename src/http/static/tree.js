// The agent tree (left pane, Agents tab): every agent but swarm node agents, with its state, its
// current step, its usage (and its subtree's) and the inbox's flags (parked, asks you). The agent
// list (GET /v1/agents?all=1) is refetched after feed events, throttled (`refresh`).
import { selected, select } from "/detail.js"
import { labelFlow } from "/feed.js"
import { parkedFlags } from "/inbox.js"
import { $, api, el, elapsed } from "/lib.js"
import { busySince, fmtUsage, isSwarmNode, names, shownSessions, startedLive, stateOf, steps, subtreeUsage, usage } from "/state.js"
import { swarmByAgent, swarmNodes } from "/swarm.js"

/** The last agent list (GET /v1/agents?all=1). */
export let agents = []
/** How many list fetches have begun (state.js's startedLive). */
export let fetchGen = 0

export const renderTree = () => {
  const showAll = $("show-all").checked
  const childrenOf = new Map()
  for (const a of agents) {
    if (a.parent_id === null) continue
    if (!childrenOf.has(a.parent_id)) childrenOf.set(a.parent_id, [])
    childrenOf.get(a.parent_id).push(a)
  }
  const visible = agents.filter((a) => (showAll || a.state !== "terminated") && !isSwarmNode(a))
  shownSessions.clear()
  for (const a of visible) shownSessions.add(a.session_id)
  const flags = parkedFlags(childrenOf)
  const ids = new Set(visible.map((a) => a.id))
  const byParent = new Map()
  for (const a of visible) {
    const p = a.parent_id !== null && ids.has(a.parent_id) ? a.parent_id : null
    if (!byParent.has(p)) byParent.set(p, [])
    byParent.get(p).push(a)
  }
  const branch = (parent) =>
    (byParent.get(parent) || []).map((a) => {
      const since = busySince.get(a.session_id)
      const state = stateOf(a)
      const step = state === "busy" || state === "waiting"
        ? [since ? elapsed(since) : "", steps.get(a.session_id) || ""].filter(Boolean).join(" · ")
        : ""
      const kids = byParent.get(a.id)
      const sub = kids ? subtreeUsage(a, childrenOf) : null
      const own = usage.get(a.session_id)
      const nodes = a.role === "swarm-dir" && a.parent_id === null ? swarmNodes.size : 0
      const flag = flags.get(a.id)
      return el("li", { role: "treeitem", "data-name": a.name, "data-id": a.id },
        el("button", { class: "agent", type: "button", "aria-selected": String(selected === a.id), onclick: () => select(a.id) },
          el("span", { class: "name", text: a.name }),
          el("span", { class: "state state-" + state, text: state }),
          flag ? el("span", { class: "flag flag-" + flag.kind, text: flag.text }) : null,
          step ? el("span", { class: "step", text: step }) : null,
          nodes > 0 ? el("span", { class: "step", text: "swarm root · " + nodes + " code nodes (Swarm tab)" }) : null,
          own || sub ? el("span", { class: "usage", text: fmtUsage(own) + (sub && sub.in + sub.out + sub.cache > 0 ? " (subtree " + fmtUsage(sub) + ")" : "") }) : null),
        kids ? el("ul", { role: "group" }, ...branch(a.id)) : null)
    })
  $("tree").replaceChildren(...branch(null))
  $("empty").hidden = visible.length > 0
  const roots = agents.filter((a) => a.parent_id === null && a.state !== "terminated")
  const to = $("send-to")
  const keep = to.value
  to.replaceChildren(...roots.map((r) => el("option", { value: r.id, text: r.name })))
  if (roots.some((r) => r.id === keep)) to.value = keep
  const cur = agents.find((a) => a.id === selected)
  if (cur) {
    const node = swarmByAgent.get(cur.id)
    const state = node ? node.status : cur.state
    $("agent-state").textContent = state
    $("agent-state").className = "badge state-" + state
    $("terminate").hidden = cur.state === "terminated" || node !== undefined // node agents belong to the swarm
    $("agent-usage").textContent = fmtUsage(usage.get(cur.session_id))
  }
}

// The agent list is refetched after events, at most every `refreshDelay` ms: 80 ms, or four times
// what the last fetch took (a swarm of thousands of node agents makes the list megabytes).
let refreshTimer = null
let refreshDelay = 80
export const refresh = () => {
  if (refreshTimer !== null) return
  refreshTimer = setTimeout(async () => {
    refreshTimer = null
    const t0 = performance.now()
    const gen = ++fetchGen
    try {
      agents = (await api("GET", "/v1/agents?all=1")).agents
      for (const [s, at] of startedLive) if (at < gen) startedLive.delete(s)
      refreshDelay = Math.min(2000, Math.max(80, 4 * (performance.now() - t0)))
      for (const a of agents) names.set(a.id, a.name)
      renderTree()
      for (const li of $("flow").children) labelFlow(li)
    } catch (e) {
      $("conn").textContent = "error: " + e.message
    }
  }, refreshDelay)
}

// Arrow keys move between agents; Enter/Space select (buttons do that natively).
$("tree").addEventListener("keydown", (ev) => {
  if (ev.key !== "ArrowDown" && ev.key !== "ArrowUp") return
  const all = [...document.querySelectorAll("#tree .agent")]
  const i = all.indexOf(document.activeElement)
  const next = all[Math.max(0, Math.min(all.length - 1, i + (ev.key === "ArrowDown" ? 1 : -1)))]
  if (next) { next.focus(); ev.preventDefault() }
})
$("show-all").addEventListener("change", renderTree)
