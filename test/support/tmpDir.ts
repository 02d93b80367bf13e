// A temp dir as a scoped Effect (removed when the scope closes), for Effect-based tests.
import { Effect } from "effect"
import { makeTmpDir, removeDir } from "./tmp.js"

/** A temp dir for the enclosing scope. */
export const tmpDir = (prefix?: string) =>
  Effect.acquireRelease(Effect.sync(() => makeTmpDir(prefix)), (dir) => Effect.sync(() => removeDir(dir)))
