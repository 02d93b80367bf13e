// A command-line edge for the scripted endpoint, for experiments by hand:
//   npx tsx src/testing/serveScripted.ts --port 0|--socket PATH --script script.json [--log requests.jsonl]
// script.json: { "script": [ScriptEntry...], "fallback"?: Reply } (no `where` predicates, of course).
// Prints `listening <baseUrl> <address>` on stdout, then appends every recorded request to --log.
import { NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as ScriptedLlm from "./ScriptedLlm.js"

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name)
  return i >= 0 ? process.argv[i + 1] : undefined
}

const program = Effect.gen(function*() {
  const scriptFile = arg("--script")
  const spec = scriptFile === undefined
    ? { script: [] }
    : (JSON.parse(Fs.readFileSync(scriptFile, "utf8")) as Pick<ScriptedLlm.Options, "script" | "fallback">)
  const socket = arg("--socket")
  const llm = yield* ScriptedLlm.make({
    ...spec,
    listen: socket === undefined ? { port: Number(arg("--port") ?? "0") } : { socketPath: socket }
  })
  console.log(`listening ${llm.baseUrl} ${JSON.stringify(llm.address)}`)
  const log = arg("--log")
  let seen = 0
  for (;;) {
    const all = yield* llm.awaitRequests(seen + 1, () => true)
    for (const r of all.slice(seen)) {
      if (log !== undefined) Fs.appendFileSync(log, JSON.stringify(r) + "\n")
      console.log(`#${r.seq} ${r.method} ${r.path} ${r.kind} -> ${r.status} (${String(r.answeredBy ?? "")})`)
    }
    seen = all.length
  }
})

NodeRuntime.runMain(Effect.scoped(program))
