// requires: bwrap, git
// The REAL opencode (`opencode-ai`, `opencode acp`, a native binary) as `acp:opencode` through the
// daemon and the CLI (acp.support.ts: bwrap, network off, the daemon's OpenAI forwarder to a
// scripted Chat Completions endpoint, the key only in the daemon): the team scenario.
import { describe, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type AcpAgent, acpEnvKeys, teamKilledWhileAsked } from "./acp.support.js"
import { daemonTestScope, withLlm } from "./support.js"
import { FILE_BYTES } from "./team.support.js"

const scope = daemonTestScope(acpEnvKeys)

/**
 * opencode names Substrat's tools `substrat_<tool>`; its own `write` and `read` take `filePath`.
 * Its permission request names no tool: the question gives the path and the call's kind.
 */
const opencode: AcpAgent = {
  preset: "opencode",
  model: "opencode-scripted",
  tool: (t) => `substrat_${t}`,
  write: Reply.toolCall("write", { filePath: "/workspace/version.ts", content: FILE_BYTES }),
  read: Reply.toolCall("read", { filePath: "/workspace/version.ts" }),
  asks: "/workspace/version.ts (edit)"
}

describe("acp:opencode, the real opencode (daemon + CLI, bwrap, network off, scripted endpoint)", () => {
  it("the team, killed -9 mid-turn: coder's write is asked in the inbox; the daemon dies while the question is open; after the restart the re-run turn asks the same item, its answer lets coder write once; reviewer reads it; `agent wait` prints lead's answer once; usage per request", () =>
    withLlm([], (llm) => teamKilledWhileAsked(opencode, scope, llm)), 420_000)
})
