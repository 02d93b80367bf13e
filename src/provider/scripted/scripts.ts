// Named scripts, picked with the provider string `scripted:<name>` (daemon, CLI, demo).
import type { ScriptBook } from "./Script.js"

/** Every agent echoes the first line of its prompt. */
export const echo: ScriptBook = { "*": { steps: [], after: "echo" } }

/**
 * The demo: a root spawns two workers (alice, bob), asks each a question with a sync message,
 * and answers USER once both replies are in (the texts before are progress). alice broadcasts to her team (bob sees it in
 * his inbox); bob checks his inbox, then answers.
 */
export const demo: ScriptBook = {
  "*": {
    steps: [
      {
        tools: [
          { tool: "spawn_agent", args: { name: "alice", instructions: "You research.", role: "worker" } },
          { tool: "spawn_agent", args: { name: "bob", instructions: "You review.", role: "worker" } },
          { tool: "send_message", args: { recipient: "alice", text: "What should we build first?", sync: true } },
          { tool: "send_message", args: { recipient: "bob", text: "What could go wrong?", sync: true } }
        ],
        text: "I spawned alice and bob and asked each of them a question; their replies come next."
      },
      { text: "Noted the first reply; waiting for the other one." },
      { text: "Both workers answered; the team is done." }
    ],
    after: "echo"
  },
  alice: {
    steps: [{
      tools: [{ tool: "broadcast", args: { text: "alice here: I am starting on the parser." } }],
      text: "Build the parser first."
    }],
    after: "echo"
  },
  bob: {
    steps: [{ tools: [{ tool: "check_inbox", args: {} }], text: "The parser may choke on unicode." }],
    after: "echo"
  }
}

export const namedScripts: Readonly<Record<string, ScriptBook>> = { echo, demo }
