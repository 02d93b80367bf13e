// The package version, for `--version` and `daemon.status`.
import pkg from "../package.json" with { type: "json" }

export const version: string = pkg.version
