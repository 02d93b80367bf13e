// One file's nodes: the file itself and its classes, functions and methods, nested by the
// enclosing declaration, each with its own-text hash. Pure apart from the (synchronous)
// tree-sitter parse; the rules of what counts are in Grammars.ts and docs/swarm.md.
import type { Node } from "web-tree-sitter"
import type { Grammar } from "./Grammars.js"
import { agentNameOf, type LineRange, makeNodeId, sha256, type SwarmNode, type SwarmNodeId } from "./SwarmNode.js"

type CodeKind = "class" | "function" | "method"

interface Decl {
  kind: CodeKind
  readonly name: string
  readonly start: number
  readonly end: number
  readonly lines: LineRange
  readonly syntaxError: boolean
  readonly children: Array<Decl>
  qualified: string
}

/** The directory part of a relative path; `.` at the root. */
export const dirOf = (path: string): string => {
  const i = path.lastIndexOf("/")
  return i < 0 ? "." : path.slice(0, i)
}

// The span a declaration owns: its `export`, its `const f =` (when it is the only declarator)
// and its Python decorators belong to it.
const outerSpan = (decl: Node): Node => {
  let span = decl
  if (span.type === "variable_declarator") {
    const declaration = span.parent
    if (declaration !== null && declaration.namedChildren.filter((c) => c?.type === "variable_declarator").length === 1) {
      span = declaration
    }
  }
  const parent = span.parent
  if (parent !== null && (parent.type === "export_statement" || parent.type === "decorated_definition")) span = parent
  return span
}

/**
 * A node's own text: `text[start, end)` with its children's spans cut out, trailing blanks
 * trimmed and blank lines dropped — so editing a method changes only the method's hash, and
 * adding, removing or renaming a child leaves the parent's hash alone.
 */
export const ownText = (text: string, start: number, end: number, children: ReadonlyArray<{ readonly start: number; readonly end: number }>): string => {
  let out = ""
  let at = start
  for (const c of children) {
    out += text.slice(at, c.start) + "\n"
    at = c.end
  }
  out += text.slice(at, end)
  const lines: Array<string> = []
  for (const line of out.split("\n")) {
    const t = line.trimEnd()
    if (t.trim() !== "") lines.push(t)
  }
  return lines.join("\n")
}

const lineCount = (text: string): number => {
  let n = 1
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) if (i < text.length - 1) n++
  return n
}

/**
 * The text the Python grammar parses: in each run of comment-only lines with the same indentation,
 * the lines between the first and the last are blanked (same length, so every offset and row stays).
 * tree-sitter-python's scanner rescans the rest of a comment run for every comment after an
 * indented block (quadratic: 20,000 such lines take minutes); blocks end and dedent only where a
 * comment's indentation changes, so the kept first/last lines give the same declarations and spans.
 */
export const thinCommentRuns = (text: string): string => {
  const lines = text.split("\n")
  const indentOf = (line: string): number | undefined => {
    const m = /^([ \t]*)#/.exec(line)
    return m === null ? undefined : m[1]!.length
  }
  let changed = false
  for (let i = 0; i < lines.length;) {
    const indent = indentOf(lines[i]!)
    let j = i + 1
    if (indent !== undefined) while (j < lines.length && indentOf(lines[j]!) === indent && lines[j]!.slice(0, indent) === lines[i]!.slice(0, indent)) j++
    for (let k = i + 1; k < j - 1; k++) {
      lines[k] = " ".repeat(lines[k]!.length)
      changed = true
    }
    i = j
  }
  return changed ? lines.join("\n") : text
}

/**
 * CPU time a parse may take before it is cancelled (the file then counts as unparsable: its file
 * node only, `syntaxError`): a fixed part and a part per character — ordinary code parses at
 * about a tenth of this, so only a pathological file (an agent may write one) reaches it.
 */
const parseBudgetMicros = (chars: number): number => 250_000 + 2 * chars

const cpuMicros = (): number => {
  const u = process.cpuUsage()
  return u.user + u.system
}

