// Attacks on the branch-children surface of repository workspaces (docs/sandbox.md, "Branch
// children and the merge queue"), replayed by `npm run chaos -- --only security` and by
// test/integration/repo-queue-attacks.test.ts, each in the world of ./repo.ts (a home, the
// daemon's own services, the user's repository, a secret repository, a planted program):
//   24.6 the merge queue's check runs on a tree an agent wrote: links in it (absolute, relative
//        up out of the scratch checkout) and the script the check runs try to read or write the
//        parent's workspace, its history, $SUBSTRAT_HOME, the user's and another repository;
//        a link left behind for the daemon's clean-up;
//   24.7 the parent agent plants alternates, refs and config in its clone's `.git` before a
//        branch child's clone is made from its branch;
//   24.8 `workspace revert` writes a turn's files back while the agent swaps the directory they
//        go into for a link to a directory outside, again and again.
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Either } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { TurnId } from "../../src/domain/ids.js"
import { runMergeCheck } from "../../src/sandbox/MergeCheck.js"
import type { Sandbox } from "../../src/sandbox/Sandbox.js"
import { WorkspaceHistory } from "../../src/sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { gitIn } from "../../test/support/foreignRepo.js"
import type { Attack } from "./attack.js"
import { withRepoWorld } from "./repo.js"

const hasObject = (gitDir: string, commit: string) => {
  try {
    execFileSync("git", ["--git-dir", gitDir, "cat-file", "-e", `${commit}^{commit}`], {
      stdio: "ignore",
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_PARAMETERS: "'safe.directory'='*'" }
    })
    return true
  } catch {
    return false
  }
}

/** Every path under `dir` (links not followed) whose name is `name`. */
const findNamed = (dir: string, name: string): Array<string> => {
  const found: Array<string> = []
  const walk = (d: string) => {
    for (const e of Fs.readdirSync(d, { withFileTypes: true })) {
      const p = Path.join(d, e.name)
      if (e.name === name) found.push(p)
      if (e.isDirectory()) walk(p)
    }
  }
  walk(dir)
  return found
}

/** A file's bytes, or null when it is not there. */
const bytesOf = (p: string) => (Fs.existsSync(p) ? Fs.readFileSync(p, "utf8") : null)

const checkCheckout: Attack = {
  name: "24.6 the merge queue's check checkout: links in a branch child's tree and the script the check runs reach the parent's workspace and history, $SUBSTRAT_HOME, the user's or another repository, or a link left for the clean-up",
  run: () =>
    withRepoWorld(async (w) => {
      const homeMarker = "HOME-MARKER-24.6"
      Fs.writeFileSync(Path.join(w.home, "marker.txt"), `${homeMarker}\n`)
      const parent = await w.run(Effect.flatMap(WorkspaceStore, (s) => s.create({ name: "lead", repo: { path: w.repo }, check: "sh check.sh" })))
      Fs.writeFileSync(Path.join(parent.root_path, "parent-secret.txt"), "PARENT-MARKER\n")
      const kid = await w.run(Effect.flatMap(WorkspaceStore, (s) => s.create({ fork: { parent: parent.id, child: "kid" } })))
      const parentDir = Path.dirname(parent.root_path)
      // What the child commits: links out of the checkout, and the script the owner's check runs.
      const links: Record<string, string> = {
        "l-home": w.home,
        "l-secret": w.secret,
        "l-user": w.repo,
        "l-parent": parentDir,
        "l-up": "..",
        "l-upup": "../.."
      }
      const reads = ["marker.txt", "secret.txt", "parent-secret.txt", "history.git/config", "root/parent-secret.txt", ".git/config", `${Path.basename(parentDir)}/history.git/config`]
      // Only what got through is printed (the output's tail reaches the child).
      const script = [
        ...Object.keys(links).flatMap((l) => [
          `ls -a ${l}/ 2>/dev/null | sed 's/^/LS ${l}: /'`,
          ...reads.map((r) => `cat ${l}/${r} 2>/dev/null | head -3 | sed 's/^/READ ${l}: /'`),
          `echo pwned 2>/dev/null > ${l}/PWNED-24.6 && echo WROTE ${l}`,
          `mkdir -p ${l}/history.git/hooks 2>/dev/null && echo pwned 2>/dev/null > ${l}/history.git/hooks/PWNED-24.6 && echo WROTE-HOOK ${l}`
        ]),
        // Left behind for the daemon's clean-up of the scratch directory: links to directories outside.
        `ln -s ${w.secret} leftover-secret; mkdir -p deep && ln -s ${parentDir} deep/leftover-parent`,
        "echo CHECK-RAN",
        "exit 1"
      ].join("\n")
      await w.agent(kid, [
        ...Object.entries(links).map(([l, t]) => `ln -s '${t}' ${l}`),
        `cat > check.sh <<'SH'\n${script}\nSH`,
        "git add -A && git commit -qm 'links and a check script'"
      ].join(" && "))
      await w.turn(kid, "kid")
      const kidGit = Path.join(w.home, "workspaces", kid.id, "history.git")
      const branch = gitIn(w.dir, ["--git-dir", kidGit, "symbolic-ref", "--short", "HEAD"]).trim()
      // What the queue's worker does with the child's branch: fetched into the parent's history, checked.
      const output = await w.run(Effect.gen(function*() {
        const h = yield* WorkspaceHistory
        const context = yield* Effect.context<Sandbox | CommandExecutor.CommandExecutor | FileSystem.FileSystem>()
        return yield* h.exclusive(parent.id, (loc, git) =>
          Effect.gen(function*() {
            yield* git(["fetch", "-q", "--no-tags", "--no-write-fetch-head", `file://${kidGit}`, `+refs/heads/${branch}:refs/substrat/queue/attack`])
            const theirs = (yield* git(["rev-parse", "refs/substrat/queue/attack^{commit}"])).stdout.trim()
            return yield* runMergeCheck({ spec: parent, git, gitDir: loc.gitDir, commit: theirs, item: "attack", timeoutSeconds: 60 }).pipe(Effect.provide(context))
          }))
      }))
      const out = output ?? ""
      const seen = out.split("\n").filter((l) => /^(LS|READ|WROTE)/.test(l))
      const leaked = [homeMarker, "not for agents", "PARENT-MARKER", "repositoryformatversion", "history.git", "marker.txt", "secret.txt", "index.js"]
        .filter((m) => seen.some((l) => l.includes(m)))
      const written = findNamed(w.dir, "PWNED-24.6")
      const gone = [Path.join(w.secret, "secret.txt"), Path.join(parent.root_path, "parent-secret.txt"), Path.join(parentDir, "history.git", "HEAD")].filter((p) => !Fs.existsSync(p))
      const ran = out.includes("CHECK-RAN")
      return {
        breached: !ran || leaked.length > 0 || seen.some((l) => l.startsWith("WROTE")) || written.length > 0 || gone.length > 0,
        detail: `check ran: ${ran}; read from outside the checkout: ${leaked.length === 0 ? "nothing" : leaked.join(", ")}; check wrote outside: ${seen.filter((l) => l.startsWith("WROTE")).length}; written outside: ${written.length === 0 ? "nothing" : written.join(", ")}; removed outside by the clean-up: ${gone.length === 0 ? "nothing" : gone.join(", ")}`
      }
    })
}

