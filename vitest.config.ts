import { defineConfig } from "vitest/config"
import { missingTools, plan, testFiles } from "./scripts/system-tools.js"

// Test files that need a system tool this machine lacks (bwrap, git, socat, chromium; declared
// with `// requires: …`) are left out with one line saying so — an error instead under
// SUBSTRAT_REQUIRE_TOOLS=1 (.ci/run). scripts/system-tools.ts (pretest) installs them when it can.
const skipped = plan(testFiles("test"), missingTools(), process.env.SUBSTRAT_REQUIRE_TOOLS === "1")
// (This file is evaluated once per project too: say it once.)
const said = globalThis as { substratSkipSaid?: boolean }
if (skipped.line !== undefined && said.substratSkipSaid !== true) {
  said.substratSkipSaid = true
  console.warn(skipped.line)
}

// Two projects, run one after the other (sequence.groupOrder), never more than two workers:
//   shared   — files that leave no global state behind (process.env, cwd, timers, listeners):
//              worker threads that keep their loaded modules from file to file, so Effect and
//              the sources are evaluated once per worker instead of once per file;
//   isolated — everything else, each file in a fresh process (forks). Integration suites spawn
//              real processes and sandboxes; two cores.
const shared = [
  "test/unit/**/*.test.ts",
  // In-process integration files (services on real files, scripted providers, sandboxes): none
  // sets process.env, changes the cwd, or reads the pids of other work in its process.
  "test/integration/answer-rule.test.ts",
  "test/integration/bind-ignored.test.ts",
  "test/integration/durability-io-errors.test.ts",
  "test/integration/egress.test.ts",
  "test/integration/eventlog.test.ts",
  "test/integration/eventlog-line.test.ts",
  "test/integration/forwarder-keepalive.test.ts",
  "test/integration/mcp-catalog.test.ts",
  "test/integration/mcp-server.test.ts",
  "test/integration/meter-forwarder.test.ts",
  "test/integration/orchestration.test.ts",
  "test/integration/orchestration-lifecycle.test.ts",
  "test/integration/orchestration-messaging.test.ts",
  "test/integration/orchestration-timeouts.test.ts",
  "test/integration/orchestration-turns.test.ts",
  "test/integration/provider-acp-qwen.test.ts",
  "test/integration/provider-claude-cost.test.ts",
  "test/integration/provider-decoders.test.ts",
  "test/integration/provider-home-links.test.ts",
  "test/integration/provider-openai.test.ts",
  "test/integration/recovery.test.ts",
  "test/integration/recovery-activity.test.ts",
  "test/integration/recovery-checkpoint.test.ts",
  "test/integration/recovery-read.test.ts",
  "test/integration/sandbox-host-root.test.ts",
  "test/integration/sandbox-layers.test.ts",
  "test/integration/scripted-llm.test.ts",
  "test/integration/sessionstore.test.ts",
  "test/integration/spawn-queue.test.ts",
  "test/integration/tracing-providers.test.ts",
  "test/integration/transcript-names.test.ts",
  "test/integration/workspace.test.ts",
  "test/integration/workspace-repo.test.ts",
  "test/integration/workspace-spawn.test.ts",
  // In-process suites with real provider binaries, crash loops and fuzzers.
  "test/integration/agent-socket.test.ts",
  "test/integration/eventlog-crash.test.ts",
  "test/integration/provider-acp.test.ts",
  "test/integration/provider-claude.test.ts",
  "test/integration/provider-cli.test.ts",
  "test/integration/provider-tools.test.ts",
  "test/integration/quotas.test.ts",
  "test/integration/sandbox-limits.test.ts",
  "test/integration/sessionstore-crash.test.ts",
  "test/integration/swarm-discovery.test.ts",
  "test/stress/crash-fuzz.test.ts",
  "test/stress/lifecycle.test.ts",
  "test/e2e/claude-offline.test.ts",
  "test/e2e/codex-offline.test.ts"
]

// Longer real-agent scenarios with a script of their own (docs/testing.md "Test profiles"), left
// out of `npm test`: the team of the Claude Code and Codex ACP adapters (`npm run
// test:acp-adapters`, i.e. SUBSTRAT_TEST_ACP_ADAPTERS=1). Their single-agent check
// (test/integration/provider-acp-adapters.test.ts) stays in the suite.
const profiles = process.env.SUBSTRAT_TEST_ACP_ADAPTERS === "1" ? [] : ["test/e2e/acp-adapters.test.ts"]

export default defineConfig({
  test: {
    exclude: ["**/node_modules/**", ...skipped.skip, ...profiles],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    poolOptions: {
      threads: { maxThreads: 2, minThreads: 1, isolate: false },
      forks: { maxForks: 2, minForks: 1 }
    },
    reporters: ["default"],
    // Console output (in-process daemons' logs, tests' own notes) is kept per test and printed
    // only for a test that failed; child processes write to files in their homes.
    silent: "passed-only",
    projects: [
      { extends: true, test: { name: "shared", include: shared, pool: "threads", sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: "isolated", include: ["test/**/*.test.ts"], exclude: shared, pool: "forks", sequence: { groupOrder: 1 } } }
    ]
  }
})
