// A turn re-run after a crash keeps its trace: a real daemon exporting to an OTLP/HTTP receiver in
// this process; a user's message starts a slow scripted turn; the daemon is killed (SIGKILL) in
// the middle of it and started again. Recovery queues the interrupted turn again from the log, and
// its `turn` span is in the user's trace, below the same `message` span (USER → slow) — the W3C
// traceparent is durable in the logged envelope's `trace` field (docs/events.md).
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { daemons, isAlive, startDaemon, waitFor, waitQuiet } from "./daemon.support.js"
import { request, type Target } from "./http.support.js"
import { attr, exportedSoFar, type OtlpReceiver, type OtlpSpan, startReceiver } from "./otlp.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-otel-recovery-")
const home = join(dir, "home")
const unix: Target = { socketPath: join(home, "http.sock") }
let receiver: OtlpReceiver

// The first step is held on the file `go` (created after the restart), so the daemon is killed in
// it; the scripted provider re-runs an interrupted turn at the same step, which then answers.
const go = join(dir, "go")
const book = { slow: { steps: [{ text: "done slowly", wait_for: go }], after: "silent" } }

const start = async () => {
  process.env["SUBSTRAT_OTLP_ENDPOINT"] = receiver.endpoint
  try {
    const pid = await startDaemon(home)
    owned.track(pid)
    return pid
  } finally {
    delete process.env["SUBSTRAT_OTLP_ENDPOINT"]
  }
}

const logOf = (sid: string): ReadonlyArray<{ readonly event: string; readonly data: Record<string, unknown> }> =>
  fs.readFileSync(join(home, "agents", sid, "events.jsonl"), "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))

beforeAll(async () => {
  receiver = await startReceiver()
  fs.mkdirSync(join(home, "scripts"), { recursive: true })
  fs.writeFileSync(join(home, "scripts", "slow.json"), JSON.stringify(book))
})

afterAll(async () => {
  await owned.killAll()
  await receiver.close()
  removeDir(dir)
})

describe("tracing across a crash", () => {
  it("the turn re-run after kill -9 and a restart is in the user's trace, below the message that woke it", async () => {
    const spans = receiver.spans
    const first = await start()
    const created = await request(unix, "POST", "/v1/agents", { name: "slow", provider: "scripted:slow" })
    expect(created.status).toBe(201)
    const sid = created.json<{ session_id: string }>().session_id
    expect((await request(unix, "POST", "/v1/agents/slow/messages", { text: "Take your time.", wait: false })).status).toBeLessThan(300)
    // The request's spans are exported (every 2 s) while the turn sleeps; then the turn is cut.
    const byName = (name: string) => spans.filter((s) => s.name === name)
    const root = await waitFor("the user's request exported", () => byName("user.agent.send")[0], 15_000)
    const message = await waitFor("the message span exported", () => byName("message").find((m) => m.traceId === root.traceId), 15_000)
    expect(attr(message, "substrat.message.to")).toBe("slow")
    expect(logOf(sid).filter((e) => e.event === "turn.start").length).toBe(1)
    expect(byName("turn").length).toBe(0)
    // The logged envelope carries the message span's traceparent.
    const enqueued = logOf(sid).find((e) => e.event === "message.enqueued")
    expect(enqueued?.data["trace"]).toBe(`00-${root.traceId}-${message.spanId}-01`)
    process.kill(first, "SIGKILL")
    await waitFor("the daemon gone", () => (isAlive(first) ? undefined : true), 10_000)

    await start()
    fs.writeFileSync(go, "")
    await waitQuiet(home)
    const turns = await waitFor("the re-run turn exported", () => {
      const t = byName("turn").filter((s) => attr(s, "gen_ai.agent.name") === "slow")
      return t.length > 0 ? t : undefined
    }, 30_000)
    // Everything ended so far has arrived before counting.
    await exportedSoFar(receiver, unix)
    const slow: ReadonlyArray<OtlpSpan> = byName("turn").filter((s) => attr(s, "gen_ai.agent.name") === "slow")
    expect(slow.length).toBe(turns.length)
    expect(slow.length).toBe(1)
    const rerun = slow[0]!
    expect(rerun.traceId).toBe(root.traceId)
    expect(rerun.parentSpanId).toBe(message.spanId)
    expect(attr(rerun, "messaging.message.id")).toBe(attr(message, "messaging.message.id"))
    // It really is the re-run: the log has the interrupted start and a second, completed turn.
    const log = logOf(sid)
    expect(log.filter((e) => e.event === "turn.start").length).toBe(2)
    expect(attr(rerun, "substrat.turn.id")).toBe(log.filter((e) => e.event === "turn.start").at(-1)!.data["turn_id"])
  }, 120_000)
})
