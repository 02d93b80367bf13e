// The substrat dashboard: one ES module, no framework (docs/http.md). It reads the REST API
// (/v1/agents, /v1/agents/{id}/messages, /v1/workspaces/…/diff) and follows the SSE feed
// (/v1/events) with fetch — EventSource cannot send the bearer token — resuming with
// Last-Event-ID after a dropped connection. The token comes from the URL fragment
// (`substrat ui` prints it; the fragment never reaches a server) and stays in sessionStorage.

import { clock, mountTimeline } from "/timeline.js"
import { mountTranscript } from "/transcript.js"

const $ = (id) => document.getElementById(id)

const token = (() => {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash)
  if (m) {
    sessionStorage.setItem("substrat-token", decodeURIComponent(m[1]))
    history.replaceState(null, "", location.pathname)
  }
  return sessionStorage.getItem("substrat-token")
})()

const authHeaders = (extra = {}) => (token ? { ...extra, authorization: "Bearer " + token } : extra)

const api = async (method, path, body) => {
  const res = await fetch(path, {
    method,
    headers: authHeaders(body === undefined ? {} : { "content-type": "application/json" }),
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  const data = await res.json().catch(() => ({}))
  if (!res.ok) throw new Error((data.error && data.error.message) || res.status + " " + res.statusText)
  return data
}

const el = (tag, props = {}, ...children) => {
  const e = document.createElement(tag)
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v
    else if (k === "text") e.textContent = v
    else if (k.startsWith("data-") || k.startsWith("aria-") || k === "role" || k === "tabindex") e.setAttribute(k, v)
    else e[k] = v
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c)
  return e
}

/**
 * Follow an SSE path; calls onEvent(name, data) per event, reconnecting with Last-Event-ID.
 * Returns a stop function.
 */
const follow = (path, onEvent, onState) => {
  const ctrl = new AbortController()
  let lastId
  const run = async () => {
    while (!ctrl.signal.aborted) {
      try {
        const headers = authHeaders(lastId === undefined ? {} : { "last-event-id": lastId })
        const res = await fetch(path, { headers, signal: ctrl.signal })
        if (!res.ok || !res.body) throw new Error("HTTP " + res.status)
        onState("live")
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
        let buf = ""
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          buf += value
          let i
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i)
            buf = buf.slice(i + 2)
            let name = "message", data = "", id
            for (const line of block.split("\n")) {
              if (line.startsWith("id: ")) id = line.slice(4)
              else if (line.startsWith("event: ")) name = line.slice(7)
              else if (line.startsWith("data: ")) data += line.slice(6)
            }
            if (id !== undefined) lastId = id
            if (data !== "") onEvent(name, JSON.parse(data))
          }
        }
      } catch (e) {
        if (ctrl.signal.aborted) return
      }
      onState("down")
      await new Promise((r) => setTimeout(r, 1000))
    }
  }
  run()
  return () => ctrl.abort()
}

// ---------------------------------------------------------------------------------------------
// State

let agents = []
let selected = null
let stopTranscript = null
const steps = new Map() // session_id → current step text
const busySince = new Map() // session_id → Date of turn.start
// Turns started (live) since the agent list was last fetched: the list is throttled, so a short
// turn may begin and end between two fetches; until a fetch begun after its turn.start comes
// back, the event says the agent is busy. session_id → the fetch generation at the event.
let fetchGen = 0
const startedLive = new Map()
const shownSessions = new Set() // session ids of the agents the tree shows
/** What the tree shows for an agent: the list's state, or busy for a turn the list predates. */
const stateOf = (a) => a.state === "idle" && startedLive.has(a.session_id) ? "busy" : a.state
const usage = new Map() // session_id → { in, out, cache, cost }: what counts (addUsage)
const usageBooks = new Map() // session_id → the usage events by kind, for addUsage
const names = new Map() // agent id → name

const fmtCost = (c) => "$" + c.toFixed(c < 0.01 ? 4 : 2)
const fmtUsage = (u) => (u ? (u.in + u.out + u.cache) + " tok · " + fmtCost(u.cost) : "")

const noUsage = () => ({ in: 0, out: 0, cache: 0, cost: 0 })
const addTo = (t, u) => { t.in += u.in; t.out += u.out; t.cache += u.cache; t.cost += u.cost; return t }
/**
 * One `usage` event of a session, counted as the daemon counts (docs/events.md, "Usage: which
 * events count"): request-level events (`source: "request"`) always; a turn's own total only for a
 * turn without request-level ones. Tokens include cache reads and writes, as budgets count them.
 */
