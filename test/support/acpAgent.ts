// The in-repo ACP test agent (test/fixtures/acp-agent.ts) as one file, readable by the sandbox's
// user: run it as `acp:/usr/bin/node <path>`.
import * as esbuild from "esbuild"
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "../..")

export const bundleAcpAgent = (dir: string): string => {
  const out = Path.join(dir, "bin", "acp-agent.cjs")
  esbuild.buildSync({ entryPoints: [Path.join(root, "test/fixtures/acp-agent.ts")], bundle: true, platform: "node", format: "cjs", outfile: out, logLevel: "silent" })
  Fs.chmodSync(Path.dirname(out), 0o755)
  Fs.chmodSync(out, 0o644)
  return out
}
