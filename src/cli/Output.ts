// Printing through Effect's Console; the renderings themselves are in Format.ts (effect-free).
import { Console, type Effect } from "effect"
import { jsonText } from "./Format.js"

export { renderInspect, renderSent, renderSessions, renderStatus, renderTree, renderWorkspaces, table } from "./Format.js"

export const printJson = (value: unknown): Effect.Effect<void> => Console.log(jsonText(value))
