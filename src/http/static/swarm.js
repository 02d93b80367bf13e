// The swarm as the code tree (Swarm tab; GET /swarm, /swarm/agents; POST /swarm/agents/{id}/chat|trigger)
//
// Thousands of nodes: the list is fetched once (and again when the swarm's counts change), the
// tree is collapsed below the root and a branch's rows are made only when it is expanded. State
// changes come from the daemon's event feed (turns of the node agents' sessions) and a refetch of
// the non-dormant nodes; they touch only the rows that exist. Selecting a node selects its agent
// (detail.js) and shows the node bar (chat, trigger) and the node's source lines.
// Over 300 lines because the tree, the find box and the node bar share the selection and the
// swarm's state kept here; each is a short group of functions below (the source pane: swarmSource.js).
import { select, selected } from "/detail.js"
import { $, api, el } from "/lib.js"
import { refreshSource, showSource } from "/swarmSource.js"
import { renderTree } from "/tree.js"

let swarm = null // GET /swarm's status, or null
export const swarmNodes = new Map() // node id → SwarmAgent view (with status)
const swarmKids = new Map() // node id | null → child node ids, in discovery order
export const swarmByAgent = new Map() // agent id → view
const swarmBySession = new Map() // session id → view
const expanded = new Set()
const autoOpened = new Set() // roots expanded once when first seen (the user may collapse them)
const swarmRows = new Map() // node id → rendered <li>
const activeNodes = new Set() // ids of the nodes whose agents are busy or waiting
let swarmSelected = null
const activeStates = new Set(["busy", "waiting"])

const nodeLabel = (n) => (n.kind === "dir" || n.kind === "file" ? (n.path === "." ? swarm?.name || "." : n.path.split("/").pop()) : n.symbol.split(".").pop())
const kindMark = { dir: "dir", file: "file", class: "class", function: "fn", method: "method" }

/**
 * Index the node list. Rows are keyed by node id; an orphaned agent whose node id came back (an
 * undone rename: the live node has a fresh agent) is kept beside it under a key of its own.
 */
const setSwarmNodes = (list) => {
  swarmNodes.clear(); swarmKids.clear(); swarmByAgent.clear(); swarmBySession.clear()
  activeNodes.clear()
  const keyed = []
  for (const n of list) if (n.status !== "orphaned") keyed.push([n.node_id, n])
  const live = new Set(keyed.map(([k]) => k))
  for (const n of list) if (n.status === "orphaned") keyed.push([live.has(n.node_id) ? n.node_id + " (orphaned " + n.agent_id.slice(0, 8) + ")" : n.node_id, n])
  for (const [key, n] of keyed) {
    n.key = key
    swarmNodes.set(key, n)
    if (activeStates.has(n.status)) activeNodes.add(key)
  }
  for (const [key, n] of keyed) {
    const p = n.parent !== null && swarmNodes.has(n.parent) ? n.parent : null
    if (!swarmKids.has(p)) swarmKids.set(p, [])
    swarmKids.get(p).push(key)
    swarmByAgent.set(n.agent_id, n)
    swarmBySession.set(n.session_id, n)
  }
  for (const r of swarmKids.get(null) || []) if (!autoOpened.has(r)) { expanded.add(r); autoOpened.add(r) }
}

/** Count of active (busy/waiting) nodes under each node, for collapsed branches. */
const activeInside = () => {
  const counts = new Map()
  for (const id of activeNodes) {
    const n = swarmNodes.get(id)
    for (let p = n.parent; p !== null && swarmNodes.has(p); p = swarmNodes.get(p).parent) counts.set(p, (counts.get(p) || 0) + 1)
  }
  return counts
}

const fillRow = (li, n, inside) => {
  const st = li.querySelector(":scope > .row .state")
  st.textContent = n.status
  st.className = "state state-" + n.status
  li.dataset.status = n.status
  const hint = li.querySelector(":scope > .row .inside")
  const k = inside.get(n.key) || 0
  hint.textContent = k > 0 && !expanded.has(n.key) ? k + " at work inside" : ""
}