const addUsage = (s, d) => {
  const b = usageBooks.get(s) || { requests: noUsage(), metered: new Set(), turns: new Map(), other: noUsage() }
  usageBooks.set(s, b)
  const u = { in: d.input_tokens, out: d.output_tokens, cache: (d.cache_read_tokens || 0) + (d.cache_write_tokens || 0), cost: d.cost_usd }
  if (d.source === "request") {
    addTo(b.requests, u)
    if (d.turn_id) b.metered.add(d.turn_id)
  } else if (d.turn_id) b.turns.set(d.turn_id, addTo(b.turns.get(d.turn_id) || noUsage(), u))
  else addTo(b.other, u)
  const total = addTo(addTo(noUsage(), b.requests), b.other)
  for (const [turn, t] of b.turns) if (!b.metered.has(turn)) addTo(total, t)
  usage.set(s, total)
}
const elapsed = (since) => {
  const s = Math.max(0, Math.round((Date.now() - since) / 1000))
  return s < 60 ? s + "s" : Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s"
}

/** Own + descendants' usage; `childrenOf` maps an agent id to its children (every agent, not only the shown ones). */
const subtreeUsage = (id, childrenOf) => {
  const total = noUsage()
  const visit = (a) => {
    const u = usage.get(a.session_id)
    if (u) addTo(total, u)
    for (const c of childrenOf.get(a.id) || []) visit(c)
  }
  const root = agents.find((a) => a.id === id)
  if (root) visit(root)
  return total
}

/** Agents of a swarm's code nodes (role swarm-*) below the swarm's root: shown in the Swarm view, not in the agent tree. */
const isSwarmNode = (a) => a.parent_id !== null && typeof a.role === "string" && a.role.startsWith("swarm-")

// ---------------------------------------------------------------------------------------------
// The tree

const renderTree = () => {
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
      const sub = kids ? subtreeUsage(a.id, childrenOf) : null
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
const refresh = () => {
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

// ---------------------------------------------------------------------------------------------
// The selected agent's transcript

const nameOf = (id) => (id === "USER" || id === "SYSTEM" ? id : names.get(id) || String(id).slice(0, 8))
const short = (v) => {
  const s = typeof v === "string" ? v : JSON.stringify(v)
  return s.length > 300 ? s.slice(0, 299) + "…" : s
}

const renderDiff = (text) =>
  el("div", { class: "diff", role: "region", "aria-label": "diff" }, ...text.split("\n").map((line) =>
    el("div", {
      class: line.startsWith("diff --git") ? "file" : line.startsWith("@@") ? "hunk"
        : line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : "",
      text: line || " "
    })))

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
    default: return null // session.created, message.delivered, suspend/restore: bookkeeping
  }
}

/** Show an agent's transcript (`name`: what to call it before the agent list has it). */
const select = (id, name) => {
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

// ---------------------------------------------------------------------------------------------
// The human inbox (GET /v1/inbox, oldest first) and budgets (GET/POST /v1/agents/{id}/budget)

let inboxItems = []
const budgetSessions = new Set() // sessions that logged a budget.set: their agents have budgets of their own
const budgetViews = new Map() // agent id → BudgetView

const kindLabel = { question: "question", budget: "budget spent", queued_spawn: "queued spawn", answer: "answer to you" }

/** Agents the inbox says are parked: the owner of a spent budget and its subtree, an agent waiting for an answer. */
const parkedFlags = (childrenOf) => {
  const flags = new Map()
  const mark = (id) => {
    flags.set(id, { kind: "budget", text: "parked: budget" })
    for (const c of childrenOf.get(id) || []) mark(c.id)
  }
  for (const i of inboxItems) if (i.kind === "budget") mark(i.agent_id)
  for (const i of inboxItems) if (i.kind === "question") flags.set(i.agent_id, { kind: "question", text: "asks you" })
  return flags
}

/** A form that posts `body()` to `path`, says what happened in its own output, then refreshes the side panel. */
const actionForm = (label, fields, submit) => {
  const out = el("output", { class: "result", "aria-live": "polite" })
  const button = el("button", { type: "submit", text: label })
  const form = el("form", { class: "action" }, ...fields, button, out)
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault()
    button.disabled = true
    out.textContent = "…"
    try {
      out.textContent = await submit()
      out.className = "result ok"
    } catch (e) {
      out.textContent = "error: " + e.message
      out.className = "result error"
    } finally {
      button.disabled = false
      refreshSide()
    }
  })
  return form
}

