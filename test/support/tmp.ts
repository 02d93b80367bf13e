// Temp directories under os.tmpdir(), removed afterwards. Plain Node only (no Effect): nearly
// every test file imports this; the scoped Effect form is tmpDir.ts.
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const makeTmpDir = (prefix = "substrat-test-"): string => fs.mkdtempSync(join(tmpdir(), prefix))
export const removeDir = (dir: string): void => fs.rmSync(dir, { recursive: true, force: true })

/** Run `f` with a fresh temp dir, removed afterwards (plain async; for loops over crash points). */
export const withTmp = async <A>(f: (dir: string) => Promise<A>, prefix?: string): Promise<A> => {
  const dir = makeTmpDir(prefix)
  try {
    return await f(dir)
  } finally {
    removeDir(dir)
  }
}
