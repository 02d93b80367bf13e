// Budgets (right pane; GET/POST /v1/agents/{id}/budget): a card per live tree root and per agent
// that set a budget of its own — limit, spent, left (never negative), parked or spent — with a
// set/raise form. The inbox's "Raise budget" uses the same form. Refetched by inbox.js's refreshSide.
import { actionForm, agentLink } from "/inbox.js"
import { api, $, el, fmtCost } from "/lib.js"
import { agents } from "/tree.js"

export const budgetSessions = new Set() // sessions that logged a budget.set: their agents have budgets of their own
export const budgetViews = new Map() // agent id → BudgetView

export const limitKeys = [["usd", "USD"], ["tokens", "tokens"], ["turns", "turns"], ["time_s", "seconds"]]

/**
 * Set/raise form of an agent's budget: one number per limit, showing the limits in force (kept up
 * to date by syncBudgetForms until the user edits a field); only the fields the user edited are
 * sent (an emptied one removes its limit).
 */
export const budgetForm = (agentId, label) => {
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
export const syncBudgetForms = () => { for (const f of document.querySelectorAll("form[data-budget-of]")) syncBudgetForm(f) }

export const fmtLimit = (k, v) => (v === null ? "—" : k === "usd" ? fmtCost(v) : k === "time_s" ? Math.round(v) + "s" : String(Math.round(v * 100) / 100))
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
export const budgetTargets = () =>
  agents.filter((a) => a.state !== "terminated" && (a.parent_id === null || budgetSessions.has(a.session_id)))

export const renderBudgets = () => {
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
