// The selected agent (middle pane): its head (name, state, usage, Terminate), its transcript
// followed live from GET /v1/events?agent=… (entries made here, shown by transcript.js), or the
// timeline of its tree (timeline.js); and the form that sends a message to a root and waits.
import { fmtLimit, limitKeys } from "/budgets.js"
import { $, api, el, fmtCost, follow, short } from "/lib.js"
import { nameOf } from "/state.js"
import { markSwarmSelection, showNodeBar, swarmByAgent } from "/swarm.js"
import { clock, mountTimeline } from "/timeline.js"
import { mountTranscript } from "/transcript.js"
import { agents, refresh, renderTree } from "/tree.js"

/** The selected agent's id, or null. */
export let selected = null
let stopTranscript = null

const renderDiff = (text) =>
  el("div", { class: "diff", role: "region", "aria-label": "diff" }, ...text.split("\n").map((line) =>
    el("div", {
      class: line.startsWith("diff --git") ? "file" : line.startsWith("@@") ? "hunk"
        : line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : "",
      text: line || " "
    })))

const fmtBytes = (n) => n < 1024 ? n + " B" : n < 1024 * 1024 ? (n / 1024).toFixed(1) + " KiB" : (n / 1024 / 1024).toFixed(1) + " MiB"

const entryFor = (e) => {
  const time = clock(e.ts)
  const item = (kind, meta, text, extra) =>
    el("li", { class: "entry " + kind, "data-event": e.event, "data-position": e.position },
      el("div", { class: "meta", text: time + " · " + meta }), text === null ? null : el("div", { class: "text", text }), extra)
  const d = e.data
  switch (e.event) {
    case "turn.start": return item("turn", "turn started", d.prompt)
    case "turn.complete": return item("reply", "turn complete", d.response)
    case "message.enqueued":
      return item("message", (d.kind || "message") + " " + nameOf(d.sender) + " → " + nameOf(d.recipient), d.payload)
    case "tool_call.invoked":
      return item("tool", d.source === "provider" ? "tool call · provider's own" : "tool call", d.tool + "(" + short(d.arguments) + ")")
    case "tool_call.result":
      return item(d.is_error ? "tool error" : "tool", d.source === "provider" ? "tool result · provider's own" : "tool result", d.tool + " → " + short(d.result))
    case "provider.error": return item("error", "provider error (" + d.reason + ")", d.message)
    case "usage": return item("usage", d.source === "request" ? "usage · model request" + (d.model ? " (" + d.model + ")" : "") : "usage · turn total",
      d.input_tokens + " in · " + d.output_tokens + " out" + (d.cache_read_tokens || d.cache_write_tokens ? " · cache " + (d.cache_read_tokens || 0) + " read, " + (d.cache_write_tokens || 0) + " written" : "") + " · " + fmtCost(d.cost_usd))
    case "agent.created": return item("lifecycle", "created", d.name + " (" + d.role + ", " + d.provider + ")")
    case "agent.terminated": return item("lifecycle", "terminated", null)
    case "message.timed_out": return item("error", "request timed out", "no reply from " + d.recipient_name)
    case "workspace.diff": {
      const holder = el("div", {}, el("span", { class: "muted", text: "loading diff…" }))
      api("GET", "/v1/workspaces/" + d.workspace_id + "/turns/" + d.turn_id + "/diff")
        .then((r) => holder.replaceChildren(renderDiff(r.diff)))
        .catch((err) => holder.replaceChildren(el("span", { class: "muted", text: "diff unavailable: " + err.message })))
      return item("diff", "workspace diff · " + d.paths.map((p) => p.change + " " + p.path).join(", "), null, holder)
    }
    case "message.forwarded": return item("lifecycle", "find: passed on", d.to === null ? "not found here: the search ended" : "to " + nameOf(d.to))
    case "budget.set": return item("lifecycle", "budget set", limitKeys.filter(([k]) => d[k] !== null && d[k] !== undefined).map(([k, w]) => w + " " + fmtLimit(k, d[k])).join(" · ") || "no limits")
    case "budget.breached": return item("error", "budget spent: parked until the human raises it", d.reason)
    case "human.asked": return item("message", "asked the human", d.question)
    case "human.answered": return item("message", "the human answered", d.answer)
    case "egress.request": {
      const what = d.method + " " + d.host + ":" + d.port + (d.status === null || d.status === undefined ? "" : " " + d.status)
      const li = d.allowed
        ? item("egress", "egress · allowed" + (d.rule ? " (" + d.rule + ")" : ""), what + " · ↑" + fmtBytes(d.bytes_up) + " ↓" + fmtBytes(d.bytes_down) + " · " + d.duration_ms + " ms" + (d.reason ? " · ended: " + d.reason : ""))
        : item("egress error", "egress · denied", what + " · " + (d.reason || "refused") + (d.item_id ? " · in the inbox" : ""))
      li.dataset.host = d.host
      li.dataset.allowed = String(d.allowed)
      return li
    }
    default: return null // session.created, message.delivered, suspend/restore: bookkeeping
  }
}

