// `substrat doctor`, sandbox part: pure data (JSON-serialisable Schemas). The CLI adds its own
// checks (daemon socket health, provider binaries via `binaryCheck`) and prints or `--json`s the report.
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Either, Schema } from "effect"
import { detectCgroup } from "./Cgroup.js"
import { type BwrapConfig, probeBwrap, which } from "./BwrapProbe.js"
import { probeIdentity } from "./SandboxBwrap.js"

export const CheckStatus = Schema.Literal("ok", "warn", "fail")
export class DoctorCheck extends Schema.Class<DoctorCheck>("DoctorCheck")({
  name: Schema.String,
  status: CheckStatus,
  detail: Schema.String,
  fix: Schema.NullOr(Schema.String)
}) {}
export class DoctorReport extends Schema.Class<DoctorReport>("DoctorReport")({
  ok: Schema.Boolean,
  checks: Schema.Array(DoctorCheck)
}) {}

const check = (name: string, status: typeof CheckStatus.Type, detail: string, fix: string | null = null) =>
  new DoctorCheck({ name, status, detail, fix })

/** ok unless some check failed (warnings do not fail the report). */
export const makeReport = (checks: ReadonlyArray<DoctorCheck>): DoctorReport =>
  new DoctorReport({ ok: checks.every((c) => c.status !== "fail"), checks })

/** Is `binary` on PATH? (`warn` when missing: e.g. a provider CLI that is not installed.) */
export const binaryCheck = (name: string, binary: string, fix: string | null = null) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* which(fs, binary)
    return path === null ? check(name, "warn", `${binary} not found on PATH`, fix) : check(name, "ok", path)
  })

/** bwrap present and able to create a sandbox (user namespaces), prlimit/setpriv, git, cgroup mode, identity. */
export const sandboxChecks = (config: BwrapConfig = {}) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const executor = yield* CommandExecutor.CommandExecutor
    const checks: Array<DoctorCheck> = []
    const probe = yield* Effect.either(probeBwrap(fs, executor, config))
    if (Either.isLeft(probe)) {
      const e = probe.left
      checks.push(check("bwrap", e.reason === "bwrap-missing" ? "fail" : "ok", e.reason === "bwrap-missing" ? e.message : "present"))
      if (e.reason !== "bwrap-missing") checks.push(check("sandbox", "fail", e.message, e.fix))
      else checks.push(check("sandbox", "fail", "no bwrap, no sandbox: agents cannot run", e.fix))
    } else {
      checks.push(check("bwrap", "ok", `${probe.right.bwrap} (${probe.right.version})`))
      checks.push(check("sandbox", "ok", "a trivial sandbox started: user/mount/pid/net namespaces work"))
      checks.push(
        probe.right.prlimit === null
          ? check("prlimit", "fail", "prlimit not found: resource limits cannot be applied", "install util-linux")
          : check("prlimit", "ok", probe.right.prlimit)
      )
    }
    const git = yield* which(fs, "git")
    checks.push(git === null ? check("git", "fail", "git not found: per-turn workspace history disabled", "apt-get install git") : check("git", "ok", git))
    const cg = yield* detectCgroup(fs)
    const pidsCgroup = cg.mode === "v2-writable" || cg.pidsV1 !== undefined
    checks.push(check("cgroup", pidsCgroup ? "ok" : "warn", `${cg.mode}: ${cg.detail}`, pidsCgroup ? null : "rlimits are used instead (memory=RLIMIT_AS, processes=RLIMIT_NPROC)"))
    // Who sandboxes run as, read inside one: never host root, no capabilities.
    if (Either.isRight(probe)) {
      const seen = yield* Effect.either(probeIdentity(fs, executor, config))
      if (Either.isLeft(seen)) {
        checks.push(check("identity", "fail", `could not read the sandbox's identity: ${seen.left.message}`, seen.left.fix))
      } else {
        const r = seen.right
        const detail = `uid ${r.uid} gid ${r.gid} inside, host uid ${r.hostUid} gid ${r.hostGid} (uid_map ${r.uidMap.map((l) => `"${l}"`).join(", ")}), CapEff ${r.capEff}, ` +
          (r.ownUserNamespace ? "own user namespace" : "no user namespace of its own")
        if (r.hostUid === 0 || !/^0+$/.test(r.capEff)) {
          checks.push(check("identity", "fail", `sandboxes hold host root or capabilities: ${detail}`, "run the daemon as an unprivileged user, or configure an unprivileged sandbox uid"))
        } else if (!r.ownUserNamespace) {
          checks.push(check("identity", "warn", detail, "allow unprivileged user namespaces (see the sandbox check's fix) so each sandbox gets its own"))
        } else {
          checks.push(check("identity", "ok", detail))
        }
      }
    }
    return checks
  })
