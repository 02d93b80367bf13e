// The substrat dashboard's entry module: plain ES modules, no framework, no build step
// (docs/http.md, "The dashboard"). One module per view — tree.js (agent tree), detail.js (the
// selected agent: transcript.js, timeline.js), inbox.js, budgets.js, swarm.js, feed.js (the live
// feed and the Messages list) — over lib.js (token, REST, DOM, SSE) and state.js (what several
// views read). This module starts them: the daemon's identity, the feed, the first fetches, timers.
import { onTreeEvent } from "/feed.js"
import { refreshSide } from "/inbox.js"
import { $, api, follow } from "/lib.js"
import { stateOf } from "/state.js"
import { refreshSwarm } from "/swarm.js"
import { agents, refresh, renderTree } from "/tree.js"

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
