// Which paths swarm discovery skips: a few names by default (node_modules, .git, dist) and
// the simple patterns of the root `.gitignore` (`name`, `*.ext`, `dir/`, `/anchored/path`,
// `a/**/b`; negations `!` are not supported and are ignored).

export const defaultIgnoredNames: ReadonlyArray<string> = ["node_modules", ".git", "dist"]

interface Rule {
  readonly regex: RegExp
  readonly anchored: boolean
  readonly dirOnly: boolean
}

const globToRegex = (glob: string): RegExp => {
  let re = ""
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]!
    if (ch === "*") {
      if (glob[i + 1] === "*") {
        re += glob[i + 2] === "/" ? "(?:.*/)?" : ".*"
        i += glob[i + 2] === "/" ? 2 : 1
      } else re += "[^/]*"
    } else if (ch === "?") re += "[^/]"
    else re += ch.replace(/[.+^${}()|[\]\\]/g, "\\$&")
  }
  return new RegExp(`^${re}$`)
}

const parseRule = (line: string): Rule | undefined => {
  let p = line.trim()
  if (p === "" || p.startsWith("#") || p.startsWith("!")) return undefined
  const dirOnly = p.endsWith("/")
  if (dirOnly) p = p.slice(0, -1)
  const anchored = p.includes("/")
  if (p.startsWith("/")) p = p.slice(1)
  if (p === "") return undefined
  return { regex: globToRegex(p), anchored, dirOnly }
}

/** `(relPath, isDir) => skip?` for `names` (matched against each path segment's name) and a `.gitignore` text. */
export const makeIgnore = (names: ReadonlyArray<string>, gitignore: string): (relPath: string, isDir: boolean) => boolean => {
  const nameSet = new Set(names)
  const rules = gitignore.split(/\r?\n/).flatMap((l) => {
    const r = parseRule(l)
    return r === undefined ? [] : [r]
  })
  return (relPath, isDir) => {
    const base = relPath.slice(relPath.lastIndexOf("/") + 1)
    if (nameSet.has(base)) return true
    for (const r of rules) {
      if (r.dirOnly && !isDir) continue
      if (r.regex.test(r.anchored ? relPath : base)) return true
    }
    return false
  }
}
