// Reading agents' logs (events.jsonl) in assertions. Plain Node only: test files that drive the
// daemon and CLI as processes import this without evaluating Effect or any of src/.
import * as Fs from "node:fs"
import * as Path from "node:path"

/** Decoded lines of a JSONL stdout, failing loudly on the first bad line. */
export const jsonLines = (stdout: string): ReadonlyArray<Record<string, unknown>> =>
  stdout.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as Record<string, unknown>)

export const readJsonLines = (file: string): ReadonlyArray<Record<string, unknown>> =>
  Fs.existsSync(file) ? jsonLines(Fs.readFileSync(file, "utf8")) : []

/** One line of an agent's events.jsonl, loosely typed for assertions. */
export type LoggedEvent = { readonly event: string; readonly data: Record<string, unknown> }

/** The events of agent session `sid` under `home`, from its events.jsonl. */
export const agentEvents = (home: string, sid: string): ReadonlyArray<LoggedEvent> =>
  readJsonLines(Path.join(home, "agents", sid, "events.jsonl")) as ReadonlyArray<LoggedEvent>

/** The `data` of every event named `name`. */
export const dataNamed = (es: ReadonlyArray<LoggedEvent>, name: string): Array<Record<string, unknown>> =>
  es.filter((e) => e.event === name).map((e) => e.data)
