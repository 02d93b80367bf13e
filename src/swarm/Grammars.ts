// The tree-sitter grammars of swarm discovery: which file extensions map to which language,
// where each grammar's .wasm comes from (npm packages, resolved at run time; nothing is
// downloaded) and the query that picks out classes, functions and methods (docs/swarm.md).
import { Effect, Schema } from "effect"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import type { Parser, Query } from "web-tree-sitter"
import type { SwarmLanguage } from "./SwarmNode.js"

/** Discovery could not load a grammar, read a file or walk a directory. */
export class DiscoveryError extends Schema.TaggedError<DiscoveryError>()("DiscoveryError", {
  reason: Schema.Literal("grammar", "read", "walk"),
  path: Schema.String,
  message: Schema.String
}) {}

const extensions: ReadonlyArray<readonly [string, SwarmLanguage]> = [
  [".tsx", "tsx"],
  [".ts", "typescript"],
  [".mts", "typescript"],
  [".cts", "typescript"],
  [".js", "javascript"],
  [".jsx", "javascript"],
  [".mjs", "javascript"],
  [".cjs", "javascript"],
  [".py", "python"]
]

/** The language of a file by its extension, or undefined when swarm discovery skips it. */
export const languageOf = (path: string): SwarmLanguage | undefined => {
  for (const [ext, lang] of extensions) if (path.endsWith(ext)) return lang
  return undefined
}

// In the CJS bundle (dist/) import.meta.url is empty and __filename is the bundle's.
const require = createRequire(typeof __filename === "string" ? __filename : import.meta.url)
const packageDir = (pkg: string): string => dirname(require.resolve(`${pkg}/package.json`))

const wasmPath = (lang: SwarmLanguage): string => {
  switch (lang) {
    case "typescript":
      return join(packageDir("tree-sitter-typescript"), "tree-sitter-typescript.wasm")
    case "tsx":
      return join(packageDir("tree-sitter-typescript"), "tree-sitter-tsx.wasm")
    case "javascript":
      return join(packageDir("tree-sitter-javascript"), "tree-sitter-javascript.wasm")
    case "python":
      return join(packageDir("tree-sitter-python"), "tree-sitter-python.wasm")
  }
}

// Capture names: the declaration (`@class`, `@function`, `@method`) and its `@name`.
// JS/TS: a function bound to a variable (`const f = () => …`, `let g = function () {}`) is a
// function named by the variable; a class expression bound to a variable is a class; a class
// field holding an arrow/function expression is a method. Only declarations with a body
// count (overload signatures, `declare function`, abstract methods do not).
const functionValues = "[(arrow_function) (function_expression) (generator_function)]"
const tsQuery = `
(class_declaration name: (_) @name) @class
(abstract_class_declaration name: (_) @name) @class
(variable_declarator name: (identifier) @name value: (class)) @class
(function_declaration name: (_) @name) @function
(generator_function_declaration name: (_) @name) @function
(variable_declarator name: (identifier) @name value: ${functionValues}) @function
(class_body (method_definition name: (_) @name) @method)
(class_body (public_field_definition name: (_) @name value: ${functionValues}) @method)
`
const jsQuery = `
(class_declaration name: (_) @name) @class
(variable_declarator name: (identifier) @name value: (class)) @class
(function_declaration name: (_) @name) @function
(generator_function_declaration name: (_) @name) @function
(variable_declarator name: (identifier) @name value: ${functionValues}) @function
(class_body (method_definition name: (_) @name) @method)
(class_body (field_definition property: (_) @name value: ${functionValues}) @method)
`
// Python: a `def` whose nearest enclosing class/def is a class is a method (decided in Extract).
const pyQuery = `
(class_definition name: (identifier) @name) @class
(function_definition name: (identifier) @name) @function
`

const querySource = (lang: SwarmLanguage): string =>
  lang === "python" ? pyQuery : lang === "javascript" ? jsQuery : tsQuery

/** A loaded grammar: a parser set to the language and the declaration query. */
export interface Grammar {
  readonly language: SwarmLanguage
  readonly parser: Parser
  readonly query: Query
}

export type Grammars = Readonly<Record<SwarmLanguage, Grammar>>

/**
 * Initialise web-tree-sitter and load every grammar; the parsers are deleted with the scope.
 * web-tree-sitter itself is loaded here, with the first discovery: a daemon with no swarm never loads it.
 */
export const loadGrammars = Effect.acquireRelease(
  Effect.gen(function*() {
    const { Language, Parser, Query } = yield* Effect.tryPromise({
      try: async () => {
        // require, not import(): the bundle runs as a vm script, which has no dynamic import.
        const treeSitter = require("web-tree-sitter") as typeof import("web-tree-sitter")
        await treeSitter.Parser.init()
        return treeSitter
      },
      catch: (e) => new DiscoveryError({ reason: "grammar", path: "web-tree-sitter", message: String(e) })
    })
    const load = (lang: SwarmLanguage) =>
      Effect.tryPromise({
        try: async (): Promise<Grammar> => {
          const language = await Language.load(wasmPath(lang))
          const parser = new Parser()
          parser.setLanguage(language)
          return { language: lang, parser, query: new Query(language, querySource(lang)) }
        },
        catch: (e) => new DiscoveryError({ reason: "grammar", path: wasmPath(lang), message: String(e) })
      })
    const grammars: Grammars = yield* Effect.all({
      typescript: load("typescript"),
      tsx: load("tsx"),
      javascript: load("javascript"),
      python: load("python")
    })
    return grammars
  }),
  (grammars) =>
    Effect.sync(() => {
      for (const g of Object.values(grammars)) {
        g.query.delete()
        g.parser.delete()
      }
    })
)
