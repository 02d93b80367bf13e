// The human inbox (right pane; GET /v1/inbox, oldest first): questions to answer, spent budgets
// to raise or stop, queued spawns to cancel, answers to mark read, network requests to approve or dismiss. Each item's action posts to
// POST /v1/inbox/{id}/answer (or the budget route) and says what happened in its own output.
// `refreshSide` refetches the inbox and the budgets shown (budgets.js) together.
import { budgetForm, budgetTargets, budgetViews, renderBudgets, syncBudgetForms } from "/budgets.js"
import { select } from "/detail.js"
import { $, api, el } from "/lib.js"
import { clock } from "/timeline.js"
import { renderTree } from "/tree.js"

/** The items waiting for the human, oldest first. */
export let inboxItems = []

const kindLabel = { question: "question", budget: "budget spent", queued_spawn: "queued spawn", answer: "answer to you", egress: "network request" }

/** Agents the inbox says are parked: the owner of a spent budget and its subtree, an agent waiting for an answer. */
export const parkedFlags = (childrenOf) => {
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
export const actionForm = (label, fields, submit) => {
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

export const agentLink = (id, name) => el("a", { href: "#", class: "agent-link", text: name, onclick: (ev) => { ev.preventDefault(); select(id, name) } })

const inboxEntry = (item) => {
  const actions = item.kind === "question"
    ? answerForm(item, "Answer")
    : item.kind === "budget"
    ? el("div", { class: "budget-actions" },
      budgetForm(item.agent_id, "Raise budget"),
      oneWordAnswer(item, "Stop subtree", "stop", "Stop " + item.agent_name + " and its subtree?"))
    : item.kind === "answer"
    ? el("div", { class: "budget-actions" }, oneWordAnswer(item, "Mark read", "read", null))
    : item.kind === "egress"
    // A refused host: Approve (joins the workspace's allowlist) or Dismiss; a reached byte limit: Dismiss only.
    ? el("div", { class: "budget-actions" }, ...(item.answers || ["dismiss"]).filter((w) => w === "approve" || w === "dismiss").map((w) =>
      w === "approve" ? oneWordAnswer(item, "Approve", "approve", null) : oneWordAnswer(item, "Dismiss", "dismiss", null)))
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

let sideTimer = null
/** Refetch the inbox and the budgets shown (after events, after an action, and every 5 s). */
export const refreshSide = () => {
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

