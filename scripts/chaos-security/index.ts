// The `security` chaos experiment: every attack of every surface, one after another, each in its
// own temporary home, bounded in count and time, 127.0.0.1 and Unix sockets only.
import type { Attack, AttackResult } from "./attack.js"
import { attacks as cluster } from "./cluster.js"
import { attacks as egress } from "./egress.js"
import { attacks as forwarder } from "./forwarder.js"
import { attacks as http } from "./http.js"
import { attacks as quota } from "./quota.js"
import { attacks as repo } from "./repo.js"
import { attacks as repoQueue } from "./repo-queue.js"
import { attacks as sandbox } from "./sandbox.js"
import { attacks as spawner } from "./spawner.js"

export const allAttacks: ReadonlyArray<Attack> = [...http, ...sandbox, ...forwarder, ...quota, ...egress, ...repo, ...repoQueue, ...cluster, ...spawner]

export interface SecurityRun {
  readonly results: ReadonlyArray<{ readonly name: string; readonly result: AttackResult | "skipped" | { readonly error: string } }>
  readonly breached: number
}

export const runAttacks = async (attacks: ReadonlyArray<Attack>): Promise<SecurityRun> => {
  const isRoot = process.getuid?.() === 0
  const results: Array<SecurityRun["results"][number]> = []
  let breached = 0
  for (const a of attacks) {
    if (a.rootOnly === true && !isRoot) {
      results.push({ name: a.name, result: "skipped" })
      continue
    }
    try {
      const r = await a.run()
      if (r.breached) breached++
      results.push({ name: a.name, result: r })
    } catch (e) {
      // An attack that cannot run proves nothing: counted as a failure of the experiment.
      breached++
      results.push({ name: a.name, result: { error: e instanceof Error ? e.message : String(e) } })
    }
  }
  return { results, breached }
}
