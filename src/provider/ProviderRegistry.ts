// ProviderRegistry: provider name → factory. A provider string may carry a variant after a
// colon (`scripted:demo`); the registry resolves the part before it.
import { Context, Effect, Layer } from "effect"
import { ProviderError } from "../domain/errors.js"
import { parseProviderName, type ProviderFactory } from "./Provider.js"

export interface ProviderRegistryService {
  /**
   * The factory for a provider string; unknown names (and variants the factory's `checkVariant`
   * refuses) fail with `reason: "unknown-provider"`.
   */
  readonly get: (spec: string) => Effect.Effect<ProviderFactory, ProviderError>
  readonly names: ReadonlyArray<string>
}

export const makeRegistry = (factories: ReadonlyArray<ProviderFactory>): ProviderRegistryService => {
  const byName = new Map(factories.map((f) => [f.name, f] as const))
  return {
    names: [...byName.keys()],
    get: (spec) => {
      const { name, variant } = parseProviderName(spec)
      const f = byName.get(name)
      return f
        ? f.checkVariant === undefined ? Effect.succeed(f) : Effect.as(f.checkVariant(variant), f)
        : Effect.fail(
          new ProviderError({
            provider: spec,
            reason: "unknown-provider",
            message: `unknown provider "${name}" (known: ${[...byName.keys()].join(", ") || "none"})`
          })
        )
    }
  }
}

export class ProviderRegistry extends Context.Tag("substrat/ProviderRegistry")<
  ProviderRegistry,
  ProviderRegistryService
>() {
  /** A registry of exactly these factories (later entries win on a name clash). */
  static readonly layer = (...factories: ReadonlyArray<ProviderFactory>): Layer.Layer<ProviderRegistry> =>
    Layer.succeed(ProviderRegistry, makeRegistry(factories))
}