const swarmRow = (id, inside) => {
  const n = swarmNodes.get(id)
  const kids = swarmKids.get(id) || []
  const open = expanded.has(id)
  const li = el("li", { role: "treeitem", "data-node": id, "data-name": n.name },
    el("div", { class: "row" },
      el("span", { class: "twisty", "aria-hidden": "true", text: kids.length === 0 ? "" : open ? "▾" : "▸", onclick: () => toggleNode(id) }),
      el("button", { type: "button", class: "node", title: id + (n.lines ? " (lines " + n.lines.start + "–" + n.lines.end + ")" : ""),
        "aria-selected": String(swarmSelected === id), onclick: () => selectNode(id) },
        el("span", { class: "kind", text: kindMark[n.kind] || n.kind }),
        el("span", { class: "label", text: nodeLabel(n) }),
        el("span", { class: "state" }),
        kids.length > 0 ? el("span", { class: "count muted", text: String(kids.length) }) : null,
        el("span", { class: "inside" }))))
  if (kids.length > 0) li.setAttribute("aria-expanded", String(open))
  if (open && kids.length > 0) li.append(el("ul", { role: "group" }, ...kids.map((k) => swarmRow(k, inside))))
  fillRow(li, n, inside)
  swarmRows.set(id, li)
  return li
}

const renderSwarmTree = () => {
  const focused = document.activeElement && document.activeElement.closest("#swarm-tree li")
  const focusId = focused ? focused.dataset.node : null
  swarmRows.clear()
  const inside = activeInside()
  $("swarm-tree").replaceChildren(...(swarmKids.get(null) || []).map((id) => swarmRow(id, inside)))
  if (focusId && swarmRows.has(focusId)) swarmRows.get(focusId).querySelector(":scope > .row .node").focus()
  renderActive()
}

/** Re-render one branch (expand/collapse) without touching the rest. */
const rerenderNode = (id) => {
  const old = swarmRows.get(id)
  if (!old) { renderSwarmTree(); return }
  const hadFocus = old.contains(document.activeElement)
  const drop = (li) => { swarmRows.delete(li.dataset.node); for (const c of li.querySelectorAll("li")) swarmRows.delete(c.dataset.node) }
  drop(old)
  const fresh = swarmRow(id, activeInside())
  old.replaceWith(fresh)
  if (hadFocus) fresh.querySelector(":scope > .row .node").focus()
}

const toggleNode = (id, open) => {
  if ((swarmKids.get(id) || []).length === 0) return
  const want = open === undefined ? !expanded.has(id) : open
  if (want === expanded.has(id)) return
  if (want) expanded.add(id); else expanded.delete(id)
  rerenderNode(id)
}

/** Expand every ancestor of a node, then focus and select it. */
const revealNode = (id) => {
  for (let p = swarmNodes.get(id)?.parent; p && swarmNodes.has(p); p = swarmNodes.get(p).parent) expanded.add(p)
  renderSwarmTree()
  const row = swarmRows.get(id)
  if (row) { row.querySelector(":scope > .row .node").focus(); row.scrollIntoView({ block: "nearest" }) }
  selectNode(id)
}

export const markSwarmSelection = () => {
  for (const b of document.querySelectorAll('#swarm-tree .node[aria-selected="true"]')) b.setAttribute("aria-selected", "false")
  const node = swarmByAgent.get(selected)
  swarmSelected = node ? node.key : null
  const row = swarmSelected && swarmRows.get(swarmSelected)
  if (row) row.querySelector(":scope > .row .node").setAttribute("aria-selected", "true")
}

const selectNode = (id) => {
  const n = swarmNodes.get(id)
  if (!n) return
  if ((swarmKids.get(id) || []).length > 0 && !expanded.has(id)) toggleNode(id, true)
  select(n.agent_id, n.name)
}

export const showNodeBar = (node) => {
  $("node-bar").hidden = node === undefined
  if (!node) return
  $("node-where").textContent = node.kind + " · " + node.path + (node.lines ? ":" + node.lines.start + "–" + node.lines.end : "") + " · " + node.node_id
  const gone = node.status === "orphaned"
  $("node-chat").disabled = gone
  $("node-trigger").disabled = gone
  $("node-text").disabled = gone
  if ($("node-bar").dataset.node !== node.key) {
    $("node-reply").textContent = ""
    showSource(node)
  }
  $("node-bar").dataset.node = node.key
}

