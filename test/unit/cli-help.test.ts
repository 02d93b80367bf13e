// The help pages of every command, rendered from the real command tree: written for people
// (a description for every flag, no type boilerplate, 1–3 examples, the full command path in
// USAGE), a top level that fits a screen, colours only when wanted, "did you mean" at the
// level of the typo, and what completion offers below the top level.
import { Effect } from "effect"
import { describe, expect, it, vi } from "vitest"
import { want } from "../../src/cli/Completion.js"
import { frontDoor } from "../../src/cli/Front.js"
import { renderHelp, unknownCommandMessage, unknownFlagMessage, wantsColor } from "../../src/cli/Help.js"
import { commandNamed, main, rootTree, treeFor } from "../../src/cli/main.js"
import { allNodes, resolve } from "../../src/cli/Tree.js"

const plain = { color: false, width: 100 }
const tree = await rootTree()
const nodes = allNodes(tree)
const boilerplate = /user-defined piece of text|true or false value|This setting is optional|One of the following|An integer/

describe("help pages", () => {
  it("covers the whole tree", () => {
    const paths = nodes.map((n) => n.path.join(" "))
    for (const p of ["substrat agent send", "substrat workspace delete", "substrat daemon start", "substrat config"]) expect(paths).toContain(p)
  })

  for (const node of nodes) {
    const path = node.path.join(" ")
    it(`${path}: summary, flag descriptions, 1–3 examples, full USAGE, no escapes`, () => {
      expect(node.summary.length, path).toBeGreaterThan(10)
      // A new command: Command.withDescription(describe("summary", { examples: [...] })) (src/cli/Help.ts).
      expect(node.examples.length, `${path} has no examples: describe it with describe() from src/cli/Help.ts`).toBeGreaterThanOrEqual(1)
      expect(node.examples.length, path).toBeLessThanOrEqual(3)
      const spellings = [path, ...node.aliases.map((a) => [...node.path.slice(0, -1), a].join(" "))]
      for (const e of node.examples) expect(spellings.some((p) => e.includes(p)), `${path}: ${e}`).toBe(true)
      for (const o of node.options) {
        expect(o.description.length, `${path} ${o.name}`).toBeGreaterThan(5)
        expect(o.description, `${path} ${o.name}`).not.toMatch(boilerplate)
      }
      for (const a of node.args) expect(a.description.length, `${path} ${a.name}`).toBeGreaterThan(5)
      const text = renderHelp(node, plain, "9.9.9")
      expect(text).toContain(`USAGE\n  ${path}`)
      expect(text).not.toMatch(boilerplate)
      expect(text).not.toContain("\x1b")
      expect(text).toContain(`EXAMPLES\n  ${node.examples[0]}`)
      for (const o of node.options) expect(text).toContain(o.name)
      if (node.children.length > 0) for (const c of node.children) expect(text).toMatch(new RegExp(`^  ${c.name}\\b`, "m"))
    })
  }

  it("repeatable flags are optional in USAGE (swarm start --languages, swarm agents --status)", () => {
    const usage = (path: string) => /USAGE\n {2}(.*)\n/.exec(renderHelp(nodes.find((n) => n.path.join(" ") === path)!, plain, "9.9.9"))?.[1]
    expect(usage("substrat swarm start")).toBe("substrat swarm start [flags] <path>")
    expect(usage("substrat swarm agents")).toBe("substrat swarm agents [flags]")
  })

  it("the top level fits a screen and links the configuration", () => {
    const text = renderHelp(tree, plain, "9.9.9")
    expect(text.split("\n").length).toBeLessThanOrEqual(40)
    expect(text).toMatch(/^substrat 9\.9\.9 — /)
    expect(text).toContain("substrat config")
    // Only the top-level commands, not the whole tree.
    expect(text).not.toContain("Send one message to an agent")
  })

  it("colours only on a terminal that wants them", () => {
    expect(wantsColor({ TERM: "xterm" }, true)).toBe(true)
    expect(wantsColor({ TERM: "xterm" }, false)).toBe(false)
    expect(wantsColor({ TERM: "xterm", NO_COLOR: "1" }, true)).toBe(false)
    expect(wantsColor({ TERM: "dumb" }, true)).toBe(false)
    expect(renderHelp(tree, { color: true, width: 100 }, "1")).toContain("\x1b[1mUSAGE\x1b[0m")
  })
})

