// What several areas' handlers share: a session as the admin methods show it (with the agent
// that owns it), agent names for lines people read, and the egress policy of a request
// (checked hosts/presets; a workspace's allowlist never wider than its parent's).
import { Effect, Either, Option } from "effect"
import type { AgentNode } from "../../domain/agent.js"
import { EgressPolicy, narrowerThan, normaliseAllow } from "../../domain/egress.js"
import { InvalidInputError } from "../../domain/errors.js"
import { AgentId, type SessionId, type WorkspaceId } from "../../domain/ids.js"
import type { Session } from "../../domain/session.js"
import { Egress } from "../../egress/Egress.js"
import { WorkspaceError } from "../../sandbox/errors.js"
import { WorkspaceStore } from "../../sandbox/WorkspaceStore.js"
import { SessionStore } from "../../storage/SessionStore.js"
import type { SessionInfo } from "../../protocol/AdminRpcs.js"
import { makeResolver } from "../Resolver.js"
import type { Names } from "../TranscriptLines.js"

/** One line of a text, cut to `n` characters. */
export const clip = (s: string, n = 120) => {
  const one = s.replace(/\r?\n/g, " ↵ ")
  return one.length <= n ? one : `${one.slice(0, n - 1)}…`
}

export const shortJson = (u: unknown) => {
  try {
    return clip(JSON.stringify(u) ?? "", 160)
  } catch {
    return "?"
  }
}

export const nameOf = (id: string, tree: ReadonlyArray<AgentNode>) => tree.find((n) => n.id === id)?.name ?? id.slice(0, 8)

export const learnName = (names: Names, id: string, name: string, session_id: string) => {
  const a = { id, name, session_id }
  names.byAgent.set(id, a)
  names.bySession.set(session_id, a)
}

/** Sessions as the admin methods show them (the owner of each from the resolver's indexes). */
export const makeSessions = Effect.gen(function*() {
  const store = yield* SessionStore
  const resolver = yield* makeResolver

  const info = (s: Session): Effect.Effect<SessionInfo> =>
    Effect.map(resolver.ownerOfSession(s.id), (owner) => ({
      id: s.id,
      state: s.state,
      provider_name: s.provider_name,
      model: s.model,
      created_at: s.created_at,
      suspended_at: s.suspended_at,
      agent_id: Option.match(owner, { onNone: () => null, onSome: (o) => AgentId.make(o.id) }),
      agent_name: Option.match(owner, { onNone: () => null, onSome: (o) => o.name })
    }))

  /** A session's info, or None when its record cannot be read. */
  const infoOf = (session: SessionId) => store.load(session).pipe(Effect.flatMap(info), Effect.option)

  const load = (session: SessionId) => Effect.flatMap(store.load(session), info)

  return { info, infoOf, load } as const
})

/** Egress requests of the admin methods. */
export const makeEgressRequests = Effect.gen(function*() {
  const egress = yield* Egress
  const workspaces = yield* WorkspaceStore

  /** Checked hosts/presets of a request (InvalidInputError naming the bad one; nothing changed). */
  const asked = (hosts: ReadonlyArray<string> | undefined, presets: ReadonlyArray<string> | undefined) =>
    Either.match(normaliseAllow(hosts ?? [], presets ?? [], egress.presets), {
      onLeft: (m) => Effect.fail(new InvalidInputError({ field: "allow", message: m })),
      onRight: (a) => Effect.succeed(a)
    })

  /** Refused when `add` is wider than the policy of the workspace's parent. */
  const withinParent = (id: WorkspaceId, add: { readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string> }) =>
    Effect.gen(function*() {
      const parent = (yield* workspaces.chain(id))[1]
      if (parent === undefined) return
      const narrow = narrowerThan(parent.egress, add, egress.presets)
      if (Either.isLeft(narrow)) return yield* new WorkspaceError({ workspace_id: id, reason: "wider-than-parent", message: narrow.left })
    })

  /** Add to a workspace's egress policy: never wider than its parent's. */
  const allowIn = (id: WorkspaceId, add: { readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string> }) =>
    Effect.gen(function*() {
      yield* withinParent(id, add)
      return yield* workspaces.updateEgress(id, (p) =>
        Either.right(new EgressPolicy({
          ...p,
          hosts: [...p.hosts, ...add.hosts.filter((h) => !p.hosts.includes(h))],
          presets: [...p.presets, ...add.presets.filter((n) => !p.presets.includes(n))],
          dismissed: p.dismissed.filter((h) => !add.hosts.includes(h)),
          asked: p.asked.filter((a) => a.kind !== "host" || !add.hosts.includes(a.host))
        })))
    })

  return { asked, withinParent, allowIn, presets: egress.presets } as const
})

/** `--check` is a repository workspace's merge queue's (src/daemon/MergeQueue.ts). */
export const checkWithRepo = (check: string, repo: string | undefined) =>
  repo === undefined || check.trim() === ""
    ? Effect.fail(new InvalidInputError({ field: "check", message: check.trim() === "" ? "--check: an empty command" : "--check goes with --repo (the merge queue of a repository workspace)" }))
    : Effect.succeed(check)