const limitKeys = [["usd", "USD"], ["tokens", "tokens"], ["turns", "turns"], ["time_s", "seconds"]]

/**
 * Set/raise form of an agent's budget: one number per limit, showing the limits in force (kept up
 * to date by syncBudgetForms until the user edits a field); only the fields the user edited are
 * sent (an emptied one removes its limit).
 */
const budgetForm = (agentId, label) => {
  const inputs = limitKeys.map(([k, words]) => {
    const input = el("input", { type: "number", min: "0", step: "any", name: k, "aria-label": words + " limit" })
    input.dataset.limit = k
    input.addEventListener("input", () => { input.dataset.edited = "1" })
    return input
  })
  const form = actionForm(label, [el("div", { class: "limits" }, ...inputs.map((input, n) =>
    el("label", { class: "limit" }, el("span", { text: limitKeys[n][1] }), input)))], async () => {
    const patch = {}
    for (const input of inputs) {
      if (input.dataset.edited !== "1") continue
      patch[input.name] = input.value.trim() === "" ? null : Number(input.value)
    }
    if (Object.keys(patch).length === 0) return "no change"
    const r = await api("POST", "/v1/agents/" + agentId + "/budget", patch)
    budgetViews.set(agentId, r)
    for (const input of inputs) delete input.dataset.edited
    syncBudgetForms()
    return "budget set" + (r.exhausted ? " (still spent: " + r.exhausted + ")" : "")
  })
  form.dataset.budgetOf = agentId
  syncBudgetForm(form)
  return form
}

/** Show the limits in force in a budget form's fields the user has not edited. */
const syncBudgetForm = (form) => {
  const view = budgetViews.get(form.dataset.budgetOf)
  for (const input of form.querySelectorAll("input[data-limit]")) {
    if (input.dataset.edited === "1") continue
    const v = view && view.budget ? view.budget[input.name] : null
    input.value = v === null ? "" : String(v)
  }
}
const syncBudgetForms = () => { for (const f of document.querySelectorAll("form[data-budget-of]")) syncBudgetForm(f) }

const answerForm = (item, label) => {
  const input = el("input", { type: "text", autocomplete: "off", required: true, "aria-label": label + " to " + item.agent_name + ": " + item.text })
  return actionForm(label, [input], async () => {
    await api("POST", "/v1/inbox/" + encodeURIComponent(item.id) + "/answer", { text: input.value })
    input.value = ""
    return "sent"
  })
}

/** A button that answers an item with one word (the daemon's verb for it: "stop", "cancel", "read"). */
const oneWordAnswer = (item, label, word, question) =>
  actionForm(label, [], async () => {
    if (question !== null && !confirm(question)) return "kept"
    await api("POST", "/v1/inbox/" + encodeURIComponent(item.id) + "/answer", { text: word })
    return "done"
  })

const agentLink = (id, name) => el("a", { href: "#", class: "agent-link", text: name, onclick: (ev) => { ev.preventDefault(); select(id, name) } })

const inboxEntry = (item) => {
  const actions = item.kind === "question"
    ? answerForm(item, "Answer")
    : item.kind === "budget"
    ? el("div", { class: "budget-actions" },
      budgetForm(item.agent_id, "Raise budget"),
      oneWordAnswer(item, "Stop subtree", "stop", "Stop " + item.agent_name + " and its subtree?"))
    : item.kind === "answer"
    ? el("div", { class: "budget-actions" }, oneWordAnswer(item, "Mark read", "read", null))
    : item.kind === "queued_spawn"
    ? el("div", { class: "budget-actions" }, oneWordAnswer(item, "Cancel spawn", "cancel", "Cancel this queued spawn?"))
    : answerForm(item, "Respond") // kinds this page does not know: shown by their text, answered through the same route
  return el("li", { class: "inbox-item kind-" + item.kind, "data-id": item.id, "data-kind": item.kind },
    el("div", { class: "meta" },
      el("span", { class: "kind", text: kindLabel[item.kind] || item.kind.replace(/_/g, " ") }), " · ",
      agentLink(item.agent_id, item.agent_name), " · ",
      el("time", { dateTime: item.ts, text: clock(item.ts) })),
    el("div", { class: "text", text: item.text }),
    actions)
}

