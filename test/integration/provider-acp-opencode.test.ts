// requires: bwrap
// The real opencode (`opencode-ai`, `opencode acp`, a native binary) as `acp:opencode`
// (acp-real.support.ts; the preset's inline configuration names one OpenAI-compatible provider at
// the forwarded base URL): a text turn, then a turn that calls one of Substrat's tools
// (`substrat_check_inbox`) over MCP. No title request: the preset turns opencode's title agent off.
import { describe, it } from "@effect/vitest"
import { twoTurnsWithATool } from "./acp-real.support.js"

describe("acp:opencode (real opencode, bwrap, network off, scripted endpoint)", () => {
  it.scoped("answers a turn, and calls a substrat tool through the MCP server of session/new", () =>
    twoTurnsWithATool("opencode", "substrat_check_inbox"), { timeout: 240_000 })
})
