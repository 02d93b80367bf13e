// The whole daemon's feed (GET /v1/events): the Messages list (every message between agents and
// to/from USER, newest first) and what each event changes elsewhere — busy times and current
// steps, usage, the agent list, the side panel, the swarm's node states, the merge queues.
import { budgetSessions } from "/budgets.js"
import { select } from "/detail.js"
import { refreshSide } from "/inbox.js"
import { $, el } from "/lib.js"
import { onMergeEvent } from "/merges.js"
import { addUsage, busySince, nameOf, names, shownSessions, startedLive, steps } from "/state.js"
import { onSwarmEvent, refreshSwarm } from "/swarm.js"
import { clock } from "/timeline.js"
import { fetchGen, refresh, renderTree } from "/tree.js"

// Every message between agents (and to/from USER), newest first, the last FLOW_MAX kept. Each is
// logged once (in its recipient's log; to USER in the sender's). Clicking one selects the recipient.
const FLOW_MAX = 200
const flowSender = (d) => (d.sender === "USER" || d.sender === "SYSTEM" ? d.sender : names.get(d.sender) || d.sender_name || nameOf(d.sender))
/** (Re)write a flow entry's names: the backlog can come before the agent list. */
export const labelFlow = (li) => {
  const d = li.flowData
  li.dataset.from = flowSender(d)
  li.dataset.to = nameOf(d.recipient)
  li.querySelector(".route").textContent = li.dataset.from + " → " + li.dataset.to
}
const addFlow = (e) => {
  const d = e.data
  const list = $("flow")
  const atTop = list.scrollTop < 40
  const target = d.recipient !== "USER" && d.recipient !== null ? d.recipient : d.sender
  const li = el("li", { "data-kind": d.kind, "data-ts": e.ts },
    el("span", { class: "meta muted", text: clock(e.ts) + " " }),
    el("a", { href: "#", class: "route", onclick: (ev) => { ev.preventDefault(); if (target !== "USER" && target !== "SYSTEM") select(target) } }),
    el("span", { class: "kind", text: " " + d.kind }),
    el("span", { class: "text", text: d.payload }))
  li.flowData = d
  labelFlow(li)
  // In time order, newest first (the feed merges the agents' logs: one may come a little late).
  let next = list.firstElementChild
  while (next && next.dataset.ts > e.ts) next = next.nextElementSibling
  list.insertBefore(li, next)
  while (list.children.length > FLOW_MAX) list.lastElementChild.remove()
  // Newest first: following new traffic keeps the top in view (unless the reader scrolled down).
  if (atTop) list.scrollTop = 0
}

let treeLive = false
export const onTreeEvent = (name, e) => {
  if (name === "live") { treeLive = true; refresh(); refreshSide(); refreshSwarm(true); return }
  if (name !== "message") return
  const s = e.session_id
  if (e.event === "budget.set") budgetSessions.add(s)
  if (e.event.startsWith("budget.") || e.event.startsWith("human.") || e.event.startsWith("turn.") || e.event === "usage" ||
    e.event.startsWith("spawn.") || e.event.startsWith("user.") ||
    e.event === "agent.created" || e.event === "agent.terminated" || e.event === "message.enqueued") refreshSide()
  onSwarmEvent(e)
  onMergeEvent(e)
  switch (e.event) {
    case "turn.start":
      busySince.set(s, Date.parse(e.ts)); steps.set(s, "thinking")
      if (treeLive) {
        startedLive.set(s, fetchGen)
        if (shownSessions.has(s)) renderTree()
      }
      break
    case "tool_call.invoked": steps.set(s, "tool " + e.data.tool + (e.data.source === "provider" ? " (provider)" : "")); break
    case "tool_call.result": steps.set(s, "thinking"); break
    case "turn.complete": case "provider.error": busySince.delete(s); steps.delete(s); startedLive.delete(s); break
    case "message.enqueued": addFlow(e); break
    case "usage": addUsage(s, e.data); break
  }
  refresh()
}

