// A recursive watch of a code tree that says when it is in place. The platform's @parcel/watcher
// backend (@effect/platform-node's `ParcelWatcher.layer`, behind `FileSystem.watch`) gives no
// signal when its `subscribe` — a walk of the tree adding an inotify watch per directory — has
// finished, so a caller cannot tell when a save starts to count: `swarm start` answered while the
// walk still ran, and a save made right after it raised no event. This is that backend's stream
// (same events, same errors, unsubscribed with its scope) plus `subscribed`, run once the
// subscription exists.
import * as PlatformError from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as ParcelWatcher from "@parcel/watcher"
import { Chunk, Effect, Stream } from "effect"

const watchError = (path: string, cause: unknown) =>
  new PlatformError.SystemError({ reason: "Unknown", module: "FileSystem", method: "watch", pathOrDescriptor: path, cause })

const toEvent = (event: ParcelWatcher.Event): FileSystem.WatchEvent => {
  switch (event.type) {
    case "create":
      return FileSystem.WatchEventCreate({ path: event.path })
    case "update":
      return FileSystem.WatchEventUpdate({ path: event.path })
    case "delete":
      return FileSystem.WatchEventRemove({ path: event.path })
  }
}

/** Every change under `path` (a directory), recursively; `subscribed` runs once the watch is in place. */
export const watchTree = (path: string, subscribed: Effect.Effect<void>): Stream.Stream<FileSystem.WatchEvent, PlatformError.PlatformError> =>
  Stream.asyncScoped<FileSystem.WatchEvent, PlatformError.PlatformError>((emit) =>
    Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          ParcelWatcher.subscribe(path, (cause, events) => {
            if (cause) void emit.fail(watchError(path, cause))
            else void emit.chunk(Chunk.unsafeFromArray(events.map(toEvent)))
          }),
        catch: (cause) => watchError(path, cause)
      }),
      (sub) => Effect.promise(() => sub.unsubscribe())
    ).pipe(Effect.zipLeft(subscribed))
  )
