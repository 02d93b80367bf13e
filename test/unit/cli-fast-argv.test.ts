// The fast path's command-line grammar (src/cli/fast/Argv.ts): what it sends for the lines it
// takes, and that every line @effect/cli could read another way goes to the full CLI
// (undefined). test/integration/cli-fast.test.ts checks the output against the full CLI.
import { describe, expect, it } from "vitest"
import { parse } from "../../src/cli/fast/Argv.js"

const request = (argv: ReadonlyArray<string>) => {
  const c = parse(argv)
  return c === undefined ? undefined : { method: c.method, params: c.params, home: c.home, repeatable: c.repeatable, stream: c.stream }
}

describe("fast path argv", () => {
  it("takes the request/response commands, flags in any position", () => {
    expect(request(["agent", "list"])).toEqual({ method: "agent.list", params: {}, home: undefined, repeatable: true, stream: false })
    expect(request(["agent", "list", "--json", "--home", "/h"])).toMatchObject({ method: "agent.list", home: "/h" })
    expect(request(["agent", "inspect", "--json", "alpha"])).toMatchObject({ method: "agent.inspect", params: { agent: "alpha" } })
    expect(request(["agent", "logs", "alpha"])).toMatchObject({ params: { agent: "alpha", follow: false }, stream: true })
    expect(request(["agent", "send", "alpha", "hello --json"])).toMatchObject({
      params: { agent: "alpha", text: "hello --json", sync: true },
      repeatable: false
    })
    expect(request(["agent", "send", "--notify", "alpha", "hi"])).toMatchObject({ params: { sync: false } })
    for (const [group, verb] of [["session", "list"], ["workspace", "list"], ["daemon", "status"]] as const) {
      expect(request([group, verb, "--json"])).toMatchObject({ method: `${group}.${verb}`, params: {} })
    }
  })

  it("renders --json as the daemon's result, indented", () => {
    expect(parse(["agent", "send", "a", "b", "--json"])!.render({ message_id: "m", agent_id: "a" })).toBe(
      "{\n  \"message_id\": \"m\",\n  \"agent_id\": \"a\"\n}"
    )
    expect(parse(["agent", "send", "a", "b"])!.render({ message_id: "m", agent_id: "a" })).toBe("sent m")
  })

  it("leaves every other or ambiguous line to the full CLI", () => {
    const others: ReadonlyArray<ReadonlyArray<string>> = [
      [],
      ["--version"],
      ["agent"],
      ["agent", "create"],
      ["agent", "attach", "a"],
      ["agent", "terminate", "a"],
      ["agent", "logs", "-f", "a"],
      ["agent", "logs", "a", "--follow"],
      ["agent", "logs", "a", "--json"],
      ["AGENT", "list"],
      ["agent", "LIST"],
      ["agent", "list", "--help"],
      ["agent", "list", "-h"],
      ["agent", "list", "--JSON"],
      ["agent", "list", "--json", "--json"],
      ["agent", "list", "--json", "yes"],
      ["agent", "list", "--json", "False"],
      ["agent", "list", "--json=true"],
      ["agent", "list", "--home=/h"],
      ["agent", "list", "--home"],
      ["agent", "list", "--home", ""],
      ["agent", "list", "--home", "--json"],
      ["agent", "list", "--home", "/a", "--home", "/b"],
      ["agent", "list", "extra"],
      ["agent", "inspect"],
      ["agent", "inspect", "a", "b"],
      ["agent", "inspect", ""],
      ["agent", "inspect", "x".repeat(257)],
      ["agent", "inspect", " -x"],
      ["agent", "send", "a"],
      ["agent", "send", "a", "-m"],
      ["agent", "send", "a", "hi", "--notify", "on"],
      ["agent", "send", "a", "x".repeat(64 * 1024)],
      ["session", "suspend", "00000000-0000-4000-8000-000000000000"],
      ["daemon", "run"],
      ["doctor"]
    ]
    for (const argv of others) expect(parse(argv), argv.join(" ")).toBeUndefined()
    expect(parse(["agent", "inspect", "x".repeat(256)])).toBeDefined()
  })
})
