// The substrat dashboard: one ES module, no framework (docs/http.md). It reads the REST API
// (/v1/agents, /v1/agents/{id}/messages, /v1/workspaces/…/diff) and follows the SSE feed
// (/v1/events) with fetch — EventSource cannot send the bearer token — resuming with
// Last-Event-ID after a dropped connection. The token comes from the URL fragment
// (`substrat ui` prints it; the fragment never reaches a server) and stays in sessionStorage.

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
const usage = new Map() // session_id → { in, out, cost }
const names = new Map() // agent id → name

const fmtCost = (c) => "$" + c.toFixed(c < 0.01 ? 4 : 2)
const fmtUsage = (u) => (u ? (u.in + u.out) + " tok · " + fmtCost(u.cost) : "")
const elapsed = (since) => {
  const s = Math.max(0, Math.round((Date.now() - since) / 1000))
  return s < 60 ? s + "s" : Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s"
}

const subtreeUsage = (id) => {
  const total = { in: 0, out: 0, cost: 0 }
  const visit = (a) => {
    const u = usage.get(a.session_id)
    if (u) { total.in += u.in; total.out += u.out; total.cost += u.cost }
    for (const c of agents) if (c.parent_id === a.id) visit(c)
  }
  const root = agents.find((a) => a.id === id)
  if (root) visit(root)
  return total
}

// ---------------------------------------------------------------------------------------------
// The tree

const renderTree = () => {
  const showAll = $("show-all").checked
  const visible = agents.filter((a) => showAll || a.state !== "terminated")
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
      const step = a.state === "busy" || a.state === "waiting"
        ? [since ? elapsed(since) : "", steps.get(a.session_id) || ""].filter(Boolean).join(" · ")
        : ""
      const kids = byParent.get(a.id)
      const sub = kids ? subtreeUsage(a.id) : null
      const own = usage.get(a.session_id)
      return el("li", { role: "treeitem", "data-name": a.name, "data-id": a.id },
        el("button", { class: "agent", type: "button", "aria-selected": String(selected === a.id), onclick: () => select(a.id) },
          el("span", { class: "name", text: a.name }),
          el("span", { class: "state state-" + a.state, text: a.state }),
          step ? el("span", { class: "step", text: step }) : null,
          own || sub ? el("span", { class: "usage", text: fmtUsage(own) + (sub && sub.in + sub.out > 0 ? " (subtree " + fmtUsage(sub) + ")" : "") }) : null),
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
    $("agent-state").textContent = cur.state
    $("agent-state").className = "badge state-" + cur.state
    $("terminate").hidden = cur.state === "terminated"
    $("agent-usage").textContent = fmtUsage(usage.get(cur.session_id))
  }
}

let refreshTimer = null
const refresh = () => {
  if (refreshTimer !== null) return
  refreshTimer = setTimeout(async () => {
    refreshTimer = null
    try {
      agents = (await api("GET", "/v1/agents?all=1")).agents
      for (const a of agents) names.set(a.id, a.name)
      renderTree()
      for (const li of $("flow").children) labelFlow(li)
    } catch (e) {
      $("conn").textContent = "error: " + e.message
    }
  }, 80)
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
  const time = new Date(e.ts).toLocaleTimeString()
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
    case "usage": return item("usage", "usage", d.input_tokens + " in · " + d.output_tokens + " out · " + fmtCost(d.cost_usd))
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
    default: return null // session.created, message.delivered, suspend/restore: bookkeeping
  }
}

const select = (id) => {
  selected = id
  const a = agents.find((x) => x.id === id)
  $("agent-name").textContent = a ? a.name : id
  $("transcript").replaceChildren()
  if (stopTranscript) stopTranscript()
  const list = $("transcript")
  stopTranscript = follow("/v1/events?agent=" + encodeURIComponent(id), (name, e) => {
    if (name !== "message") return
    const node = entryFor(e)
    if (!node) return
    const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40
    list.append(node)
    if (atBottom) list.scrollTop = list.scrollHeight
  }, () => {})
  if (a && a.parent_id === null && a.state !== "terminated") $("send-to").value = a.id
  renderTree()
}

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
// The whole daemon's feed: tree changes, current steps, usage

// Every message between agents (and to/from USER), oldest first, the last FLOW_MAX kept. Each is
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
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40
  const target = d.recipient !== "USER" && d.recipient !== null ? d.recipient : d.sender
  const li = el("li", { "data-kind": d.kind },
    el("span", { class: "meta muted", text: new Date(e.ts).toLocaleTimeString() + " " }),
    el("a", { href: "#", class: "route", onclick: (ev) => { ev.preventDefault(); if (target !== "USER" && target !== "SYSTEM") select(target) } }),
    el("span", { class: "kind", text: " " + d.kind }),
    el("span", { class: "text", text: d.payload }))
  li.flowData = d
  labelFlow(li)
  list.append(li)
  while (list.children.length > FLOW_MAX) list.firstElementChild.remove()
  if (atBottom) list.scrollTop = list.scrollHeight
}

const onTreeEvent = (name, e) => {
  if (name === "live") { refresh(); return }
  if (name !== "message") return
  const s = e.session_id
  switch (e.event) {
    case "turn.start": busySince.set(s, Date.parse(e.ts)); steps.set(s, "thinking"); break
    case "tool_call.invoked": steps.set(s, "tool " + e.data.tool + (e.data.source === "provider" ? " (provider)" : "")); break
    case "tool_call.result": steps.set(s, "thinking"); break
    case "turn.complete": case "provider.error": busySince.delete(s); steps.delete(s); break
    case "message.enqueued": addFlow(e); break
    case "usage": {
      const u = usage.get(s) || { in: 0, out: 0, cost: 0 }
      usage.set(s, { in: u.in + e.data.input_tokens, out: u.out + e.data.output_tokens, cost: u.cost + e.data.cost_usd })
      break
    }
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
  setInterval(() => { if (agents.some((a) => a.state === "busy" || a.state === "waiting")) renderTree() }, 1000)
}

start()
