// Layers and helpers for EventLog / SessionStore file-layer tests.
import { Effect, Layer, Stream } from "effect"
import { SubstratPaths } from "../../src/config/Paths.js"
import { type LogEntry, makeEvent } from "../../src/domain/events.js"
import { type SessionId, TurnId } from "../../src/domain/ids.js"
import { makeSession, Session } from "../../src/domain/session.js"
import { DurableError } from "../../src/domain/errors.js"
import { Durable, nodePrimitives, type Primitives } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { SessionStore } from "../../src/storage/SessionStore.js"

/** The EventLog file layer on `home`, over the given Durable (default: real). */
export const fileLayers = (home: string, durable: Layer.Layer<Durable> = Durable.layer) =>
  EventLog.layerFile.pipe(Layer.provideMerge(Layer.merge(durable, SubstratPaths.layer(home))))

/** The SessionStore file layer on `home`, over the given Durable (default: real). */
export const storeLayer = (home: string, durable: Layer.Layer<Durable> = Durable.layer) =>
  SessionStore.layerFile.pipe(Layer.provideMerge(Layer.merge(durable, SubstratPaths.layer(home))))

/** A deterministic, recognisable event: turn.start with prompt `tag`. */
export const ev = (tag: string) =>
  makeEvent("turn.start", { turn_id: TurnId.make("00000000-0000-4000-8000-000000000001"), prompt: tag })

export const promptOf = (e: LogEntry): string => e.event === "turn.start" ? e.data.prompt : `<${e.event}>`

export const readAll = (session: SessionId) =>
  Effect.flatMap(EventLog, (log) => Stream.runCollect(log.read(session))).pipe(Effect.map((c) => [...c]))

export const sid = (n: number): SessionId =>
  `00000000-0000-4000-8000-${n.toString(16).padStart(12, "0")}` as SessionId

/** Session record `n` (id `sid(n)`) in `state`, with `blob` as its provider_state. */
export const session = (n: number, state: Session["state"] = "created", blob: Array<number> = []) =>
  new Session({
    ...makeSession({ id: sid(n), provider_name: "scripted", model: "m", now: "2026-01-01T00:00:00.000Z" }),
    state,
    provider_state: new Uint8Array(blob)
  })

/**
 * The real fsync, except a session log's once `frozen()` holds: a checkpoint then fails before it
 * empties the journal, so the journal keeps its records as a crash would leave them.
 */
export const logFsyncUnless = (frozen: () => boolean): Primitives["fsync"] => (fd, path) =>
  frozen() && path.endsWith("events.jsonl")
    ? Effect.fail(new DurableError({ op: "fsync", path, message: "test: no log fsync" }))
    : nodePrimitives.fsync(fd, path)