/** Items are immutable: keep the rows (and what is typed in them) of items still waiting, add new ones in order. */
const renderInbox = () => {
  const list = $("inbox-items")
  const have = new Map([...list.children].map((li) => [li.dataset.id, li]))
  const rows = inboxItems.map((i) => have.get(i.id) || inboxEntry(i))
  rows.forEach((row, n) => { if (list.children[n] !== row) list.insertBefore(row, list.children[n] || null) })
  while (list.children.length > rows.length) list.lastElementChild.remove()
  $("inbox-empty").hidden = inboxItems.length > 0
  $("inbox-count").textContent = String(inboxItems.length)
  $("inbox-link").classList.toggle("has", inboxItems.length > 0)
}

const fmtLimit = (k, v) => (v === null ? "—" : k === "usd" ? fmtCost(v) : k === "time_s" ? Math.round(v) + "s" : String(Math.round(v * 100) / 100))
const spentOf = (k, view) => {
  const u = view.used
  if (k === "usd") return u.cost_usd
  if (k === "tokens") return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
  if (k === "turns") return u.turns
  return view.budget && view.remaining && view.remaining.time_s !== null ? view.budget.time_s - view.remaining.time_s : null
}

const budgetCard = (id) => {
  const li = el("li", { class: "budget", "data-agent-id": id },
    el("div", { class: "head" }), el("div", { class: "body" }),
    el("details", {}, el("summary", { text: "Set or raise limits" })))
  return li
}

/** Rewrite a card's head and figures; its form (maybe half typed) stays. */
const fillBudgetCard = (li, view) => {
  // parked: a breach waits for the human (work is held); spent: nothing left, the next turn would park.
  const parked = view.breach !== null
  const state = parked ? "parked" : view.exhausted !== null ? "spent" : view.budget ? "ok" : "none"
  li.dataset.name = view.agent_name
  li.dataset.state = state
  li.querySelector(".head").replaceChildren(
    agentLink(view.agent_id, view.agent_name),
    el("span", { class: "badge " + state, text: { parked: "parked", spent: "spent", ok: "within budget", none: "no budget" }[state] }))
  const rows = view.budget === null ? [] : limitKeys.filter(([k]) => view.budget[k] !== null).map(([k, words]) =>
    el("tr", { "data-limit": k },
      el("th", { scope: "row", text: words }),
      el("td", { text: fmtLimit(k, view.budget[k]) }),
      el("td", { text: fmtLimit(k, spentOf(k, view)) }),
      // Never a negative "left": the request that crosses a limit is known only afterwards.
      el("td", { class: view.remaining[k] !== null && view.remaining[k] <= 0 ? "spent" : "", text: fmtLimit(k, view.remaining[k] === null ? null : Math.max(0, view.remaining[k])) })))
  const u = view.used
  li.querySelector(".body").replaceChildren(...[
    view.exhausted !== null ? el("p", { class: "reason", text: view.exhausted + (parked ? "" : " (no work waiting)") }) : null,
    rows.length > 0
      ? el("table", {}, el("thead", {}, el("tr", {}, el("th", { text: "" }), el("th", { text: "limit" }), el("th", { text: "spent" }), el("th", { text: "left" }))), el("tbody", {}, ...rows))
      : el("p", { class: "muted", text: "spent " + fmtCost(u.cost_usd) + " · " + (u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens) + " tok · " + u.turns + " turns" })
  ].filter((x) => x !== null))
  const details = li.querySelector("details")
  if (details.children.length === 1) details.append(budgetForm(view.agent_id, view.budget ? "Set" : "Set budget"))
}

/** The budgets shown: every live tree's root, and every live agent that set a budget of its own. */
const budgetTargets = () =>
  agents.filter((a) => a.state !== "terminated" && (a.parent_id === null || budgetSessions.has(a.session_id)))

const renderBudgets = () => {
  const list = $("budget-list")
  const have = new Map([...list.children].map((li) => [li.dataset.agentId, li]))
  const rows = []
  for (const a of budgetTargets()) {
    const view = budgetViews.get(a.id)
    if (!view) continue
    const li = have.get(a.id) || budgetCard(a.id)
    fillBudgetCard(li, view)
    rows.push(li)
  }
  rows.forEach((row, n) => { if (list.children[n] !== row) list.insertBefore(row, list.children[n] || null) })
  while (list.children.length > rows.length) list.lastElementChild.remove()
}