describe("typos and aliases", () => {
  it("did you mean, at the level of the typo", () => {
    expect(unknownCommandMessage(tree, "agnet")).toBe("unknown command 'agnet' for 'substrat'; did you mean 'agent'? (see substrat --help)")
    const agent = resolve(tree, ["agent"]).node
    expect(unknownCommandMessage(agent, "crate")).toBe(
      "unknown command 'crate' for 'substrat agent'; did you mean 'create'? (see substrat agent --help)"
    )
    const send = resolve(tree, ["agent", "send"]).node
    expect(unknownFlagMessage(send, ["agent", "send", "--jsn", "a", "b"])).toBe(
      "unknown flag '--jsn' for 'substrat agent send'; did you mean '--json'? (see substrat agent send --help)"
    )
    // A value that looks like a flag is the option's value, not a flag.
    const create = resolve(tree, ["agent", "create"]).node
    expect(unknownFlagMessage(create, ["agent", "create", "--instructions", "-be brief"])).toBeUndefined()
    expect(frontDoor(tree, ["agent", "crate"], "1", plain)._tag).toBe("done")
  })

  it("ls and rm are rewritten to the full command names", () => {
    expect(frontDoor(tree, ["agent", "ls", "--json"], "1", plain)).toEqual({ _tag: "parse", args: ["agent", "list", "--json"], path: "substrat agent list" })
    expect(frontDoor(tree, ["workspace", "rm", "--force", "x"], "1", plain)).toMatchObject({ args: ["workspace", "delete", "--force", "x"] })
    expect(frontDoor(tree, ["agent", "rm", "alpha"], "1", plain)).toMatchObject({ args: ["agent", "terminate", "alpha"] })
    // A message that happens to be "ls" is not a command.
    expect(frontDoor(tree, ["agent", "send", "alpha", "ls"], "1", plain)).toMatchObject({ args: ["agent", "send", "alpha", "ls"] })
  })
})

describe("completion (what __complete offers)", () => {
  it("below the top level: the command's own flags, not only the global ones", () => {
    const w = want(tree, ["agent", "send", "--"])
    expect(w.want).toEqual({ _tag: "words", words: ["--home", "--json", "--notify", "--wait", "--timeout", "--help"] })
  })

  it("subcommands, daemon-backed arguments, option values", () => {
    expect(want(tree, ["agent", ""]).want).toMatchObject({ _tag: "words", words: expect.arrayContaining(["create", "send", "logs"]) })
    expect(want(tree, ["agent", "send", ""]).want).toEqual({ _tag: "dynamic", kind: "agent" })
    expect(want(tree, ["agent", "send", "alpha", ""]).want).toEqual({ _tag: "words", words: [] })
    expect(want(tree, ["workspace", "delete", "--force", ""]).want).toEqual({ _tag: "dynamic", kind: "workspace" })
    expect(want(tree, ["agent", "create", "--workspace", ""]).want).toEqual({ _tag: "dynamic", kind: "workspace" })
    expect(want(tree, ["agent", "list", "--home", ""]).want).toEqual({ _tag: "paths", dirsOnly: true })
    expect(want(tree, ["session", "resume", ""]).want).toEqual({ _tag: "dynamic", kind: "session" })
  })
})

describe("loading only the command the command line names", () => {
  it("finds the top-level command: the first word that is not a flag", () => {
    expect(commandNamed(["agent", "list"])).toBe("agent")
    expect(commandNamed(["--json", "workspace", "ls"])).toBe("workspace")
    expect(commandNamed(["inbox"])).toBe("inbox")
    // Help of the top level, completion, typos and words after `--` need the whole tree.
    for (const args of [[], ["--help"], ["--completions", "bash"], ["__complete", "agent", ""], ["agnet", "list"], ["--", "agent"], ["-", "agent"], ["constructor"]]) {
      expect(commandNamed(args), args.join(" ")).toBeUndefined()
    }
  })

  for (const child of tree.children) {
    it(`substrat ${child.name}: the same subtree as in the whole tree, alone`, async () => {
      const partial = await treeFor([child.name, "--json"])
      expect(partial.name).toBe(tree.name)
      expect(partial.children).toEqual([child])
    })
  }

  it("a command line @effect/cli refuses gets the whole tree's words (they name every top-level command)", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {})
    try {
      const code = await Effect.runPromise(main(["node", "substrat", "--json", "agent", "list"]))
      expect(code).toBe(2)
      const line = errors.mock.calls.map((c) => c.join(" ")).join("\n")
      expect(line).toContain("Invalid subcommand for substrat")
      for (const c of tree.children) expect(line).toContain(`'${c.name}'`)
    } finally {
      errors.mockRestore()
    }
  })
})
