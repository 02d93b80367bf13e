// requires: bwrap
// The real Qwen Code (`@qwen-code/qwen-code`, `qwen --acp`) as `acp:qwen` (acp-real.support.ts):
// a text turn, then a turn that calls one of Substrat's tools (`mcp__substrat__check_inbox`) over MCP.
import { describe, it } from "@effect/vitest"
import { twoTurnsWithATool } from "./acp-real.support.js"

describe("acp:qwen (real Qwen Code, bwrap, network off, scripted endpoint)", () => {
  it.scoped("answers a turn, and calls a substrat tool through the MCP server of session/new", () =>
    twoTurnsWithATool("qwen", "mcp__substrat__check_inbox"), { timeout: 240_000 })
})
