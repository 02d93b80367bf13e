// A plain view of the `substrat` command tree, for our help pages and shell completion.
//
// Why this module reads @effect/cli's descriptors by their runtime shape: @effect/cli 0.77
// exposes one level of the tree only (CommandDescriptor.getSubcommands returns a child's own
// node, without the child's subcommands), and no accessor for an option's name, aliases, value
// type or description apart from the rendered HelpDoc. Its own help and completion are built
// from the same nodes, so we read them (Standard/Subcommands/Map, Single/Both/WithDefault/Map…)
// through type guards on `unknown`; nothing else in the CLI depends on their shape. Effect-free.
import type * as HelpDoc from "@effect/cli/HelpDoc"
import type * as Span from "@effect/cli/HelpDoc/Span"

export interface OptionSpec {
  /** `--home` */
  readonly name: string
  /** `-f` */
  readonly aliases: ReadonlyArray<string>
  /** Takes no value (a flag). */
  readonly bool: boolean
  /** Must be given (no default). */
  readonly required: boolean
  /** Accepted values of a choice option. */
  readonly choices: ReadonlyArray<string>
  /** `integer`, `text`… (for the placeholder) */
  readonly type: string
  /** Set with Options.withPseudoName: what the value is (`dir`). */
  readonly pseudoName: string | undefined
  readonly description: string
}

export interface ArgSpec {
  readonly name: string
  readonly optional: boolean
  readonly repeated: boolean
  readonly description: string
}

export interface CommandNode {
  readonly name: string
  /** Names from the root: ["substrat", "agent", "send"] */
  readonly path: ReadonlyArray<string>
  /** First paragraph of the description: the one-line summary. */
  readonly summary: string
  /** Further paragraphs of the description (before the examples). */
  readonly details: ReadonlyArray<string>
  readonly examples: ReadonlyArray<string>
  readonly options: ReadonlyArray<OptionSpec>
  readonly args: ReadonlyArray<ArgSpec>
  readonly children: ReadonlyArray<CommandNode>
  /** Short names accepted for this command (`ls` for `list`). */
  readonly aliases: ReadonlyArray<string>
}

type Rec = { readonly [k: string]: unknown }
const isRec = (u: unknown): u is Rec => typeof u === "object" && u !== null
const tagOf = (u: unknown): string | undefined => (isRec(u) && typeof u._tag === "string" ? u._tag : undefined)
const str = (u: unknown): string => (typeof u === "string" ? u : "")

/** Plain text of a Span (no colours). */
export const spanText = (s: Span.Span): string => {
  switch (s._tag) {
    case "Text":
    case "URI":
      return s.value
    case "Sequence":
      return spanText(s.left) + spanText(s.right)
    case "Highlight":
    case "Strong":
    case "Weak":
      return spanText(s.value)
  }
}

/** The blocks of a HelpDoc in order: paragraphs and headers as plain text. */
export const docBlocks = (doc: HelpDoc.HelpDoc): Array<{ readonly kind: "header" | "p"; readonly text: string }> => {
  switch (doc._tag) {
    case "Empty":
      return []
    case "Header":
      return [{ kind: "header", text: spanText(doc.value) }]
    case "Paragraph":
      return [{ kind: "p", text: spanText(doc.value) }]
    case "Sequence":
      return [...docBlocks(doc.left), ...docBlocks(doc.right)]
    case "Enumeration":
      return doc.elements.flatMap(docBlocks)
    case "DescriptionList":
      return doc.definitions.flatMap(([span, d]) => [{ kind: "p" as const, text: spanText(span) }, ...docBlocks(d)])
  }
}

const isHelpDoc = (u: unknown): u is HelpDoc.HelpDoc => {
  const t = tagOf(u)
  return t === "Empty" || t === "Header" || t === "Paragraph" || t === "Sequence" || t === "Enumeration" || t === "DescriptionList"
}

const textOf = (u: unknown): string => (isHelpDoc(u) ? docBlocks(u).map((b) => b.text).join(" ").trim() : "")

/** The header that starts the examples in a description written with `describe`. */
export const EXAMPLES_HEADER = "EXAMPLES"

const descriptionParts = (u: unknown) => {
  const blocks = isHelpDoc(u) ? docBlocks(u) : []
  const at = blocks.findIndex((b) => b.kind === "header" && b.text === EXAMPLES_HEADER)
  const text = (at < 0 ? blocks : blocks.slice(0, at)).map((b) => b.text)
  return {
    summary: text[0] ?? "",
    details: text.slice(1),
    examples: at < 0 ? [] : blocks.slice(at + 1).map((b) => b.text)
  }
}