const collectDecls = (grammar: Grammar, text: string): { decls: Array<Decl>; syntaxError: boolean } => {
  const started = cpuMicros()
  const budget = parseBudgetMicros(text.length)
  const tree = grammar.parser.parse(grammar.language === "python" ? thinCommentRuns(text) : text, null, {
    // Returning true cancels the parse (the declared type says void).
    progressCallback: () => cpuMicros() - started > budget
  })
  if (tree === null) return { decls: [], syntaxError: true }
  try {
    const decls: Array<Decl> = []
    const seen = new Set<string>()
    for (const match of grammar.query.matches(tree.rootNode)) {
      let decl: Node | undefined
      let kind: CodeKind | undefined
      let name: string | undefined
      for (const c of match.captures) {
        if (c.name === "name") name = detached(c.node.text)
        else if (c.name === "class" || c.name === "function" || c.name === "method") {
          decl = c.node
          kind = c.name
        }
      }
      if (decl === undefined || kind === undefined || name === undefined) continue
      const span = outerSpan(decl)
      const key = `${span.startIndex}:${span.endIndex}`
      if (seen.has(key)) continue
      seen.add(key)
      decls.push({
        kind,
        name,
        start: span.startIndex,
        end: span.endIndex,
        lines: { start: span.startPosition.row + 1, end: span.endPosition.row + 1 },
        syntaxError: span.hasError,
        children: [],
        qualified: name
      })
    }
    return { decls, syntaxError: tree.rootNode.hasError }
  } finally {
    tree.delete()
  }
}

/**
 * A copy of `s` that does not point into the file's text: a node's text is a slice of the source
 * string, and V8 keeps the whole source alive for a slice of 13 characters or more.
 */
const detached = (s: string): string => s.length < 13 ? s : Buffer.from(s, "utf8").toString("utf8")

/** The file node and its code nodes, in source order (parents before children). */
export const extractFile = (grammar: Grammar, path: string, text: string): Array<SwarmNode> => {
  const parsed = collectDecls(grammar, text)
  const decls = parsed.decls.sort((a, b) => a.start - b.start || b.end - a.end)
  const top: Array<Decl> = []
  const stack: Array<Decl> = []
  for (const d of decls) {
    while (stack.length > 0 && stack[stack.length - 1]!.end <= d.start) stack.pop()
    const parent = stack[stack.length - 1]
    if (grammar.language === "python" && d.kind === "function" && parent?.kind === "class") d.kind = "method"
    if (parent === undefined) top.push(d)
    else {
      parent.children.push(d)
      d.qualified = `${parent.qualified}.${d.name}`
    }
    stack.push(d)
  }

  const fileId = makeNodeId(path, "file")
  const nodes: Array<SwarmNode> = [{
    id: fileId,
    kind: "file",
    path,
    name: path,
    parent: makeNodeId(dirOf(path), "dir"),
    language: grammar.language,
    lines: { start: 1, end: lineCount(text) },
    hash: sha256(ownText(text, 0, text.length, top)),
    fileHash: sha256(text),
    syntaxError: parsed.syntaxError,
    agentName: agentNameOf("file", path)
  }]
  const taken = new Map<string, number>()
  const visit = (d: Decl, parent: SwarmNodeId): void => {
    const base = makeNodeId(path, d.kind, d.qualified)
    const n = (taken.get(base) ?? 0) + 1
    taken.set(base, n)
    const id = n === 1 ? base : makeNodeId(path, d.kind, `${d.qualified}~${n}`)
    nodes.push({
      id,
      kind: d.kind,
      path,
      name: d.qualified,
      parent,
      language: grammar.language,
      lines: d.lines,
      hash: sha256(ownText(text, d.start, d.end, d.children)),
      fileHash: null,
      syntaxError: d.syntaxError,
      agentName: agentNameOf(d.kind, d.qualified)
    })
    for (const c of d.children) visit(c, id)
  }
  for (const d of top) visit(d, fileId)
  return nodes
}