/** Show an agent's transcript (`name`: what to call it before the agent list has it). */
export const select = (id, name) => {
  selected = id
  const a = agents.find((x) => x.id === id)
  const node = swarmByAgent.get(id)
  $("agent-name").textContent = a ? a.name : name || (node && node.name) || id
  $("transcript").replaceChildren()
  if (stopTranscript) stopTranscript()
  stopTranscript = null
  transcriptView.reset()
  if (detailView === "timeline") timeline.open(rootOf(id))
  showNodeBar(node)
  // A dormant node agent has no session yet: nothing to follow until it wakes (swarmStatusChanged re-selects).
  const dormant = node !== undefined && node.status === "dormant"
  $("dormant-note").hidden = !dormant
  const list = $("transcript")
  if (!dormant) {
    stopTranscript = follow("/v1/events?agent=" + encodeURIComponent(id), (name, e) => {
      if (name !== "message") return
      const node = transcriptView.take(e)
      if (!node) return
      const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40
      list.append(node)
      transcriptView.refresh()
      if (atBottom) list.scrollTop = list.scrollHeight
    }, () => {})
  }
  if (a && a.parent_id === null && a.state !== "terminated") $("send-to").value = a.id
  renderTree()
  markSwarmSelection()
}

// The detail pane's views: the selected agent's transcript, or the timeline of its tree.
const transcriptView = mountTranscript({ el, entryFor, nameOf })
const timeline = mountTimeline({ el, follow, nameOf })
let detailView = "transcript"
const rootOf = (id) => {
  let a = agents.find((x) => x.id === id)
  while (a && a.parent_id !== null) {
    const up = agents.find((x) => x.id === a.parent_id)
    if (!up) break
    a = up
  }
  return a ? a.id : id
}
const showDetailView = (name) => {
  detailView = name
  $("view-transcript").setAttribute("aria-selected", String(name === "transcript"))
  $("view-timeline").setAttribute("aria-selected", String(name === "timeline"))
  $("view-transcript").tabIndex = name === "transcript" ? 0 : -1
  $("view-timeline").tabIndex = name === "timeline" ? 0 : -1
  $("transcript-pane").hidden = name !== "transcript"
  $("timeline").hidden = name !== "timeline"
  if (name === "timeline" && selected !== null) timeline.open(rootOf(selected))
  else timeline.close()
}
$("view-transcript").addEventListener("click", () => showDetailView("transcript"))
$("view-timeline").addEventListener("click", () => showDetailView("timeline"))
$("transcript-tools").addEventListener("submit", (ev) => ev.preventDefault())

$("terminate").addEventListener("click", async () => {
  const a = agents.find((x) => x.id === selected)
  if (!a || !confirm("Terminate " + a.name + " and its subtree?")) return
  try {
    await api("DELETE", "/v1/agents/" + a.id)
  } catch (e) {
    alert(e.message)
  }
  refresh()
})

// ---------------------------------------------------------------------------------------------
// Sending to a root

$("send").addEventListener("submit", async (ev) => {
  ev.preventDefault()
  const to = $("send-to").value
  const text = $("send-text").value.trim()
  if (!to || !text) return
  $("send-button").disabled = true
  $("answer").textContent = "waiting for " + nameOf(to) + "…"
  try {
    const r = await api("POST", "/v1/agents/" + to + "/messages", { text, wait: true })
    $("answer").textContent = nameOf(to) + ": " + r.answer.text
    $("send-text").value = ""
  } catch (e) {
    $("answer").textContent = "error: " + e.message
  } finally {
    $("send-button").disabled = false
    $("send-text").focus()
  }
})