const renderActive = () => {
  const active = [...activeNodes].map((id) => swarmNodes.get(id))
  $("swarm-active-box").hidden = active.length === 0
  $("swarm-active").replaceChildren(...active.slice(0, 20).map((n) =>
    el("li", { "data-node": n.key },
      el("a", { href: "#", text: n.name, onclick: (ev) => { ev.preventDefault(); revealNode(n.key) } }),
      el("span", { class: "state state-" + n.status, text: n.status }),
      el("span", { class: "muted", text: " " + n.path }))))
}

/** One node's status changed: its row, its ancestors' "at work inside", the active list, the head if selected. */
const setNodeStatus = (n, status) => {
  if (n.status === status) return
  const wasDormant = n.status === "dormant"
  n.status = status
  if (activeStates.has(status)) activeNodes.add(n.key); else activeNodes.delete(n.key)
  const inside = activeInside()
  for (let p = n.key; p && swarmNodes.has(p); p = swarmNodes.get(p).parent) {
    const row = swarmRows.get(p)
    if (row) fillRow(row, swarmNodes.get(p), inside)
  }
  renderActive()
  if (selected === n.agent_id) {
    if (wasDormant) select(n.agent_id, n.name) // it woke: follow its transcript now
    else { $("agent-state").textContent = status; $("agent-state").className = "badge state-" + status; showNodeBar(n) }
  }
}

let swarmTimer = null
let swarmFull = true
/** Refetch the swarm: its status; every node when the counts moved, else only the non-dormant ones. */
export const refreshSwarm = (full = false) => {
  swarmFull = swarmFull || full
  if (swarmTimer !== null) return
  swarmTimer = setTimeout(async () => {
    swarmTimer = null
    const wasFull = swarmFull
    swarmFull = false
    try {
      const s = (await api("GET", "/swarm")).swarm
      const moved = !swarm || !s || s.nodes !== swarm.nodes || s.orphaned !== swarm.orphaned || s.name !== swarm.name
      swarm = s
      $("swarm-count").textContent = s ? String(s.nodes) : ""
      $("swarm-summary").textContent = s
        ? s.name + " · " + s.root + " · " + s.nodes + " nodes, " + s.dormant + " dormant, " + s.orphaned + " orphaned · " + (s.running ? (s.watching ? "running, watching for saves" : "running") : "stopped")
        : "No swarm runs here. Start one with substrat swarm start <path>."
      $("swarm-find").hidden = !s
      if (!s) { if (swarmNodes.size > 0) { setSwarmNodes([]); renderSwarmTree(); renderTree() } return }
      if (wasFull || moved) {
        setSwarmNodes((await api("GET", "/swarm/agents")).agents)
        renderSwarmTree()
        renderTree()
      } else {
        const awake = (await api("GET", "/swarm/agents?status=idle,busy,waiting,quarantined")).agents
        for (const a of awake) { const n = swarmNodes.get(a.node_id); if (n) setNodeStatus(n, a.status) }
      }
      refreshSource(swarmByAgent.get(selected))
    } catch (e) {
      $("swarm-summary").textContent = "swarm: " + e.message
    }
  }, 150)
}

/** A feed event of a node agent's session: its state now (turns), then the daemon's word. */
export const onSwarmEvent = (e) => {
  const n = swarmBySession.get(e.session_id)
  if (!n) return false
  if (e.event === "turn.start") setNodeStatus(n, "busy")
  else if (e.event === "turn.complete" || e.event === "provider.error") setNodeStatus(n, "idle")
  else if (e.event === "session.created" || e.event === "agent.created") setNodeStatus(n, "idle")
  refreshSwarm()
  return true
}

