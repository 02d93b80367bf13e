// Attacks on the http surface, replayed by `npm run chaos -- --only security`.
import type { Attack } from "./attack.js"

export const attacks: ReadonlyArray<Attack> = []
