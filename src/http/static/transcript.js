// The dashboard's transcript as people read it (docs/http.md, "The dashboard"): who said what,
// once — a turn's prompt without the daemon's message headers (the "raw prompts" toggle shows
// them), and the message that carries a turn's text (its answer to USER) folded into that turn's
// line; tool calls collapsed to one line each, their result on demand; search and a kind filter
// (messages / tool calls / usage / turns). A plain ES module: `mountTranscript` gets the page's
// helpers (app.js) and returns { take(e), reset() }.
import { clock, forPeople } from "/timeline.js"

const groupOf = (event) =>
  event === "message.enqueued" || event.startsWith("human.") || event === "message.timed_out" ? "messages"
    : event.startsWith("tool_call.") || event === "egress.request" ? "tools"
    : event === "usage" ? "usage"
    : event.startsWith("turn.") || event === "provider.error" ? "turns"
    : "other"

const shortJson = (v) => {
  const s = typeof v === "string" ? v : JSON.stringify(v)
  return s.length > 300 ? s.slice(0, 299) + "…" : s
}

export const mountTranscript = ({ el, entryFor, nameOf }) => {
  const list = document.getElementById("transcript")
  const search = document.getElementById("t-search")
  const kind = document.getElementById("t-kind")
  const raw = document.getElementById("t-raw")
  const count = document.getElementById("t-count")
  const calls = new Map() // call_id → the call's <li>
  const said = new Map() // session id → { li, text } of its last turn's text

  const visible = (li) => {
    if (kind.value !== "all" && li.dataset.group !== kind.value) return false
    const q = search.value.trim().toLowerCase()
    return q === "" || li.textContent.toLowerCase().includes(q)
  }
  const filtering = () => kind.value !== "all" || search.value.trim() !== ""
  const showCount = () => {
    if (!filtering()) { count.textContent = ""; return }
    let n = 0
    for (const li of list.children) if (!li.hidden) n++
    count.textContent = n + " of " + list.children.length
  }
  const applyAll = () => { for (const li of list.children) li.hidden = !visible(li); showCount() }
  const setPrompt = (li) => {
    const text = li.querySelector(".text")
    if (text) text.textContent = raw.checked ? li.rawPrompt : li.peoplePrompt
  }
  search.addEventListener("input", applyAll)
  kind.addEventListener("change", applyAll)
  raw.addEventListener("change", () => { for (const li of list.querySelectorAll('li[data-event="turn.start"]')) setPrompt(li); applyAll() })

  const callItem = (e) => {
    const d = e.data
    const li = el("li", { class: "entry tool call", "data-event": e.event, "data-call": d.call_id },
      el("details", {},
        el("summary", {},
          el("span", { class: "meta", text: clock(e.ts) + " · " + (d.source === "provider" ? "tool call · provider's own" : "tool call") + " " }),
          el("span", { class: "text", text: d.tool + "(" + shortJson(d.arguments) + ")" }),
          el("span", { class: "outcome muted", text: " …" })),
        el("pre", { class: "result", text: "(no result yet)" })))
    calls.set(d.call_id, li)
    return li
  }

  /** The <li> for event `e`, or null when it folded into an earlier line (or shows nothing). */
  const view = (e) => {
    const d = e.data
    switch (e.event) {
      case "turn.start": {
        const li = entryFor(e)
        if (li) { li.rawPrompt = d.prompt; li.peoplePrompt = forPeople(d.prompt); setPrompt(li) }
        return li
      }
      case "turn.complete": {
        const li = entryFor(e)
        if (li && d.response !== "") said.set(e.session_id, { li, text: d.response })
        return li
      }
      case "message.enqueued": {
        const s = said.get(e.session_id)
        if (s && d.sender !== "USER" && d.sender !== "SYSTEM" && d.payload !== "" && d.payload === s.text) {
          const meta = s.li.querySelector(".meta")
          meta.textContent += " → " + nameOf(d.recipient) + (d.progress ? " (progress)" : "")
          s.li.dataset.to = (s.li.dataset.to ? s.li.dataset.to + " " : "") + nameOf(d.recipient)
          return null
        }
        return entryFor(e)
      }
      case "tool_call.invoked": return callItem(e)
      case "tool_call.result": {
        const li = calls.get(d.call_id)
        if (!li) return entryFor(e)
        calls.delete(d.call_id)
        li.querySelector(".result").textContent = typeof d.result === "string" ? d.result : JSON.stringify(d.result, null, 2)
        li.querySelector(".outcome").textContent = d.is_error ? " → error" : " → done"
        if (d.is_error) li.classList.add("error")
        return null
      }
      default: return entryFor(e)
    }
  }

  const take = (e) => {
    const li = view(e)
    if (!li) { showCount(); return null }
    li.dataset.group = groupOf(e.event)
    li.hidden = !visible(li)
    return li
  }
  const reset = () => { calls.clear(); said.clear(); count.textContent = "" }
  return { take, reset, refresh: showCount }
}