const forkClone: Attack = {
  name: "24.7 a branch child's clone made while its parent's clone has alternates, refs, packed-refs and config planted in .git pointing at another repository and at another workspace's history under $SUBSTRAT_HOME",
  run: () =>
    withRepoWorld(async (w) => {
      const other = await w.workspace("other")
      Fs.appendFileSync(Path.join(other.root_path, "readme.md"), "other's work\n")
      await w.turn(other, "someone")
      const otherGit = Path.join(w.home, "workspaces", other.id, "history.git")
      const otherHead = gitIn(w.dir, ["--git-dir", otherGit, "rev-parse", "HEAD"]).trim()
      const parent = await w.workspace("lead")
      Fs.appendFileSync(Path.join(parent.root_path, "readme.md"), "lead's work\n")
      await w.turn(parent, "lead")
      const git = Path.join(parent.root_path, ".git")
      Fs.writeFileSync(Path.join(git, "objects", "info", "alternates"), `${Path.join(w.secret, ".git", "objects")}\n${Path.join(otherGit, "objects")}\n`)
      // Refs to those objects beside the parent's own branch (a clone made from the parent's clone would take them all).
      Fs.writeFileSync(Path.join(git, "refs", "heads", "planted-secret"), `${w.secretHead}\n`)
      Fs.writeFileSync(Path.join(git, "refs", "heads", "planted-other"), `${otherHead}\n`)
      Fs.appendFileSync(Path.join(git, "packed-refs"), `${w.secretHead} refs/tags/planted\n`)
      Fs.appendFileSync(Path.join(git, "config"), `[uploadpack]\n\tpackObjectsHook = ${w.evil}\n[core]\n\tfsmonitor = ${w.evil}\n`)
      const kid = await w.run(Effect.either(Effect.flatMap(WorkspaceStore, (s) => s.create({ fork: { parent: parent.id, child: "kid" } }))))
      if (Either.isLeft(kid)) return { breached: false, detail: `the branch child's workspace was refused: ${kid.left.message}` }
      const root = kid.right.root_path
      const kidGit = Path.join(w.home, "workspaces", kid.right.id, "history.git")
      const found: Array<string> = []
      for (const [what, sha] of [["the secret repository's HEAD", w.secretHead], ["another workspace's history HEAD", otherHead]] as const) {
        if (hasObject(Path.join(root, ".git"), sha)) found.push(`${what} in the child's clone`)
        if (hasObject(kidGit, sha)) found.push(`${what} in the child's history`)
      }
      for (const g of [Path.join(root, ".git"), kidGit]) {
        if (Fs.existsSync(Path.join(g, "objects", "info", "alternates"))) found.push(`alternates in ${g}`)
      }
      const parentHead = gitIn(w.dir, ["--git-dir", Path.join(w.home, "workspaces", parent.id, "history.git"), "rev-parse", "refs/heads/substrat/lead"]).trim()
      const kidHead = gitIn(w.dir, ["--git-dir", kidGit, "rev-parse", "HEAD"]).trim()
      if (kidHead !== parentHead) found.push(`the child starts at ${kidHead.slice(0, 12)}, not at the parent's recorded ${parentHead.slice(0, 12)}`)
      return {
        breached: found.length > 0,
        detail: found.length === 0 ? "the child's clone and history hold only the parent's recorded branch (no planted object, ref or alternates)" : found.join("; ")
      }
    })
}

