// Handlers of the `agent.*` methods (src/protocol/admin/agent.ts): create, list, terminate, resume
// here; send/wait (Messages.ts), inspect (Inspect.ts), attach/logs (Output.ts).
import { Effect } from "effect"
import { Orchestrator } from "../../agent/Orchestrator.js"
import { SpawnQueue } from "../../agent/SpawnQueue.js"
import { InvalidInputError } from "../../domain/errors.js"
import { Meter } from "../../meter/Meter.js"
import { ProviderRegistry } from "../../provider/ProviderRegistry.js"
import { WorkspaceStore } from "../../sandbox/WorkspaceStore.js"
import { DaemonControl } from "../DaemonControl.js"
import { Progress } from "../Progress.js"
import { makeResolver } from "../Resolver.js"
import { AgentGroup, type AgentCreateRpc, InvalidInput } from "../../protocol/AdminRpcs.js"
import type { AgentListRpc } from "../../protocol/admin/agent.js"
import type { AgentId } from "../../domain/ids.js"

type AgentListParams = Exclude<typeof AgentListRpc.payloadSchema.Type, undefined>
import { makeInspect } from "./Inspect.js"
import { makeMessageHandlers } from "./Messages.js"
import { handlersOf, served } from "./Middleware.js"
import { makeOutputHandlers } from "./Output.js"
import { checkWithRepo, makeEgressRequests } from "./Shared.js"

export const AgentHandlers = served(AgentGroup, Effect.gen(function*() {
  const orchestrator = yield* Orchestrator
  const workspaces = yield* WorkspaceStore
  const providers = yield* ProviderRegistry
  const meter = yield* Meter
  const spawnQueue = yield* SpawnQueue
  const progress = yield* Progress
  const defaultProvider = (yield* DaemonControl).settings.defaultProvider
  const resolver = yield* makeResolver
  const egress = yield* makeEgressRequests

  const create = (p: typeof AgentCreateRpc.payloadSchema.Type) =>
    Effect.gen(function*() {
      const provider = p.provider ?? defaultProvider
      yield* Effect.annotateCurrentSpan({ "gen_ai.provider.name": provider })
      // Refuse an unknown provider, or one whose CLI binary is missing, now — not at the
      // agent's first turn.
      const factory = yield* providers.get(provider)
      if (factory.check !== undefined) yield* factory.check
      if (p.repo !== undefined && p.workspace_id !== undefined) {
        return yield* new InvalidInput({ field: "repo", message: "give a workspace or a repository (--repo), not both" })
      }
      if (p.ref !== undefined && p.repo === undefined) return yield* new InvalidInput({ field: "ref", message: "--ref goes with --repo" })
      if (p.bind_ignored !== undefined && p.repo === undefined) return yield* new InvalidInput({ field: "bind_ignored", message: "--bind-ignored goes with --repo" })
      if (p.check !== undefined) yield* checkWithRepo(p.check, p.repo)
      const name = p.name ?? `agent-${Math.random().toString(16).slice(2, 6)}`
      const allow = yield* egress.asked(p.allow_hosts, p.allow_presets)
      const allows = allow.hosts.length > 0 || allow.presets.length > 0
      // A repository workspace of its own (named after the agent when that name is free, so its
      // branch is substrat/<agent>); removed again when the agent cannot be created.
      const repo = p.repo
      const repoWs = repo === undefined ? undefined : yield* Effect.gen(function*() {
        const taken = (yield* workspaces.list()).some((w) => w.name === name)
        return yield* workspaces.create({
          name: taken ? null : name,
          default_for: name,
          repo: { path: repo, ...(p.ref === undefined ? {} : { ref: p.ref }), ...(p.bind_ignored === undefined ? {} : { bind_ignored: p.bind_ignored }) },
          ...(p.check === undefined ? {} : { check: p.check })
        })
      })
      const workspace_id = repoWs !== undefined ? repoWs.id : p.workspace_id === undefined ? undefined : yield* resolver.workspaceId(p.workspace_id)
      if (workspace_id !== undefined && allows) yield* egress.withinParent(workspace_id, allow)
      const node = yield* orchestrator.createRoot({
        name,
        instructions: p.instructions ?? "",
        provider,
        ...(p.role === undefined ? {} : { role: p.role }),
        ...(workspace_id === undefined ? {} : { workspace_id })
      }).pipe(Effect.tapError(() => repoWs === undefined ? Effect.void : workspaces.delete(repoWs.id, { force: true }).pipe(Effect.ignore)))
      if (p.budget !== undefined) yield* meter.setBudget(node.id, p.budget)
      if (allows) {
        if (node.workspace_id === null) return yield* new InvalidInputError({ field: "allow", message: "the agent has no workspace to allow egress in" })
        yield* egress.allowIn(node.workspace_id, allow)
      }
      if (p.caps !== undefined) {
        yield* spawnQueue.setCaps(node.id, {
          max_depth: p.caps.max_depth ?? null,
          max_children: p.caps.max_children ?? null,
          max_live: p.caps.max_live ?? null,
          ...(p.caps.quotas === undefined ? {} : { quotas: p.caps.quotas })
        })
      }
      return node
    })

  return handlersOf(AgentGroup)({
    "agent.create": create,
    "agent.list": (p: AgentListParams | void) =>
      p?.limit === undefined && p?.after === undefined && p?.depth === undefined
        ? Effect.map(Effect.zip(resolver.agents(p?.all ?? false), orchestrator.briefs), ([agents, details]) => ({ agents, activity: progress.all(), details }))
        : Effect.map(
          Effect.zip(resolver.agentsPage(p.all ?? false, p.after as AgentId | undefined, p.limit ?? 100_000, p.depth), orchestrator.briefs),
          ([page, briefs]) => {
            const ids = new Set<string>(page.nodes.map((n) => n.id))
            const last = page.nodes[page.nodes.length - 1]
            return {
              agents: page.nodes,
              activity: progress.all().filter((a) => ids.has(a.agent_id)),
              details: briefs.filter((b) => ids.has(b.agent_id)),
              ...(page.more && last !== undefined ? { next: last.id } : {})
            }
          }
        ),
    "agent.terminate": (p: { readonly agent: string }) =>
      Effect.gen(function*() {
        const node = yield* resolver.liveAgent(p.agent)
        const ids = yield* orchestrator.terminate(node.id)
        return { agent_id: node.id, terminated: ids }
      }),
    "agent.resume": (p: { readonly agent: string }) =>
      Effect.gen(function*() {
        const node = yield* resolver.liveAgent(p.agent)
        const turns = yield* orchestrator.resumeAgent(node.id)
        return { agent_id: node.id, turns }
      }),
    ...(yield* makeMessageHandlers(resolver)),
    ...(yield* makeInspect(resolver)),
    ...(yield* makeOutputHandlers(resolver))
  })
}))
