// Shell completion for bash, zsh and fish.
//
// Why not @effect/cli's generated scripts: its bash script matches "${cmd},${word}" against
// keys like `substrat,agent,send` while `cmd` has become `substrat__agent`, so below the top
// level only the global flags are offered; and static scripts cannot offer the daemon's agent
// and workspace names. Ours are a few lines each that ask the CLI itself
// (`substrat __complete <words…>`, as cobra/gh/kubectl do), which answers from the same command
// tree as the help (Tree.ts) and, for agent/workspace/session arguments, from the daemon.
import { type CommandNode, optionNamed, resolve } from "./Tree.js"

export type Shell = "bash" | "zsh" | "fish"
export const shells: ReadonlyArray<Shell> = ["bash", "zsh", "fish"]

/** First line of the answer that asks the shell to complete paths instead. */
export const FILES = ":files"
export const DIRS = ":dirs"

/** What a value is, when it comes from the daemon. */
export type Dynamic = "agent" | "workspace" | "session"

/** Provider specs `--provider` accepts (docs/providers.md). */
const providers = ["scripted", "scripted:demo", "scripted:echo", "claude", "codex", "cursor-agent", "openai"]

const dynamicOfArg: Readonly<Record<string, Dynamic>> = { agent: "agent", workspace: "workspace", session: "session" }
const dynamicOfOption: Readonly<Record<string, Dynamic>> = { "--workspace": "workspace", "--parent": "workspace", "--tree": "agent" }

/** What to offer for the last word of `words` (the words after `substrat`; the last may be ""). */
export type Want =
  | { readonly _tag: "words"; readonly words: ReadonlyArray<string> }
  | { readonly _tag: "dynamic"; readonly kind: Dynamic }
  | { readonly _tag: "paths"; readonly dirsOnly: boolean }

export const want = (root: CommandNode, words: ReadonlyArray<string>): { readonly want: Want; readonly current: string } => {
  const current = words[words.length - 1] ?? ""
  const before = words.slice(0, -1)
  const r = resolve(root, before)
  const node = r.node
  const prev = before[before.length - 1]
  const prevOption = prev !== undefined && prev.startsWith("-") && !prev.includes("=") ? optionNamed(node, prev) : undefined
  if (prevOption !== undefined && !prevOption.bool) {
    if (prevOption.choices.length > 0) return { current, want: { _tag: "words", words: prevOption.choices } }
    if (prevOption.name === "--home") return { current, want: { _tag: "paths", dirsOnly: true } }
    if (prevOption.name === "--provider") return { current, want: { _tag: "words", words: providers } }
    const dyn = dynamicOfOption[prevOption.name]
    if (dyn !== undefined) return { current, want: { _tag: "dynamic", kind: dyn } }
    return { current, want: { _tag: "words", words: [] } }
  }
  if (current.startsWith("-")) {
    const own = node.options.flatMap((o) => [o.name, ...o.aliases.filter((a) => a.startsWith("--"))])
    const extra = node.path.length === 1 ? ["--help", "--version", "--completions"] : ["--help"]
    return { current, want: { _tag: "words", words: [...own, ...extra] } }
  }
  if (node.children.length > 0 && r.positionals.length === 0) {
    return { current, want: { _tag: "words", words: node.children.map((c) => c.name) } }
  }
  const arg = node.args[Math.min(r.positionals.length, node.args.length - 1)]
  if (arg === undefined || (r.positionals.length >= node.args.length && !arg.repeated)) {
    return { current, want: { _tag: "words", words: [] } }
  }
  const argName = arg.name.replace(/^<|>$/g, "")
  const dyn = dynamicOfArg[argName]
  if (dyn !== undefined) return { current, want: { _tag: "dynamic", kind: dyn } }
  if (argName === "host-path") return { current, want: { _tag: "paths", dirsOnly: false } }
  return { current, want: { _tag: "words", words: [] } }
}

/** The lines `substrat __complete` prints: candidates starting with `current`, or a path marker. */
export const answer = (w: Want, current: string, dynamic: ReadonlyArray<string>): ReadonlyArray<string> => {
  switch (w._tag) {
    case "paths":
      return [w.dirsOnly ? DIRS : FILES]
    case "dynamic":
      return [...new Set(dynamic)].filter((c) => c.startsWith(current))
    case "words":
      return w.words.filter((c) => c.startsWith(current))
  }
}

/** The `--home` given on the words being completed, if any. */
export const homeIn = (words: ReadonlyArray<string>): string | undefined => {
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!
    if (w === "--home" && i + 1 < words.length - 1) return words[i + 1]
    if (w.startsWith("--home=")) return w.slice("--home=".length)
  }
  return undefined
}

/** The script `substrat --completions <shell>` prints. */
export const script = (shell: Shell, name: string): string => {
  const fn = `_${name.replace(/[^A-Za-z0-9_]/g, "_")}_complete`
  switch (shell) {
    case "bash":
      return `# ${name} completion for bash: eval "$(${name} --completions bash)" in ~/.bashrc
${fn}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" IFS=$'\\n'
  local -a out
  out=($("\${COMP_WORDS[0]}" __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
  case "\${out[0]}" in
    ${DIRS}) COMPREPLY=($(compgen -d -- "$cur")) ;;
    ${FILES}) COMPREPLY=($(compgen -f -- "$cur")) ;;
    *) COMPREPLY=("\${out[@]}") ;;
  esac
}
complete -o filenames -F ${fn} ${name}`
    case "zsh":
      return `#compdef ${name}
# ${name} completion for zsh: eval "$(${name} --completions zsh)" in ~/.zshrc (after compinit)
${fn}() {
  local -a out
  out=("\${(@f)$(\${words[1]} __complete "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  case "\${out[1]}" in
    ${DIRS}) _path_files -/ ;;
    ${FILES}) _files ;;
    *) compadd -- "\${out[@]}" ;;
  esac
}
compdef ${fn} ${name}`
    case "fish":
      return `# ${name} completion for fish: ${name} --completions fish > ~/.config/fish/completions/${name}.fish
function ${fn}
  set -l words (commandline -opc) (commandline -ct)
  set -l out ($words[1] __complete $words[2..-1] 2>/dev/null)
  switch "$out[1]"
    case ${DIRS}
      __fish_complete_directories (commandline -ct)
    case ${FILES}
      __fish_complete_path (commandline -ct)
    case '*'
      printf '%s\\n' $out
  end
end
complete -c ${name} -f -a '(${fn})'`
  }
}