const revertRace: Attack = {
  name: "24.8 workspace revert writing a turn's files back while the agent swaps their directory for a link to a directory outside, again and again",
  run: () =>
    withRepoWorld(async (w) => {
      const ws = await w.workspace("rev")
      const N = 1000
      await w.agent(ws, `mkdir d && i=0; while [ $i -lt ${N} ]; do echo "file $i" > d/f$i; i=$((i+1)); done`)
      const made = await w.turn(ws, "maker")
      await w.agent(ws, "rm -r d")
      const removed = await w.turn(ws, "remover")
      if (made.commit === null || removed.commit === null) throw new Error("the two turns were not recorded")
      const turns = await w.run(Effect.flatMap(WorkspaceHistory, (h) => h.log(ws.id)))
      const turnOf = (agent: string) => turns.find((t) => t.agent === agent)?.turn_id as TurnId
      // The directory outside: one file of its own (git writing through the link adds the turn's files there).
      const outside = Path.join(w.dir, "outside")
      Fs.mkdirSync(outside)
      Fs.writeFileSync(Path.join(outside, "keep"), "outside\n")
      const before = Fs.readdirSync(outside).sort().map((f) => `${f}:${bytesOf(Path.join(outside, f))}`).join("|")
      const swapper = [
        `my ($o, $n) = @ARGV; my $i = 0;`,
        `while ($i++ < $n && ! -e ".stop") {`,
        // Paused while the test clears what a refused revert left (so every round is a fresh try).
        `  if (-e ".pause") { open(my $f, ">", ".paused"); close($f); select(undef, undef, undef, 0.005) while -e ".pause" && ! -e ".stop"; unlink(".paused"); next; }`,
        `  rename("d", "d.x") if -d "d" && ! -l "d";`,
        `  symlink($o, "d"); select(undef, undef, undef, 0.0003);`,
        `  unlink("d") if -l "d";`,
        `  rename("d.x", "d") if -d "d.x" && ! -e "d";`,
        `}`,
        `print "swaps $i\\n";`
      ].join("\n")
      Fs.writeFileSync(Path.join(ws.root_path, "swap.pl"), swapper)
      const swapping = w.agent(ws, `perl swap.pl '${outside}' 2000000`)
      const outcomes: Array<string> = []
      let changed = ""
      const lock = Path.join(w.home, "workspaces", ws.id, "history.git", "index.lock")
      for (let round = 0; round < 16 && changed === ""; round++) {
        // A git that died mid-way leaves its lock: the attacker waits for it to be cleared and goes on.
        Fs.rmSync(lock, { force: true })
        const r = await w.run(Effect.either(Effect.flatMap(WorkspaceHistory, (h) => h.revert(ws.id, turnOf(round % 2 === 0 ? "remover" : "maker")))))
        outcomes.push(Either.isRight(r) ? (r.right.paths.length > 0 ? "reverted" : "nothing to revert") : "refused")
        const now = Fs.readdirSync(outside).sort().map((f) => `${f}:${bytesOf(Path.join(outside, f))}`).join("|")
        if (now !== before) changed = `round ${round}: ${Fs.readdirSync(outside).length} file(s) outside, ${now === "" ? "all removed" : "changed"}`
        if (Either.isLeft(r)) {
          Fs.writeFileSync(Path.join(ws.root_path, ".pause"), "")
          for (let i = 0; i < 2000 && !Fs.existsSync(Path.join(ws.root_path, ".paused")); i++) await new Promise((f) => setTimeout(f, 5))
          for (const p of ["d", "d.x"]) Fs.rmSync(Path.join(ws.root_path, p), { recursive: true, force: true })
          Fs.rmSync(Path.join(ws.root_path, ".pause"))
        }
      }
      Fs.writeFileSync(Path.join(ws.root_path, ".stop"), "")
      const swaps = (await swapping).trim()
      const tally = outcomes.reduce<Record<string, number>>((m, o) => ({ ...m, [o]: (m[o] ?? 0) + 1 }), {})
      return {
        breached: changed !== "",
        detail: `${changed === "" ? "the directory outside is as it was" : `written through the link: ${changed}`}; ${swaps}; reverts: ${JSON.stringify(tally)}`
      }
    })
}

export const attacks: ReadonlyArray<Attack> = [checkCheckout, forkClone, revertRace]
