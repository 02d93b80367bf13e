// Activity's seed from recovery: rings a fold checkpoint kept arrive encoded and are decoded when
// first asked for (src/agent/Activity.ts); what `recentOf` returns is the rings as noted, a
// broadcast's unnamed peers filled in; noting more continues the decoded rings.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Activity, encodeRings, type RecentRings, RECENT_MESSAGES } from "../../src/agent/Activity.js"
import { newAgentId, newTurnId } from "../../src/domain/ids.js"
import { zeroUsage } from "../../src/domain/usage.js"

const rings: RecentRings = {
  turns: [{ turn_id: "t1", prompt: "do it", response: "done", error: null }],
  messages: [
    { direction: "in", peer: "boss", kind: "request", message_id: "m1", text: "please" },
    { direction: "out", peer: null, kind: "multicast", message_id: "m2", text: "team note" }
  ]
}

describe("Activity seed", () => {
  it.effect("encoded rings are decoded on first use, broadcast peers named, and continue as rings", () =>
    Effect.gen(function*() {
      const activity = yield* Activity
      const a = newAgentId()
      const b = newAgentId()
      const c = newAgentId()
      activity.seed(new Map(), new Map([
        [a, { _tag: "EncodedActivity", json: encodeRings(rings), broadcastPeers: "w2,w3" }],
        [b, { _tag: "EncodedActivity", json: "{\"turns\": [", broadcastPeers: "" }],
        [c, { _tag: "EncodedActivity", json: encodeRings({}), broadcastPeers: "" }]
      ]))
      const first = activity.recentOf(a)
      expect(first).toEqual({
        turns: rings.turns,
        messages: [
          { direction: "in", peer: "boss", kind: "request", message_id: "m1", text: "please" },
          { direction: "out", peer: "w2,w3", kind: "multicast", message_id: "m2", text: "team note" }
        ]
      })
      // Decoded once: the same value next time.
      expect(activity.recentOf(a)).toBe(first)
      // Damaged rings (a damaged checkpoint) read as no activity; empty ones as empty.
      expect(activity.recentOf(b)).toEqual({ turns: [], messages: [] })
      expect(activity.recentOf(c)).toEqual({ turns: [], messages: [] })

      for (let i = 0; i < RECENT_MESSAGES - 1; i++) {
        activity.noteMessage(a, { direction: "out", peer: "boss", kind: "notification", message_id: `n${i}`, text: "x" })
      }
      const t2 = newTurnId()
      activity.noteTurn(a, { turn_id: t2, prompt: "again", response: "ok", error: null, usage: zeroUsage })
      const after = activity.recentOf(a)
      expect(after.turns.map((t) => t.turn_id)).toEqual(["t1", t2])
      expect(after.messages.map((m) => `${m.message_id}:${m.peer}`)).toEqual([
        "m2:w2,w3",
        "n0:boss",
        "n1:boss",
        "n2:boss",
        "n3:boss"
      ])
      // An encoded seed noted into before it was asked for continues its rings too.
      const d = newAgentId()
      activity.seed(new Map(), new Map([[d, { _tag: "EncodedActivity", json: encodeRings(rings), broadcastPeers: "w9" }]]))
      activity.noteMessage(d, { direction: "in", peer: "USER", kind: "notification", message_id: "u1", text: "hi" })
      expect(activity.recentOf(d).messages.map((m) => `${m.message_id}:${m.peer}`)).toEqual(["m1:boss", "m2:w9", "u1:USER"])
      expect(activity.snapshot().activity.get(a)).toEqual(after)
    }).pipe(Effect.provide(Activity.Default)))
})
