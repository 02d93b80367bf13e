// Help pages, the version line and "did you mean" for the `substrat` CLI. Effect-free.
//
// Why not @effect/cli's own help: it renders every option with its type's boilerplate ("A
// user-defined piece of text. … This setting is optional."), shows USAGE as `$ send …`
// without the command path, lists the whole tree under the top level (80+ lines), prints ANSI
// escapes whatever the terminal, and has no examples. We render from the same descriptors
// (Tree.ts) and leave parsing to @effect/cli; main.ts answers --help/-h, --version and bare
// groups with these pages before @effect/cli runs.
import * as HelpDoc from "@effect/cli/HelpDoc"
import type { ProcessEnv } from "../config/Config.js"
import { type ArgSpec, type CommandNode, EXAMPLES_HEADER, type OptionSpec } from "./Tree.js"

/**
 * A command's description: a one-line summary, optional detail paragraphs and 1–3 examples.
 * Stored as @effect/cli's HelpDoc (Command.withDescription); Tree.ts reads it back.
 */
export const describe = (
  summary: string,
  more: { readonly details?: ReadonlyArray<string>; readonly examples?: ReadonlyArray<string> } = {}
): HelpDoc.HelpDoc =>
  HelpDoc.blocks([
    HelpDoc.p(summary),
    ...(more.details ?? []).map((d) => HelpDoc.p(d)),
    ...((more.examples ?? []).length > 0 ? [HelpDoc.h1(EXAMPLES_HEADER), ...(more.examples ?? []).map((e) => HelpDoc.p(e))] : [])
  ])

/** Colours only on a terminal that wants them (not piped, not NO_COLOR, not TERM=dumb). */
export const wantsColor = (env: ProcessEnv, isTTY: boolean): boolean =>
  isTTY && (env["NO_COLOR"] === undefined || env["NO_COLOR"] === "") && env["TERM"] !== "dumb"

export interface Style {
  readonly color: boolean
  readonly width: number
}

const bold = (style: Style, s: string) => (style.color ? `\x1b[1m${s}\x1b[0m` : s)

/** Word-wrap `text` to `width`, continuation lines indented by `indent`. */
const wrap = (text: string, width: number, indent: number): string => {
  const words = text.split(/\s+/).filter((w) => w.length > 0)
  const lines: Array<string> = []
  let line = ""
  for (const w of words) {
    if (line.length > 0 && indent + line.length + 1 + w.length > width) {
      lines.push(line)
      line = w
    } else line = line.length === 0 ? w : `${line} ${w}`
  }
  if (line.length > 0) lines.push(line)
  return lines.join(`\n${" ".repeat(indent)}`)
}

/** Two columns: names padded, descriptions wrapped under themselves. */
const twoColumns = (rows: ReadonlyArray<readonly [string, string]>, style: Style): string => {
  const left = Math.min(Math.max(...rows.map(([l]) => l.length)), 28)
  return rows
    .map(([l, r]) => {
      const pad = l.length > left ? `${l}\n${" ".repeat(left + 4)}` : `${l.padEnd(left)}  `
      return `  ${pad}${wrap(r, Math.max(style.width, left + 30), left + 4)}`
    })
    .join("\n")
}

const placeholder = (o: OptionSpec): string => {
  if (o.bool) return ""
  if (o.choices.length > 0) return ` ${o.choices.join("|")}`
  if (o.pseudoName !== undefined) return ` <${o.pseudoName}>`
  if (o.type === "integer") return " <n>"
  return ` <${o.name.replace(/^-+/, "")}>`
}

const optionLabel = (o: OptionSpec): string => {
  const short = o.aliases.filter((a) => /^-[^-]$/.test(a))
  return `${short.length > 0 ? `${short.join(", ")}, ` : "    "}${o.name}${placeholder(o)}`
}

const argLabel = (a: ArgSpec): string => `${a.name.startsWith("<") ? a.name : `<${a.name}>`}${a.repeated ? "..." : ""}`

const helpFlag: OptionSpec = {
  name: "--help",
  aliases: ["-h"],
  bool: true,
  required: false,
  choices: [],
  type: "bool",
  pseudoName: undefined,
  description: "Show this help"
}

/** USAGE line: the full command path, required flags, `[flags]`, then the arguments. */
export const usageLine = (node: CommandNode): string => {
  const parts = [node.path.join(" ")]
  if (node.children.length > 0) parts.push("<command>")
  for (const o of node.options) if (o.required) parts.push(`${o.name}${placeholder(o)}`)
  if (node.options.some((o) => !o.required) || node.children.length > 0) parts.push("[flags]")
  for (const a of node.args) parts.push(a.optional ? `[${argLabel(a)}]` : argLabel(a))
  return parts.join(" ")
}

