// The swarm view's source pane: the selected node's lines of its file, numbered, as text
// (GET /swarm/agents/{id}/source; its markup is never markup).
import { $, api, el } from "/lib.js"

// The selected node's lines of its file (GET /swarm/agents/{id}/source), numbered, as text. Fetched
// again at every refresh of the swarm while the node stays selected (a save of its file wakes its
// agent, whose events refresh the swarm): redrawn only when what it shows changed.
let sourceFor = null
let sourceShown = null // "path:first_line\ntext" of what the pane shows
export const showSource = async (node, again = false) => {
  if (!again) {
    sourceFor = node.key
    sourceShown = null
    $("node-source-box").hidden = node.kind === "dir"
    $("node-source").replaceChildren()
    $("node-source-where").textContent = ""
  }
  if (node.kind === "dir") return
  if (node.status === "orphaned") { $("node-source-where").textContent = "(its node is gone from the code)"; return }
  try {
    const s = await api("GET", "/swarm/agents/" + encodeURIComponent(node.node_id) + "/source")
    if (sourceFor !== node.key) return
    const seen = s.path + ":" + s.first_line + "\n" + s.text
    if (seen === sourceShown) return
    sourceShown = seen
    const lines = s.text.split("\n")
    $("node-source-where").textContent = s.path + ":" + s.first_line + "–" + (s.first_line + lines.length - 1)
    $("node-source").replaceChildren(...lines.map((line, i) =>
      el("div", { class: "src-line", "data-line": String(s.first_line + i) },
        el("span", { class: "ln", text: String(s.first_line + i) }),
        el("span", { class: "src", text: line }))))
  } catch (e) {
    if (sourceFor === node.key && !again) $("node-source-where").textContent = "not shown: " + e.message
  }
}

/** The selected node's source again (`node`: the selected node, if any), when the bar still shows it. */
export const refreshSource = (node) => {
  if (node && $("node-bar").dataset.node === node.key && sourceFor === node.key) void showSource(node, true)
}
