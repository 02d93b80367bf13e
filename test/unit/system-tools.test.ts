// The detector behind "skip exactly the tests that need a missing tool" (scripts/system-tools.ts,
// used by vitest.config.ts): a PATH without bwrap, the `// requires:` markers, the one line, and
// SUBSTRAT_REQUIRE_TOOLS=1 turning the skip into an error.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { locate, missingTools, plan, requiredBy, testFiles } from "../../scripts/system-tools.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const dir = makeTmpDir("substrat-tools-")
afterAll(() => removeDir(dir))

const fakeBin = (name: string) => {
  const bin = join(dir, "bin")
  fs.mkdirSync(bin, { recursive: true })
  fs.writeFileSync(join(bin, name), "#!/bin/sh\n", { mode: 0o755 })
  return bin
}

describe("system tools", () => {
  it("a PATH without bwrap: bwrap is missing, git (there) is not", () => {
    const bin = fakeBin("git")
    fs.writeFileSync(join(bin, "bwrap"), "not executable", { mode: 0o644 })
    const env = { PATH: `${bin}:${join(dir, "nowhere")}`, SUBSTRAT_CHROMIUM: join(bin, "git") }
    expect(missingTools(["bwrap", "git", "socat", "chromium"], env)).toEqual(["bwrap", "socat"])
    expect(locate("git", env)).toBe(join(bin, "git"))
    expect(missingTools(["bwrap"], { PATH: "" })).toEqual(["bwrap"])
  })

  it("markers: the tools a test file declares", () => {
    expect(requiredBy("// A sandbox test.\n// requires: bwrap, git\nimport x from 'y'\n")).toEqual(["bwrap", "git"])
    expect(requiredBy("// no marker\n")).toEqual([])
    expect(requiredBy("// requires: socat nonsense\n")).toEqual(["socat"])
  })

  it("skips exactly the files that need a missing tool, with one line", () => {
    const files = [
      { path: "test/a.test.ts", source: "// requires: bwrap\n" },
      { path: "test/b.test.ts", source: "// requires: git\n" },
      { path: "test/c.test.ts", source: "// nothing needed\n" },
      { path: "test/d.test.ts", source: "// requires: socat, bwrap\n" }
    ]
    const p = plan(files, ["bwrap"], false)
    expect(p.skip).toEqual(["test/a.test.ts", "test/d.test.ts"])
    expect(p.line).toBe(
      "substrat tests: skipped 2 test file(s) that need bwrap (the sandbox), not installed; install: sudo apt-get install bubblewrap (npm test does it when run as root or with passwordless sudo)"
    )
    expect(plan(files, [], false)).toEqual({ skip: [], line: undefined })
    // A missing tool no test file needs changes nothing.
    expect(plan([files[2]!], ["chromium"], true)).toEqual({ skip: [], line: undefined })
    expect(() => plan(files, ["bwrap", "socat"], true)).toThrow(
      "SUBSTRAT_REQUIRE_TOOLS=1 and missing: bwrap (the sandbox), socat (raw-socket clients in the socket tests); 2 test file(s) need them; install: sudo apt-get install bubblewrap socat"
    )
  })

  it("this repository's test files that run sandboxes declare bwrap", () => {
    const files = testFiles("test")
    const need = (name: string) => requiredBy(files.find((f) => f.path.endsWith(name))!.source)
    expect(need("sandbox-escape.test.ts")).toContain("bwrap")
    expect(need("dashboard.test.ts")).toContain("chromium")
    expect(need("config-cli.test.ts")).toEqual([])
  })
})