let sideTimer = null
/** Refetch the inbox and the budgets shown (after events, after an action, and every 5 s). */
const refreshSide = () => {
  if (sideTimer !== null) return
  sideTimer = setTimeout(async () => {
    sideTimer = null
    try {
      const items = (await api("GET", "/v1/inbox")).items
      // Budgets first: a new breach's raise form is prefilled with the limits in force.
      const ids = new Set([...budgetTargets().map((a) => a.id), ...items.filter((i) => i.kind === "budget").map((i) => i.agent_id)])
      const views = await Promise.all([...ids].map((id) => api("GET", "/v1/agents/" + id + "/budget").catch(() => null)))
      for (const v of views) if (v) budgetViews.set(v.agent_id, v)
      inboxItems = items
      renderInbox()
      renderBudgets()
      syncBudgetForms()
      renderTree()
    } catch (e) {
      $("conn").textContent = "error: " + e.message
    }
  }, 150)
}

$("inbox-link").addEventListener("click", (ev) => {
  ev.preventDefault()
  const first = document.querySelector("#inbox-items input, #inbox-items button")
  ;(first || $("inbox")).focus()
})

// ---------------------------------------------------------------------------------------------
// The swarm as the code tree (GET /swarm, /swarm/agents; POST /swarm/agents/{id}/chat|trigger)
//
// Thousands of nodes: the list is fetched once (and again when the swarm's counts change), the
// tree is collapsed below the root and a branch's rows are made only when it is expanded. State
// changes come from the daemon's event feed (turns of the node agents' sessions) and a refetch of
// the non-dormant nodes; they touch only the rows that exist.

let swarm = null // GET /swarm's status, or null
const swarmNodes = new Map() // node id → SwarmAgent view (with status)
const swarmKids = new Map() // node id | null → child node ids, in discovery order
const swarmByAgent = new Map() // agent id → view
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

const markSwarmSelection = () => {
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

const showNodeBar = (node) => {
  $("node-bar").hidden = node === undefined
  if (!node) return
  $("node-where").textContent = node.kind + " · " + node.path + (node.lines ? ":" + node.lines.start + "–" + node.lines.end : "") + " · " + node.node_id
  const gone = node.status === "orphaned"
  $("node-chat").disabled = gone
  $("node-trigger").disabled = gone
  $("node-text").disabled = gone
  if ($("node-bar").dataset.node !== node.key) $("node-reply").textContent = ""
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
const refreshSwarm = (full = false) => {
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
    } catch (e) {
      $("swarm-summary").textContent = "swarm: " + e.message
    }
  }, 150)
}

/** A feed event of a node agent's session: its state now (turns), then the daemon's word. */
const onSwarmEvent = (e) => {
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

// ---------------------------------------------------------------------------------------------
// The whole daemon's feed: tree changes, current steps, usage

// Every message between agents (and to/from USER), newest first, the last FLOW_MAX kept. Each is
// logged once (in its recipient's log; to USER in the sender's). Clicking one selects the recipient.
const FLOW_MAX = 200
const flowSender = (d) => (d.sender === "USER" || d.sender === "SYSTEM" ? d.sender : names.get(d.sender) || d.sender_name || nameOf(d.sender))
/** (Re)write a flow entry's names: the backlog can come before the agent list. */
const labelFlow = (li) => {
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
const onTreeEvent = (name, e) => {
  if (name === "live") { treeLive = true; refresh(); refreshSide(); refreshSwarm(true); return }
  if (name !== "message") return
  const s = e.session_id
  if (e.event === "budget.set") budgetSessions.add(s)
  if (e.event.startsWith("budget.") || e.event.startsWith("human.") || e.event.startsWith("turn.") || e.event === "usage" ||
    e.event.startsWith("spawn.") || e.event.startsWith("user.") ||
    e.event === "agent.created" || e.event === "agent.terminated" || e.event === "message.enqueued") refreshSide()
  onSwarmEvent(e)
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

const start = async () => {
  try {
    const d = await api("GET", "/v1/daemon")
    $("daemon").textContent = "daemon " + d.pid + " · " + d.home
  } catch (e) {
    $("conn").textContent = e.message
    $("conn").className = "conn down"
    return
  }
  follow("/v1/events", onTreeEvent, (state) => {
    $("conn").textContent = state === "live" ? "live" : "reconnecting…"
    $("conn").className = "conn " + state
  })
  refresh()
  refreshSide()
  refreshSwarm(true)
  setInterval(() => { if (agents.some((a) => stateOf(a) === "busy" || stateOf(a) === "waiting")) renderTree() }, 1000)
  // What no event announces (a swarm started or reconciled, inbox kinds this page does not know).
  setInterval(() => { refreshSide(); refreshSwarm() }, 5000)
}

start()
