// Prompt text (pure): how messages read in an agent's prompt, and the note a root gets when a
// crash interrupted its turn. Everything an agent reads from the daemon is worded here.
import type { MessageEnvelope } from "../domain/message.js"

/** The name a message is from, as prompts and `check_inbox` show it. */
export const senderName = (env: MessageEnvelope): string => env.sender_name ?? String(env.sender)

/** How a message reads in a prompt. */
export const formatMessage = (env: MessageEnvelope): string => {
  const from = senderName(env)
  switch (env.kind) {
    case "response":
      if (env.timed_out === true) {
        return `Notice: ${env.payload}. You are no longer waiting for it; a late reply would still arrive as a message.`
      }
      if (env.sender === "SYSTEM") return `Error from SYSTEM (about your message ${env.reply_to ?? "?"}): ${env.payload}`
      if (env.late === true) {
        return `Late reply from ${from} (to message ${env.reply_to ?? "?"}, after it timed out): ${env.payload}`
      }
      return `Reply from ${from} (to message ${env.reply_to ?? "?"}): ${env.payload}`
    case "request":
      return `Message from ${from} (message ${env.id}, reply expected):\n${env.payload}`
    case "multicast":
      return `Broadcast from ${from} (message ${env.id}):\n${env.payload}`
    case "notification":
      return `Message from ${from} (message ${env.id}):\n${env.payload}`
  }
}

export { forPeople } from "../domain/forPeople.js"

/** The prompt a root gets when the crash interrupted its turn (docs/recovery.md, "Resume"). */
export const recoveryPrompt = (args: {
  readonly prompt: string
  readonly consumedMessages: boolean
  readonly children: ReadonlyArray<string>
}): string => {
  const lines = [
    "[substrat] The Substrat daemon stopped unexpectedly (a crash, or a shutdown that could not wait for your turn) while you were working and has been restarted.",
    "Your previous turn was interrupted: its output and any tool calls not yet answered were lost."
  ]
  if (args.consumedMessages) {
    lines.push("The messages that turn was handling are queued for you again and follow this note.")
  } else {
    lines.push("That turn's prompt was:", "<<<", args.prompt, ">>>")
  }
  if (args.children.length > 0) {
    lines.push(
      `Your sub-agents (${args.children.join(", ")}) were restored. They stay idle unless they were answering a message; message them to continue.`
    )
  }
  lines.push(
    "A message may arrive twice after a crash. Check the current state of your work (e.g. files in your workspace) before repeating anything with side effects, then continue."
  )
  return lines.join("\n")
}


/** Put first in a turn re-run after its budget ran out mid-way and the human raised it. */
export const pausedNote = (why: string): string =>
  `[substrat] Your previous turn was paused when a budget ran out (${why}) and runs again now that the human raised it, with the same messages (below). ` +
  "Its output was lost, but what its tool calls did stays done (agents spawned, messages sent, files written): check before repeating anything."

/** The human's answer to an agent's `ask_human` question, as the agent reads it. */
export const answerPrompt = (itemId: string, question: string, answer: string): string =>
  `Answer from the human to your question (inbox item ${itemId}: "${question.length > 200 ? `${question.slice(0, 199)}…` : question}"):\n${answer}`