const optionsOf = (u: unknown, required: boolean): Array<OptionSpec> => {
  if (!isRec(u)) return []
  switch (u._tag) {
    case "Single": {
      const prim = u.primitiveType
      const ptag = tagOf(prim) ?? ""
      const choices = isRec(prim) && Array.isArray(prim.alternatives)
        ? prim.alternatives.map((a: unknown) => (Array.isArray(a) ? str(a[0]) : ""))
        : []
      const aliases = Array.isArray(u.aliases) ? u.aliases.map((a: unknown) => (str(a).length === 1 ? `-${str(a)}` : `--${str(a)}`)) : []
      return [{
        name: str(u.fullName) || `--${str(u.name)}`,
        aliases,
        bool: ptag === "Bool",
        required: required && ptag !== "Bool",
        choices,
        type: ptag.toLowerCase(),
        pseudoName: isRec(u.pseudoName) && u.pseudoName._tag === "Some" ? str(u.pseudoName.value) : undefined,
        description: textOf(u.description)
      }]
    }
    case "Both":
    case "OrElse":
      return [...optionsOf(u.left, required), ...optionsOf(u.right, required)]
    case "WithDefault":
      return optionsOf(u.options, false)
    case "Map":
    case "WithFallback":
      return optionsOf(u.options, required)
    case "Variadic":
      // A repeated flag is required only with a minimum count (`Options.atLeast(1)`).
      return optionsOf(u.argumentOption, required && isRec(u.min) && u.min._tag === "Some" && Number(u.min.value) > 0)
    case "KeyValueMap":
      return optionsOf(u.argumentOption, required)
    default:
      return []
  }
}

const argsOf = (u: unknown, optional: boolean, repeated: boolean): Array<ArgSpec> => {
  if (!isRec(u)) return []
  switch (u._tag) {
    case "Single":
      return [{ name: str(u.name), optional, repeated, description: textOf(u.description) }]
    case "Both":
      return [...argsOf(u.left, optional, repeated), ...argsOf(u.right, optional, repeated)]
    case "WithDefault":
    case "WithFallbackConfig":
      return argsOf(u.args, true, repeated)
    case "Map":
      return argsOf(u.args, optional, repeated)
    case "Variadic":
      return argsOf(u.args, optional || (isRec(u.min) && u.min._tag === "Some" && u.min.value === 0), true)
    default:
      return []
  }
}

/**
 * Short names, per command path: what users of docker/gh/kubectl type. main.ts rewrites them
 * to the full name before @effect/cli parses the command line (it has no command aliases).
 */
export const commandAliases: Readonly<Record<string, ReadonlyArray<string>>> = {
  "agent list": ["ls"],
  "agent terminate": ["rm", "kill"],
  "workspace list": ["ls"],
  "workspace delete": ["rm"],
  "session list": ["ls"],
  "session delete": ["rm"]
}

const build = (u: unknown, parentPath: ReadonlyArray<string>): CommandNode | undefined => {
  if (!isRec(u)) return undefined
  switch (u._tag) {
    case "Map":
      return build(u.command, parentPath)
    case "Standard":
    case "GetUserInput": {
      const path = [...parentPath, str(u.name)]
      return {
        name: str(u.name),
        path,
        ...descriptionParts(u.description),
        options: optionsOf(u.options, true),
        args: argsOf(u.args, false, false),
        children: [],
        aliases: commandAliases[path.slice(1).join(" ")] ?? []
      }
    }
    case "Subcommands": {
      const parent = build(u.parent, parentPath)
      if (parent === undefined) return undefined
      const kids = Array.isArray(u.children) ? u.children : []
      const children = kids.flatMap((c: unknown) => {
        const n = build(c, parent.path)
        return n === undefined ? [] : [n]
      })
      return { ...parent, children }
    }
    default:
      return undefined
  }
}

/** The tree of an @effect/cli Command (its `descriptor`). */
export const commandTree = (command: { readonly descriptor: unknown }): CommandNode => {
  const node = build(command.descriptor, [])
  if (node === undefined) throw new Error("not an @effect/cli command")
  return node
}

/** A child by name or alias. */
export const childNamed = (node: CommandNode, word: string): CommandNode | undefined =>
  node.children.find((c) => c.name === word || c.aliases.includes(word))

export const optionNamed = (node: CommandNode, word: string): OptionSpec | undefined =>
  node.options.find((o) => o.name === word || o.aliases.includes(word))

/** Every command of the tree, depth first. */
export const allNodes = (node: CommandNode): Array<CommandNode> => [node, ...node.children.flatMap(allNodes)]

export interface Resolved {
  readonly node: CommandNode
  /** argv with aliases replaced by full command names. */
  readonly argv: ReadonlyArray<string>
  /** Positional words after the command path (option values skipped). */
  readonly positionals: ReadonlyArray<string>
  /** Index in `argv` of the first positional word that is not a subcommand of a group, if any. */
  readonly strayAt: number | undefined
}

/**
 * Walk `args` (argv without node and the script) down the tree: subcommand words (or their
 * aliases) descend, options and their values are skipped.
 */
export const resolve = (root: CommandNode, args: ReadonlyArray<string>): Resolved => {
  let node = root
  const out: Array<string> = []
  const positionals: Array<string> = []
  let strayAt: number | undefined
  let i = 0
  for (; i < args.length; i++) {
    const a = args[i]!
    if (a === "--") {
      out.push(...args.slice(i))
      positionals.push(...args.slice(i + 1))
      break
    }
    if (a.startsWith("-") && a.length > 1) {
      out.push(a)
      const opt = optionNamed(node, a.split("=")[0]!)
      if (opt !== undefined && !opt.bool && !a.includes("=") && i + 1 < args.length) out.push(args[++i]!)
      continue
    }
    const child = positionals.length === 0 ? childNamed(node, a) : undefined
    if (child !== undefined) {
      node = child
      out.push(child.name)
      continue
    }
    if (node.children.length > 0 && strayAt === undefined && positionals.length === 0) strayAt = out.length
    positionals.push(a)
    out.push(a)
  }
  return { node, argv: out, positionals, strayAt }
}
