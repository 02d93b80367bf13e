// The dashboard's timeline of one tree (docs/http.md, "The dashboard"): one lane per agent, its
// turns as bars (start, end, state: running / complete / failed), and marks on the lanes for tool
// calls, messages, model requests (tokens and $ on hover) and questions to the human. It follows
// the tree's event feed (GET /v1/events?tree=<root>): the backlog draws the past, new events draw
// live, and running bars grow each second. Zoom: − / + / fit. A plain ES module: `mountTimeline`
// gets the page's helpers (app.js) and returns { open(rootId), close() }.

/** HH:MM:SS of an ISO time, as the CLI prints it (24 h, the time as logged). */
export const clock = (ts) => (typeof ts === "string" && ts.length >= 19 ? ts.slice(11, 19) : String(ts))

/** A prompt as people read it: the daemon's message headers shortened to their sender (Prompt.ts's forPeople). */
export const forPeople = (prompt) =>
  String(prompt)
    .replace(/(^|\n)Message from (\S+) \(message [0-9a-f-]+, reply expected\):\n/g, "$1$2: ")
    .replace(/(^|\n)Message from (\S+) \(message [0-9a-f-]+\):\n/g, "$1$2: ")
    .replace(/(^|\n)Broadcast from (\S+) \(message [0-9a-f-]+\):\n/g, "$1$2 (broadcast): ")
    .replace(/(^|\n)Late reply from (\S+) \(to message [0-9a-f?-]+, after it timed out\): /g, "$1$2 (late reply): ")
    .replace(/(^|\n)Reply from (\S+) \(to message [0-9a-f?-]+\): /g, "$1$2 (reply): ")

const clip = (s, n = 160) => {
  const one = String(s).replace(/\s+/g, " ").trim()
  return one.length <= n ? one : one.slice(0, n - 1) + "…"
}
const fmtCost = (c) => "$" + Number(c || 0).toFixed(c < 0.01 ? 4 : 2)