// Keyboard in the code tree: Up/Down move, Right expands (or enters), Left collapses (or goes up), Enter/Space select.
$("swarm-tree").addEventListener("keydown", (ev) => {
  const li = document.activeElement && document.activeElement.closest("#swarm-tree li")
  if (!li) return
  const id = li.dataset.node
  const focusRow = (row) => { if (row) { row.querySelector(":scope > .row .node").focus(); ev.preventDefault() } }
  if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
    const all = [...document.querySelectorAll("#swarm-tree .node")]
    const i = all.indexOf(document.activeElement)
    const next = all[Math.max(0, Math.min(all.length - 1, i + (ev.key === "ArrowDown" ? 1 : -1)))]
    if (next) { next.focus(); ev.preventDefault() }
  } else if (ev.key === "ArrowRight") {
    if ((swarmKids.get(id) || []).length === 0) return
    if (!expanded.has(id)) { toggleNode(id, true); ev.preventDefault() } else focusRow(swarmRows.get(swarmKids.get(id)[0]))
  } else if (ev.key === "ArrowLeft") {
    if (expanded.has(id) && (swarmKids.get(id) || []).length > 0) { toggleNode(id, false); ev.preventDefault() } else focusRow(swarmRows.get(swarmNodes.get(id).parent))
  }
})

// Find a node by name, symbol or path (the first 30 matches; Enter reveals the first).
let findTimer = null
const findMatches = () => {
  const q = $("swarm-find").value.trim().toLowerCase()
  if (q === "") return []
  const out = []
  for (const n of swarmNodes.values()) {
    if (n.name.toLowerCase().includes(q) || n.symbol.toLowerCase().includes(q) || n.path.toLowerCase().includes(q)) out.push(n)
    if (out.length >= 30) break
  }
  return out
}
$("swarm-find").addEventListener("input", () => {
  clearTimeout(findTimer)
  findTimer = setTimeout(() => {
    const found = findMatches()
    $("swarm-found").hidden = found.length === 0
    $("swarm-found").replaceChildren(...found.map((n) =>
      el("li", {}, el("a", { href: "#", text: n.name, onclick: (ev) => { ev.preventDefault(); revealNode(n.key) } }), el("span", { class: "muted", text: " " + n.node_id }))))
  }, 120)
})
$("swarm-find").addEventListener("keydown", (ev) => {
  if (ev.key !== "Enter") return
  ev.preventDefault()
  const first = findMatches()[0]
  if (first) revealNode(first.key)
})

// Chat with the selected node (waits for its reply) or trigger it.
$("node-bar").addEventListener("submit", async (ev) => {
  ev.preventDefault()
  const node = swarmByAgent.get(selected)
  const text = $("node-text").value.trim()
  if (!node || !text) return
  $("node-chat").disabled = true
  $("node-reply").textContent = "waiting for " + node.name + "…"
  try {
    const r = await api("POST", "/swarm/agents/" + encodeURIComponent(node.node_id) + "/chat", { text, wait: true })
    $("node-reply").textContent = node.name + ": " + (r.reply ?? "(no reply)")
    $("node-text").value = ""
  } catch (e) {
    $("node-reply").textContent = "error: " + e.message
  } finally {
    $("node-chat").disabled = false
  }
})
$("node-trigger").addEventListener("click", async () => {
  const node = swarmByAgent.get(selected)
  if (!node) return
  try {
    await api("POST", "/swarm/agents/" + encodeURIComponent(node.node_id) + "/trigger")
    $("node-reply").textContent = "triggered " + node.name
  } catch (e) {
    $("node-reply").textContent = "error: " + e.message
  }
})

// Tabs: Agents | Swarm (arrow keys move between them).
const showTab = (name) => {
  for (const t of ["agents", "swarm"]) {
    const on = t === name
    $("tab-" + t).setAttribute("aria-selected", String(on))
    $("tab-" + t).tabIndex = on ? 0 : -1
    $("pane-" + t).hidden = !on
  }
  if (name === "swarm") refreshSwarm()
}
$("tab-agents").addEventListener("click", () => showTab("agents"))
$("tab-swarm").addEventListener("click", () => showTab("swarm"))
for (const t of ["agents", "swarm"]) {
  $("tab-" + t).addEventListener("keydown", (ev) => {
    if (ev.key !== "ArrowRight" && ev.key !== "ArrowLeft") return
    const other = t === "agents" ? "swarm" : "agents"
    showTab(other)
    $("tab-" + other).focus()
  })
}
