// How a reference typed by a person designates one thing (agent, workspace, session, turn), like
// docker and git do: the full id, else an exact name, else a unique prefix of an id. Pure; the
// daemon's Resolver (Resolver.ts) feeds it the candidates, so the CLI and the HTTP API resolve
// references the same way. No match → NotFound; more than one → InvalidInput naming each
// candidate (the CLI exits 2).
import { Either } from "effect"
import { InvalidInput, NotFound } from "../protocol/AdminRpcs.js"

export type RefKind = "agent" | "workspace" | "session" | "turn" | "message"

export interface Candidate<A> {
  readonly id: string
  /** Names this candidate answers to (an agent's name, a workspace's name). */
  readonly names: ReadonlyArray<string>
  /** How it is shown in an "ambiguous" list, e.g. `lead (terminated)`. */
  readonly label: string
  readonly value: A
}

export const looksLikeIdPrefix = (ref: string): boolean => /^[0-9a-f-]+$/i.test(ref)

const listed = <A>(cs: ReadonlyArray<Candidate<A>>): string =>
  cs.slice(0, 10).map((c) => `${c.id.slice(0, 12)} ${c.label}`).join(", ") + (cs.length > 10 ? `, … (${cs.length - 10} more)` : "")

const ambiguous = <A>(kind: RefKind, ref: string, why: string, cs: ReadonlyArray<Candidate<A>>) =>
  new InvalidInput({
    field: kind,
    message: `${kind} "${ref}" is ambiguous: ${cs.length} ${why}: ${listed(cs)}; use more of the id`
  })

/**
 * The one candidate `ref` designates: an exact id, else an exact name (one candidate), else a
 * unique id prefix. `preferred` breaks ties between several
 * candidates with the same name or prefix (e.g. a live agent over terminated ones of that name).
 */
export const pick = <A>(
  kind: RefKind,
  ref: string,
  candidates: ReadonlyArray<Candidate<A>>,
  preferred: (a: A) => boolean = () => false
): Either.Either<A, NotFound | InvalidInput> => {
  const r = ref.trim()
  const exact = candidates.find((c) => c.id.toLowerCase() === r.toLowerCase())
  if (exact) return Either.right(exact.value)
  const narrow = (cs: ReadonlyArray<Candidate<A>>): ReadonlyArray<Candidate<A>> => {
    const best = cs.filter((c) => preferred(c.value))
    return best.length === 1 ? best : cs
  }
  const named = narrow(candidates.filter((c) => c.names.includes(r)))
  if (named.length === 1) return Either.right(named[0]!.value)
  if (named.length > 1) return Either.left(ambiguous(kind, r, `${kind}s have this name`, named))
  if (looksLikeIdPrefix(r)) {
    const lower = r.toLowerCase()
    const prefixed = narrow(candidates.filter((c) => c.id.toLowerCase().startsWith(lower)))
    if (prefixed.length === 1) return Either.right(prefixed[0]!.value)
    if (prefixed.length > 1) return Either.left(ambiguous(kind, r, `${kind} ids start with it`, prefixed))
  }
  return Either.left(new NotFound({ kind, id: r, message: `no ${kind} "${r}"` }))
}

/**
 * Where `pickIndexed` looks candidates up, so a reference costs what it matches, not the number
 * of candidates: `exact` by full id (lower case), `named` by name, `prefixed` by id prefix (lower
 * case; asked only when nothing has the id or the name and `ref` looks like an id prefix).
 */
export interface Lookup<A> {
  readonly exact: (lowerId: string) => ReadonlyArray<Candidate<A>>
  readonly named: (name: string) => ReadonlyArray<Candidate<A>>
  readonly prefixed: (lowerPrefix: string) => ReadonlyArray<Candidate<A>>
}

/** `pick` over the candidates a `Lookup` finds: the same answer as `pick` over all of them. */
export const pickIndexed = <A>(
  kind: RefKind,
  ref: string,
  lookup: Lookup<A>,
  preferred: (a: A) => boolean = () => false
): Either.Either<A, NotFound | InvalidInput> => {
  const r = ref.trim()
  const lower = r.toLowerCase()
  const first = pick(kind, r, [...lookup.exact(lower), ...lookup.named(r)], preferred)
  if (Either.isRight(first) || first.left._tag === "InvalidInput" || !looksLikeIdPrefix(r)) return first
  return pick(kind, r, lookup.prefixed(lower), preferred)
}
