import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"
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

// Two projects, run one after the other (sequence.groupOrder):
//   shared   — files that leave no global state behind (process.env, cwd, timers, listeners):
//              worker threads that keep their loaded modules from file to file, so Effect and
//              the sources are evaluated once per worker instead of once per file; two threads
//              (these files are CPU-bound);
//   isolated — everything else, each file in a fresh process (forks). Integration suites spawn
//              real processes and sandboxes and spend much of their time waiting on them (gated
//              turns, leases, agent CLIs starting in a sandbox): three forks on two cores keep
//              the cores busy while one file waits (docs/testing.md).
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

// The longest files of the `isolated` project, longest first (seconds of one run each, with
// their hooks, on a loaded machine). They start first: vitest orders the files of a fresh clone
// (no results cache) by size, largest first, which left short files with long waits (real agent
// CLIs started in a sandbox, whole-repository builds) to the end, one worker running them while
// the other had nothing left. A file missing here runs in vitest's own order after these.
const longest = [
  "test/e2e/acp-opencode.test.ts", // 160
  "test/e2e/acp-qwen.test.ts", // 85
  "test/integration/embedding-pack.test.ts", // 70 (npm pack + install in beforeAll)
  "test/e2e/cluster-scenario.test.ts", // 60
  "test/integration/cluster-drain.test.ts", // 60
  "test/e2e/acp-gemini.test.ts", // 55
  "test/e2e/team-claude.test.ts", // 45
  "test/integration/provider-acp-opencode.test.ts", // 40
  "test/integration/repo-queue-attacks.test.ts", // 40
  "test/e2e/killnine.test.ts", // 35
  "test/integration/cluster-handover.test.ts", // 30
  "test/integration/swarm-cli.test.ts", // 30
  "test/e2e/acp-ask.test.ts", // 30
  "test/e2e/cluster-claude.test.ts", // 30
  "test/integration/cluster-runner.test.ts", // 27
  "test/integration/swarm-daemon.test.ts", // 27
  "test/e2e/forwarder-security-claude.test.ts", // 26
  "test/e2e/daemon-meter-claude.test.ts", // 25
  "test/e2e/team-codex.test.ts", // 24
  "test/e2e/crash-loop.test.ts", // 23
  "test/e2e/disk-full-outrun.test.ts", // 23
  "test/e2e/inbox-read.test.ts", // 22
  "test/integration/swarm-schedule.test.ts", // 22
  "test/integration/daemon-lifecycle.test.ts", // 21
  "test/integration/repo-attacks.test.ts", // 21
  "test/integration/idle-roots.test.ts", // 20
  "test/integration/send-wait-cli.test.ts" // 20
]
class LongestFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const rank = (f: TestSpecification) => {
      const i = longest.findIndex((p) => f.moduleId.endsWith(`/${p}`))
      return i < 0 ? longest.length : i
    }
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b))
  }
}

export default defineConfig({
  test: {
    exclude: ["**/node_modules/**", ...skipped.skip, ...profiles],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    poolOptions: {
      threads: { maxThreads: 2, minThreads: 1, isolate: false },
      forks: { maxForks: 3, minForks: 1 }
    },
    sequence: { sequencer: LongestFirst },
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