export const mountTimeline = ({ el, follow, nameOf }) => {
  const box = document.getElementById("timeline")
  const lanesEl = el("div", { class: "lanes", role: "list", "aria-label": "Agents of the tree" })
  const scale = el("span", { class: "tl-scale muted" })
  const zoom = (f) => () => { pxPerSec = Math.min(2000, Math.max(0.05, pxPerSec * f)); layout() }
  const bar = el("div", { class: "tl-bar" },
    el("button", { type: "button", id: "tl-out", "aria-label": "Zoom out", text: "−", onclick: zoom(0.5) }),
    el("button", { type: "button", id: "tl-in", "aria-label": "Zoom in", text: "+", onclick: zoom(2) }),
    el("button", { type: "button", id: "tl-fit", text: "fit", onclick: () => fit() }),
    scale)
  box.replaceChildren(bar, lanesEl)

  let stop = null
  let pxPerSec = 20
  let fitted = false
  let t0 = null
  let tEnd = 0
  const lanes = new Map() // session_id → { li, track }
  const turns = new Map() // turn_id → { node, start, end }
  const marks = [] // { node, at }

  const LABEL = 110 // px of a lane's name column
  const x = (ms) => ((ms - t0) / 1000) * pxPerSec

  const layout = () => {
    if (t0 === null) return
    const now = Date.now()
    for (const t of turns.values()) {
      const end = t.end ?? Math.max(now, t.start)
      t.node.style.left = x(t.start) + "px"
      t.node.style.width = Math.max(3, x(end) - x(t.start)) + "px"
    }
    for (const m of marks) m.node.style.left = x(m.at) + "px"
    const width = Math.max(x(Math.max(tEnd, now)) + 40, 200)
    for (const l of lanes.values()) l.track.style.width = width + "px"
    scale.textContent = pxPerSec >= 1 ? Math.round(pxPerSec) + " px/s" : Math.round(60 * pxPerSec) + " px/min"
  }

  const fit = () => {
    if (t0 === null) return
    const span = Math.max(1, (Math.max(tEnd, Date.now()) - t0) / 1000)
    const room = Math.max(200, box.clientWidth - LABEL - 60)
    pxPerSec = room / span
    layout()
  }

  const lane = (session, name) => {
    let l = lanes.get(session)
    if (l === undefined) {
      const track = el("div", { class: "track" })
      const li = el("div", { class: "lane", role: "listitem", "data-session": session, "data-name": name || session.slice(0, 8) },
        el("div", { class: "lane-name", text: name || session.slice(0, 8), title: name || session }), track)
      l = { li, track }
      lanes.set(session, l)
      lanesEl.append(li)
    } else if (name) {
      l.li.dataset.name = name
      l.li.firstElementChild.textContent = name
    }
    return l
  }

  const at = (e) => {
    const ms = Date.parse(e.ts)
    if (t0 === null) t0 = ms
    if (ms > tEnd) tEnd = ms
    return ms
  }

  const mark = (e, kind, title) => {
    const ms = at(e)
    const node = el("span", { class: "mark " + kind, "data-kind": kind, "data-at": e.ts, title: clock(e.ts) + " " + title })
    lane(e.session_id).track.append(node)
    marks.push({ node, at: ms })
  }

  const onEvent = (name, e) => {
    if (name !== "message") return
    const d = e.data
    switch (e.event) {
      case "agent.created": at(e); lane(e.session_id, d.name); break
      case "turn.start": {
        const start = at(e)
        const node = el("div", {
          class: "turn running",
          "data-turn": d.turn_id,
          "data-state": "running",
          "data-start": e.ts,
          title: clock(e.ts) + " ▶ " + clip(forPeople(d.prompt))
        })
        lane(e.session_id).track.append(node)
        turns.set(d.turn_id, { node, start, end: null })
        break
      }
      case "turn.complete":
      case "provider.error": {
        const t = d.turn_id ? turns.get(d.turn_id) : undefined
        if (t === undefined) { mark(e, "error", e.event === "provider.error" ? "! " + d.reason + ": " + clip(d.message) : "turn done"); break }
        t.end = at(e)
        const state = e.event === "turn.complete" ? "complete" : "failed"
        t.node.className = "turn " + state
        t.node.dataset.state = state
        t.node.dataset.end = e.ts
        t.node.title += "\n" + clock(e.ts) + (state === "complete" ? " ■ " + clip(d.response) : " ! " + d.reason + ": " + clip(d.message))
        break
      }
      case "tool_call.invoked": mark(e, "tool", "⚙ " + d.tool + " " + clip(JSON.stringify(d.arguments), 120)); break
      case "message.enqueued":
        mark(e, "message", (d.sender !== "USER" && d.sender !== "SYSTEM" && d.sender_name ? d.sender_name : nameOf(d.sender)) + " → " + nameOf(d.recipient) + " (" + d.kind + "): " + clip(d.payload))
        break
      case "usage":
        if (d.source === "request") {
          mark(e, "request", "model request" + (d.model ? " (" + d.model + ")" : "") + ": " + d.input_tokens + " in · " + d.output_tokens + " out" +
            (d.cache_read_tokens || d.cache_write_tokens ? " · cache " + (d.cache_read_tokens || 0) + " read, " + (d.cache_write_tokens || 0) + " written" : "") +
            " · " + fmtCost(d.cost_usd))
        }
        break
      case "human.asked": mark(e, "human", "? asks the human: " + clip(d.question)); break
      case "budget.breached": mark(e, "error", "! " + d.reason); break
      default: return
    }
    if (!fitted && t0 !== null) { fitted = true; fit() } else layout()
  }

  let ticker = null
  const close = () => {
    if (stop) stop()
    stop = null
    if (ticker) clearInterval(ticker)
    ticker = null
  }
  const open = (rootId) => {
    close()
    lanes.clear(); turns.clear(); marks.length = 0
    lanesEl.replaceChildren()
    t0 = null; tEnd = 0; fitted = false
    box.dataset.root = rootId
    stop = follow("/v1/events?tree=" + encodeURIComponent(rootId), onEvent, () => {})
    ticker = setInterval(() => { if ([...turns.values()].some((t) => t.end === null)) layout() }, 1000)
  }
  return { open, close }
}
