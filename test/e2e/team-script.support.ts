// The team scenario's words and model script, without vitest: the `security` chaos experiment
// (scripts/chaos-security/forwarder.ts through acp-gemini.support.ts) imports them outside the
// test runner, where importing vitest throws. team.support.ts re-exports them with the checks.
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"

// The README's commands, word for word.
export const LEAD_INSTRUCTIONS = "You lead a small team. Spawn a 'coder' and a 'reviewer' and coordinate them."
export const TASK = "Add a --version flag to the CLI in /workspace and get it reviewed."
export const LEAD = "You lead a small team"
export const FILE_BYTES = "export const version = \"1.2.3\"\n"
export const FINAL = "Done: coder wrote version.ts, reviewer approved it."

/** Each agent's requests in this order (agents run concurrently, so only per agent). */
export const ORDER = [
  "lead-spawn-coder", "lead-spawn-reviewer", "lead-ask-coder", "lead-progress-1",
  "coder-write", "coder-done",
  "lead-ask-reviewer", "lead-progress-2",
  "reviewer-read", "reviewer-done",
  "lead-final"
]

type MessageUsage = NonNullable<Extract<ScriptedLlm.Reply, { readonly _tag: "Message" }>["usage"]>

/**
 * The team's script, every reply with `usage`. `write`: the coder's tool call writing
 * /workspace/version.ts; `read`: the reviewer's reading it. The reviewer's answer says whether
 * its read returned the coder's bytes.
 */
export const teamScript = (opts: {
  readonly usage: MessageUsage
  readonly write: ScriptedLlm.Reply
  readonly read: ScriptedLlm.Reply
}): Array<ScriptedLlm.ScriptEntry> => {
  let read = ""
  const withUsage = (r: ScriptedLlm.Reply): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage: opts.usage } : r)
  const e = (label: string, match: ScriptedLlm.Match, reply: ScriptedLlm.Reply): ScriptedLlm.ScriptEntry => ({ match, reply: withUsage(reply), label })
  return [
    // Rules keyed on the wake-up prompt first; the rest of lead's requests go in order.
    e("lead-final", { system: LEAD, lastUser: "Reply from reviewer" }, Reply.text(FINAL)),
    e("lead-ask-reviewer", { system: LEAD, lastUser: "Reply from coder" },
      Reply.toolCall("mcp__substrat__send_message", { recipient: "reviewer", text: "Review /workspace/version.ts.", sync: true })),
    e("lead-spawn-coder", { system: LEAD }, Reply.toolCall("mcp__substrat__spawn_agent", { name: "coder", instructions: "AGENT=coder You write code." })),
    e("lead-spawn-reviewer", { system: LEAD }, Reply.toolCall("mcp__substrat__spawn_agent", { name: "reviewer", instructions: "AGENT=reviewer You review code." })),
    e("lead-ask-coder", { system: LEAD },
      Reply.toolCall("mcp__substrat__send_message", { recipient: "coder", text: "Write /workspace/version.ts.", sync: true })),
    e("lead-progress-1", { system: LEAD }, Reply.text("Asked coder; waiting.")),
    e("lead-progress-2", { system: LEAD }, Reply.text("Asked reviewer; waiting.")),
    e("coder-write", { system: "AGENT=coder", lastUser: "Write /workspace/version.ts." }, opts.write),
    e("coder-done", { system: "AGENT=coder" }, Reply.text("Wrote /workspace/version.ts.")),
    e("reviewer-read", { system: "AGENT=reviewer", lastUser: "Review /workspace/version.ts." }, opts.read),
    {
      match: { system: "AGENT=reviewer", where: (r) => ((read = r.lastUser), true) },
      reply: {
        _tag: "Message",
        usage: opts.usage,
        get content() {
          return [{ type: "text" as const, text: `Approved. ${read.includes("version = \"1.2.3\"") ? "It sets 1.2.3." : "FILE NOT SEEN"}` }]
        }
      },
      label: "reviewer-done"
    }
  ]
}

/** The label of the reviewer's first request, which the endpoint holds until the daemon is dead. */
export const HELD = "reviewer-held"
