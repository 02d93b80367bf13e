// An HTTP server listening on a Unix socket that only the owner may use, for as long as a scope
// lives: the daemon's per-agent sockets that a sandbox gets bound read-only (the model forwarder,
// the egress proxy). A stale socket file at the path is replaced (anything else there is an
// error: never removed), the directory is made 0700, the socket is chmod'ed 0600 once listening,
// and when the scope closes `beforeClose` runs (callers end what the server no longer tracks,
// e.g. upgraded tunnels), every connection is closed, the server stops and the file is removed.
import { Effect, type Scope } from "effect"
import * as Fs from "node:fs"
import type * as Http from "node:http"
import * as Path from "node:path"

/** Serve `server` on `socketPath` until the scope closes; fails with the reason it cannot listen. */
export const listenScoped = (
  server: Http.Server,
  socketPath: string,
  beforeClose: () => void = () => {}
): Effect.Effect<void, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<void, Error>((resume) => {
      try {
        Fs.mkdirSync(Path.dirname(socketPath), { recursive: true, mode: 0o700 })
        const st = Fs.lstatSync(socketPath, { throwIfNoEntry: false })
        if (st !== undefined) {
          if (!st.isSocket()) throw new Error(`${socketPath} exists and is not a socket`)
          Fs.rmSync(socketPath, { force: true })
        }
      } catch (e) {
        resume(Effect.fail(e instanceof Error ? e : new Error(String(e))))
        return
      }
      server.once("error", (e) => resume(Effect.fail(e)))
      server.listen(socketPath, () => {
        try {
          Fs.chmodSync(socketPath, 0o600)
        } catch {
          // best effort: the directory is 0700 anyway
        }
        resume(Effect.void)
      })
    }),
    () =>
      Effect.async<void>((resume) => {
        beforeClose()
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      }).pipe(Effect.ensuring(Effect.sync(() => Fs.rmSync(socketPath, { force: true }))))
  )