const section = (style: Style, title: string, body: string) => `${bold(style, title)}\n${body}`

const examplesSection = (style: Style, examples: ReadonlyArray<string>) =>
  section(style, "EXAMPLES", examples.map((e) => `  ${e}`).join("\n"))

const rootFooter = "Settings (flags, SUBSTRAT_* variables, config.toml): substrat config. Reference: docs/cli.md"

/** The help page of one command (a group lists its subcommands). */
export const renderHelp = (node: CommandNode, style: Style, version: string): string => {
  const isRoot = node.path.length === 1
  const out: Array<string> = []
  out.push(isRoot ? `${node.name} ${version} — ${node.summary}` : node.summary)
  for (const d of node.details) out.push(wrap(d, style.width, 0))
  out.push(section(style, "USAGE", `  ${usageLine(node)}`))
  if (node.children.length > 0) {
    out.push(section(
      style,
      "COMMANDS",
      twoColumns(node.children.map((c) => [[c.name, ...c.aliases].join(", "), c.summary]), style)
    ))
  }
  if (node.args.length > 0) {
    out.push(section(style, "ARGUMENTS", twoColumns(node.args.map((a) => [argLabel(a), a.description]), style)))
  }
  const flags = isRoot
    ? [
      helpFlag,
      { ...helpFlag, name: "--version", aliases: [], description: "Print the version" },
      {
        ...helpFlag,
        name: "--completions",
        aliases: [],
        bool: false,
        choices: ["bash", "zsh", "fish"],
        description: "Print a shell completion script (see docs/cli.md, Shell completion)"
      }
    ]
    : [...node.options, helpFlag]
  out.push(section(style, "FLAGS", twoColumns(flags.map((o) => [optionLabel(o), o.description]), style)))
  if (node.examples.length > 0) out.push(examplesSection(style, node.examples))
  if (isRoot) out.push(`${rootFooter}\nRun \`substrat <command> --help\` for a command's flags and examples.`)
  else if (node.children.length > 0) out.push(`Run \`${node.path.join(" ")} <command> --help\` for a command's flags and examples.`)
  return out.join("\n\n")
}

/** `substrat --version`: one line. */
export const versionLine = (name: string, version: string): string => `${name} ${version}`

/** Levenshtein distance (small strings). */
export const distance = (a: string, b: string): number => {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j]!
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1))
      prev = cur
    }
  }
  return row[b.length]!
}

/** Candidates close to `word` (distance ≤ 2, or a prefix of it), closest first. */
export const closest = (word: string, candidates: ReadonlyArray<string>): Array<string> =>
  candidates
    .map((c) => ({ c, d: c.startsWith(word) && word.length >= 2 ? 1 : distance(word, c) }))
    .filter((x) => x.d <= Math.max(1, Math.min(2, Math.floor(word.length / 2))))
    .sort((a, b) => a.d - b.d)
    .map((x) => x.c)

const suggestion = (word: string, candidates: ReadonlyArray<string>): string => {
  const near = closest(word, candidates)
  return near.length === 0 ? "" : `; did you mean ${near.slice(0, 3).map((c) => `'${c}'`).join(" or ")}?`
}

/** `substrat agent crate` → the error line (without the `substrat: ` prefix). */
export const unknownCommandMessage = (node: CommandNode, word: string): string => {
  const names = node.children.flatMap((c) => [c.name, ...c.aliases])
  return `unknown command '${word}' for '${node.path.join(" ")}'${suggestion(word, names)} (see ${node.path.join(" ")} --help)`
}

/** Flags every command accepts besides its own (@effect/cli's built-ins). */
export const builtInFlags = ["--help", "-h", "--version", "--completions", "--log-level", "--wizard"] as const

/** `substrat agent send --jsn …` → the error line, or undefined when every flag is known. */
export const unknownFlagMessage = (node: CommandNode, argv: ReadonlyArray<string>): string | undefined => {
  const known = [...node.options.flatMap((o) => [o.name, ...o.aliases]), ...builtInFlags]
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!
    if (a === "--") return undefined
    if (!a.startsWith("-") || a.length < 2 || /^-\d/.test(a)) continue
    const flag = a.split("=")[0]!
    const option = node.options.find((o) => o.name === flag || o.aliases.includes(flag))
    if ((option !== undefined && !option.bool) || flag === "--log-level") {
      if (!a.includes("=")) i++
      continue
    }
    if (known.includes(flag)) continue
    const near = suggestion(flag, known.filter((k) => k.startsWith("--")))
    return `unknown flag '${flag}' for '${node.path.join(" ")}'${near} (see ${node.path.join(" ")} --help)`
  }
  return undefined
}
