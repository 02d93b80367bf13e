// Plan one codex turn for an agent directory as the daemon would before starting its sandbox
// (CODEX_HOME and the model catalog written into the home), without running it: for the attacks
// on what the daemon writes into an agent's home (tests and the security chaos experiment).
import { Effect } from "effect"
import type { SessionId } from "../domain/ids.js"
import type { AgentSandbox } from "../provider/cli/AgentSandbox.js"
import { resolveBinary } from "../provider/cli/Binary.js"
import { defaultMcpServer } from "../provider/cli/CliSettings.js"
import { zeroTokens } from "../provider/cli/CliProvider.js"
import { codexDriver } from "../provider/codex/CodexProvider.js"
import type { ProviderContext } from "../provider/Provider.js"

export const planCodexTurn = (agent: AgentSandbox, installDir = process.cwd()) =>
  Effect.gen(function*() {
    const bin = yield* resolveBinary("codex")
    return yield* codexDriver.plan({
      prompt: "hi",
      resumeId: null,
      instructions: "x",
      costBase: 0,
      tokenBase: zeroTokens,
      agent,
      bin,
      settings: {
        installDir,
        nodePath: process.execPath,
        mcpServer: defaultMcpServer(installDir),
        binaries: {},
        models: {},
        anthropicSocket: null,
        openaiSocket: "/nonexistent/openai.sock",
        env: {}
      },
      ctx: { session_id: "plan" as SessionId, agent_name: "plan" } as unknown as ProviderContext,
      owner: undefined
    })
  })
