// The model forwarder keeps connections to its upstream alive between requests. An upstream may
// close an idle kept-alive connection at the moment the next request goes out on it; the request
// then fails with ECONNRESET before the upstream read it. The forwarder sends it once more on a
// fresh connection instead of answering the agent 502 ("upstream unreachable: socket hang up").
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Http from "node:http"
import * as Path from "node:path"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import { makeTmpDir } from "../support/tmp.js"
import { post } from "../support/unixPost.js"

describe("model forwarder: upstream keep-alive", () => {
  it.scoped("a request on a connection the upstream just closed is sent again on a new one, once", () =>
    Effect.gen(function*() {
      const dir = makeTmpDir("mfk-")
      const upPath = Path.join(dir, "up.sock")
      /** Requests the upstream answered, and connections it dropped without reading a request. */
      const seen = { answered: 0, dropped: 0, connections: 0 }
      const server = Http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
        const sock = req.socket as typeof req.socket & { substratRequests?: number }
        sock.substratRequests = (sock.substratRequests ?? 0) + 1
        if (sock.substratRequests > 1) {
          // The race, made certain: a kept-alive connection closed as the next request arrives.
          seen.dropped++
          sock.destroy()
          return
        }
        req.resume()
        req.on("end", () => {
          seen.answered++
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify({ ok: seen.answered }))
        })
      })
      server.on("connection", () => seen.connections++)
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(upPath, () => resume(Effect.void))),
        () => Effect.sync(() => server.close())
      )
      const fw = yield* ModelForwarder.serve({
        socketPath: Path.join(dir, "agent.sock"),
        upstream: "http://localhost",
        upstreamSocket: upPath,
        credential: null,
        api: "anthropic"
      })
      const body = { model: "m", max_tokens: 10, messages: [{ role: "user", content: "hi" }] }
      const first = yield* post(fw.socketPath, "/v1/messages", body)
      const second = yield* post(fw.socketPath, "/v1/messages", body)
      expect(first.status).toBe(200)
      expect(second).toEqual({ status: 200, body: JSON.stringify({ ok: 2 }) })
      expect(seen).toEqual({ answered: 2, dropped: 1, connections: 2 })

      // Only once: an upstream that keeps dropping is the agent's 502, not an endless retry.
      const drops = { n: 0 }
      server.removeAllListeners("request")
      server.on("request", (req: Http.IncomingMessage) => {
        drops.n++
        req.socket.destroy()
      })
      const third = yield* post(fw.socketPath, "/v1/messages", body)
      expect(third.status).toBe(502)
      expect(third.body).toContain("unreachable")
      // The kept-alive connection of the second request, then one fresh connection: no more.
      expect(drops.n).toBe(2)
    }))
})
