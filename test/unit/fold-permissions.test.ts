// Recovery's fold keeps an ACP agent's permission questions of its unfinished turn (the ones
// after its last `turn.complete`), with the human's answers: the acp provider's re-run turn finds
// them there (src/provider/acp/Asks.ts) instead of reading the log again. A checkpoint carries them.
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { FoldState } from "../../src/recovery/Checkpoint.js"
import { SessionFold } from "../../src/recovery/Fold.js"
import { sid } from "../support/logs.js"

const TS = "2026-01-01T00:00:00.000Z"
const TURN = "20000000-0000-4000-8000-000000000001"
const TURN2 = "20000000-0000-4000-8000-000000000002"
const entry = (event: string, data: unknown) => ({ ts: TS, event, data, session_id: sid(1) })
const asked = (item_id: string, key: string) => entry("permission.asked", { item_id, key, question: `q ${item_id}` })
const answered = (item_id: string, choice: string) => entry("permission.answered", { item_id, choice })

const fold = (entries: ReadonlyArray<unknown>, from?: SessionFold) => {
  const f = from ?? new SessionFold(sid(1), "events.jsonl")
  for (const e of entries) f.entry(e)
  return f
}

describe("the fold's permission questions (SessionLog.permissions)", () => {
  it("keeps the questions after the last turn.complete, each with its answer or null", () => {
    const log = fold([
      entry("turn.start", { turn_id: TURN, prompt: "p1" }),
      asked("i1", "k1"),
      answered("i1", "allow"),
      entry("turn.complete", { turn_id: TURN, response: "done" }),
      entry("turn.start", { turn_id: TURN2, prompt: "p2" }),
      asked("i2", "k2"),
      asked("i3", "k3"),
      answered("i3", "reject"),
      // An answer to a question of an ended turn changes nothing.
      answered("i1", "allow-always")
    ]).finish()
    expect(log.corrupt).toBeNull()
    expect(log.permissions).toEqual([
      { item_id: "i2", key: "k2", choice: null },
      { item_id: "i3", key: "k3", choice: "reject" }
    ])
  })

  it("has none once the turn completes", () => {
    const log = fold([
      entry("turn.start", { turn_id: TURN, prompt: "p" }),
      asked("i1", "k1"),
      entry("turn.complete", { turn_id: TURN, response: "done" })
    ]).finish()
    expect(log.permissions).toEqual([])
  })

  it("a checkpoint's state carries them: folding on from it gives what folding the whole log gives", () => {
    const head = [entry("turn.start", { turn_id: TURN, prompt: "p" }), asked("i1", "k1"), asked("i2", "k2")]
    const tail = [answered("i1", "allow-always")]
    const whole = fold([...head, ...tail]).finish()
    const first = fold(head)
    const state = Schema.decodeUnknownSync(FoldState)(JSON.parse(JSON.stringify(Schema.encodeSync(FoldState)(first.state()))))
    const resumed = fold(tail, new SessionFold(sid(1), "events.jsonl", { lines: first.folded, state })).finish()
    expect(whole.permissions).toEqual([{ item_id: "i1", key: "k1", choice: "allow-always" }, { item_id: "i2", key: "k2", choice: null }])
    expect(resumed.permissions).toEqual(whole.permissions)
    // Folding on did not change the checkpoint's own state.
    expect(first.finish().permissions).toEqual([{ item_id: "i1", key: "k1", choice: null }, { item_id: "i2", key: "k2", choice: null }])
  })
})
