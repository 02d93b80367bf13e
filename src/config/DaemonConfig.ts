// The daemon's settings: the whole configuration (src/config/Config.ts), loaded once by
// `substrat daemon run|start` (flags ▸ SUBSTRAT_* ▸ config.toml ▸ defaults) and provided to the
// daemon's layers as `DaemonConfig`.
import type * as FileSystem from "@effect/platform/FileSystem"
import { Effect } from "effect"
import { type Flags, load, type ProcessEnv, type Settings, type SettingsError, SubstratConfig } from "./Config.js"

export type DaemonSettings = Settings

/** The daemon's settings as a service (same tag as the configuration's). */
export const DaemonConfig = SubstratConfig
export type DaemonConfig = SubstratConfig

/** Settings from flags over the environment over `$SUBSTRAT_HOME/config.toml`; fails naming a bad key. */
export const resolveSettings = (
  flags: Flags = {},
  env?: ProcessEnv
): Effect.Effect<DaemonSettings, SettingsError, FileSystem.FileSystem> =>
  Effect.map(load(env === undefined ? { flags } : { flags, env }), (l) => l.settings)
