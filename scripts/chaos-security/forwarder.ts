// Attacks on the forwarder surface, replayed by `npm run chaos -- --only security`: a sandboxed
// claude agent (real binary) curls its own model forwarder socket (test/e2e/forwarder-attacks.support.ts);
// a sandboxed Gemini CLI (acp:gemini) does the same to its Gemini API forwarder (test/e2e/acp-gemini.support.ts).
import { geminiDoors, geminiSideDoors } from "../../test/e2e/acp-gemini.support.js"
import { daemons } from "../../test/integration/daemon.support.js"
import { doors, killMidRequest, parallelAgainstBudget, sideDoorsAndEarlyClose } from "../../test/e2e/forwarder-attacks.support.js"
import { removeDir } from "../../test/support/tmp.js"
import type { Attack, AttackResult } from "./attack.js"

/** Run a scenario with its own daemons and homes, cleaned up after. */
const scenario = (f: (homes: Array<string>, track: (pid: number) => void) => Promise<AttackResult>) => async (): Promise<AttackResult> => {
  const owned = daemons()
  const homes: Array<string> = []
  try {
    return await f(homes, owned.track)
  } finally {
    await owned.killAll()
    for (const h of homes) removeDir(h)
  }
}

const sideDoors: Attack = {
  name: "22.6 forwarder side doors + 22.8 early close",
  run: scenario(async (homes, track) => {
    const r = await sideDoorsAndEarlyClose(homes, track)
    const passed = r.codes.filter((c) => c !== "403").length
    return {
      breached: r.reachedUpstream.length > 0 || passed > 0 || r.codes.length !== doors.length || r.earlyOutput !== 100000,
      detail: `${doors.length - passed} of ${doors.length} side doors refused (codes ${r.codes.join(" ")}), ${r.reachedUpstream.length} reached the upstream, ${r.refused.length} logged; an early-closed 100,000-token stream charged ${r.earlyOutput ?? "nothing"} output tokens`
    }
  })
}

const parallel: Attack = {
  name: "22.7 20 parallel requests against a $0.05 budget",
  run: scenario(async (homes, track) => {
    const r = await parallelAgainstBudget(homes, track)
    const bound = r.limit + r.maxReservation
    return {
      breached: r.maxReservation === 0 || r.spent > bound,
      detail: `${r.reached} of 20 reached the upstream, $${r.spent.toFixed(4)} spent against $${r.limit} (bound: limit + one reservation = $${bound.toFixed(4)})`
    }
  })
}

const killNine: Attack = {
  name: "22.7 kill -9 mid-request",
  run: scenario(async (homes, track) => {
    const r = await killMidRequest(homes, track)
    const ok = r.reserved !== null && r.reserved.cost_usd > 0 && Math.abs(r.used.cost_usd - r.reserved.cost_usd) < 1e-9
    return {
      breached: !ok,
      detail: `reservation $${r.reserved?.cost_usd.toFixed(4) ?? "none"}; after kill -9 and restart the budget shows $${r.used.cost_usd.toFixed(4)} used`
    }
  })
}

const geminiDoorsAttack: Attack = {
  name: "22.6 Gemini forwarder side doors, escaping model names, oversized bodies",
  run: scenario(async (homes, track) => {
    const r = await geminiSideDoors(homes, track)
    const expected = [...geminiDoors.map(() => "403"), "413", "413"]
    const others = r.reachedUpstream.filter((x) => !x.endsWith(" shell") && !x.endsWith(" done"))
    return {
      breached: others.length > 0 || r.keySeen || r.reserved !== 2 || r.codes.join(" ") !== expected.join(" "),
      detail: `${r.codes.filter((c) => c === "403").length} of ${geminiDoors.length} doors refused, oversized bodies ${r.codes.slice(-2).join(" ")} (codes ${r.codes.join(" ")}), ${others.length} other requests reached the upstream, ${r.refused.length} logged, ${r.reserved} reserved`
    }
  })
}

export const attacks: ReadonlyArray<Attack> = [sideDoors, parallel, killNine, geminiDoorsAttack]
