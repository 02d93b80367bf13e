// The model forwarder against a sandboxed agent, with the REAL Claude Code binary (bwrap, network
// off), through the daemon and CLI (scenarios: forwarder-attacks.support.ts):
//   - side doors (batches, complete, files, models, case and %2f spellings, dot segments): each
//     gets a 403, the scripted upstream never sees one, each is a `forwarder.refused` in the log;
//   - a slow 100,000-token stream closed by the client after its first bytes is charged the
//     100,000 output tokens the upstream reports at its end (not the 1 of its first event);
//   - 20 parallel slow requests against a small USD budget: spending ends within the limit plus
//     one request's reservation (the rest wait, then are refused with a 400);
//   - kill -9 of the daemon while a request is in flight: after the restart the budget shows
//     that request charged at its reservation.
import { describe, expect, it } from "vitest"
import { doors, killMidRequest, parallelAgainstBudget, sideDoorsAndEarlyClose } from "./forwarder-attacks.support.js"
import { claudeMeterEnvKeys, daemonTestScope } from "./support.js"

const { ds, homes } = daemonTestScope(claudeMeterEnvKeys)

describe("the model forwarder against a sandboxed claude agent", () => {
  it("side doors get a 403 and never reach the upstream; an early close is charged the whole response", async () => {
    const r = await sideDoorsAndEarlyClose(homes, ds.track)
    expect(r.reachedUpstream).toEqual([])
    expect(r.codes).toEqual(doors.map(() => "403"))
    expect(r.refused).toEqual(doors.map(([m, p]) => [m, p]))
    expect(r.earlyOutput).toBe(100000)
  }, 240_000)

  it("20 parallel slow requests against a small budget spend at most the limit plus one reservation", async () => {
    const r = await parallelAgainstBudget(homes, ds.track)
    expect(r.maxReservation).toBeGreaterThan(0)
    expect(r.reached).toBeLessThan(20)
    expect(r.spent).toBeLessThanOrEqual(r.limit + r.maxReservation)
    expect(r.codes).toContain("400")
  }, 300_000)

  it("kill -9 with a request in flight: after the restart the budget shows it charged at its reservation", async () => {
    const r = await killMidRequest(homes, ds.track)
    expect(r.reserved).not.toBeNull()
    expect(r.reserved!.cost_usd).toBeGreaterThan(0)
    expect(r.used.cost_usd).toBeCloseTo(r.reserved!.cost_usd, 9)
    expect([r.used.input_tokens, r.used.output_tokens]).toEqual([r.reserved!.input_tokens, r.reserved!.output_tokens])
  }, 240_000)
})
