// A JSON POST over a Unix socket (a model forwarder's, in the tests): its status and body text.
// `agent: false`: a fresh connection each time, so a test sees only the forwarder's own reuse.
import { Effect } from "effect"
import * as Http from "node:http"

export const post = (socketPath: string, path: string, body: unknown) =>
  Effect.async<{ readonly status: number; readonly body: string }>((resume) => {
    const req = Http.request({ socketPath, path, method: "POST", agent: false, headers: { "content-type": "application/json" } }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => (text += c))
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, body: text })))
    })
    req.on("error", (e) => resume(Effect.die(e)))
    req.end(JSON.stringify(body))
  })
