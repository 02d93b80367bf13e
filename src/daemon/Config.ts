// Daemon settings: flags (`substrat daemon run --slots 8`) over environment (`SUBSTRAT_HOME`,
// `SUBSTRAT_SLOTS`, `SUBSTRAT_GRACE_MS`, `SUBSTRAT_MAX_LINE_BYTES`) over defaults.
import { Context, Layer } from "effect"
import { defaultHome } from "../config/Paths.js"

export interface DaemonSettings {
  /** `$SUBSTRAT_HOME`. */
  readonly home: string
  /** Live provider slots (Multiplexer). */
  readonly slots: number
  /** How long shutdown waits for running turns before suspending anyway. */
  readonly graceMs: number
  /** Longest admin-socket request line. */
  readonly maxLineBytes: number
  /** `HOST:PORT` of the optional HTTP listener on TCP (http.sock is always served). */
  readonly http?: string | undefined
}

export const defaults = { slots: 4, graceMs: 10_000, maxLineBytes: 1024 * 1024 } as const

const intFromEnv = (env: NodeJS.ProcessEnv, key: string): number | undefined => {
  const raw = env[key]
  if (raw === undefined || raw.trim() === "") return undefined
  const n = Number(raw)
  return Number.isInteger(n) && n >= 0 ? n : undefined
}

/** Settings from the environment, with explicit overrides (flags) winning. */
export const resolveSettings = (
  overrides: Partial<DaemonSettings> = {},
  env: NodeJS.ProcessEnv = process.env
): DaemonSettings => ({
  home: overrides.home ?? defaultHome(env),
  slots: Math.max(1, overrides.slots ?? intFromEnv(env, "SUBSTRAT_SLOTS") ?? defaults.slots),
  graceMs: overrides.graceMs ?? intFromEnv(env, "SUBSTRAT_GRACE_MS") ?? defaults.graceMs,
  ...(overrides.http === undefined ? {} : { http: overrides.http }),
  maxLineBytes: Math.max(
    1024,
    overrides.maxLineBytes ?? intFromEnv(env, "SUBSTRAT_MAX_LINE_BYTES") ?? defaults.maxLineBytes
  )
})

export class DaemonConfig extends Context.Tag("substrat/DaemonConfig")<DaemonConfig, DaemonSettings>() {
  static readonly layer = (settings: DaemonSettings): Layer.Layer<DaemonConfig> => Layer.succeed(DaemonConfig, settings)
}
