import { defineConfig } from "vitest/config"
import { missingTools, plan, testFiles } from "./scripts/system-tools.js"

// Test files that need a system tool this machine lacks (bwrap, git, socat, chromium; declared
// with `// requires: …`) are left out with one line saying so — an error instead under
// SUBSTRAT_REQUIRE_TOOLS=1 (.ci/run). scripts/system-tools.ts (pretest) installs them when it can.
const skipped = plan(testFiles("test"), missingTools(), process.env.SUBSTRAT_REQUIRE_TOOLS === "1")
if (skipped.line !== undefined) console.warn(skipped.line)

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["**/node_modules/**", ...skipped.skip],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration suites spawn real processes and sandboxes; two cores.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    reporters: ["default"],
    // Console output (in-process daemons' logs, tests' own notes) is kept per test and printed
    // only for a test that failed; child processes write to files in their homes.
    silent: "passed-only"
  }
})
