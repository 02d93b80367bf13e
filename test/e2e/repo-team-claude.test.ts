// requires: bwrap, git
// The README's "Running a real Claude Code team" from the user's repository: the REAL claude
// binary, sandboxed, against the scripted Anthropic endpoint, on a repository nobody here wrote
// (the `ms` package's sources in three commits, test/support/foreignRepo.ts).
//   agent create --repo <repo>; lead spawns coder and reviewer; coder writes version.ts with
//   claude's Write; reviewer reads it. Then: the user's checkout is byte for byte as before (only
//   the new branch substrat/lead exists), `git log substrat/lead` has the coder's turn with its
//   trailers, `workspace merge` brings exactly that file onto the user's branch, `workspace export`
//   writes the patch. Bad input for every new flag: a clear message, exit 2, nothing changed.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { cli, cliJson, startDaemon } from "../integration/daemon.support.js"
import { gitIn, makeForeignRepo, userState } from "../support/foreignRepo.js"
import { claudeMeteredHome, claudeMeterEnvKeys, daemonTestScope, withLlm } from "./support.js"
import { type AgentWs, checkTeamEndState, FILE_BYTES, FINAL, LEAD_INSTRUCTIONS, TASK, teamScript } from "./team.support.js"

const { ds, homes } = daemonTestScope(claudeMeterEnvKeys)
const usage = { input_tokens: 10, output_tokens: 2, cache_read_tokens: 0, cache_write_tokens: 0 }

interface Ws {
  readonly id: string
  readonly root_path: string
  readonly repo: { readonly path: string; readonly branch: string; readonly base: string; readonly target: string | null } | null
}

describe("a real Claude Code team on the user's repository", () => {
  it("agent create --repo: the team works on a clone; substrat/lead carries the coder's turn; workspace merge hands it back", () =>
    withLlm(
      teamScript({
        usage,
        write: Reply.toolCall("Write", { file_path: "/workspace/version.ts", content: FILE_BYTES }),
        read: Reply.toolCall("Read", { file_path: "/workspace/version.ts" })
      }),
      async (llm) => {
        const home = claudeMeteredHome(llm, homes, "strepo-")
        const repo = Path.join(home, "..", `${Path.basename(home)}-user-repo`)
        homes.push(repo)
        const base = makeForeignRepo(repo)
        const before = userState(repo)
        ds.track(await startDaemon(home))

        // Bad input: exit 2, a message naming the problem, nothing created.
        const inHome = Path.join(home, "repo-in-home")
        makeForeignRepo(inHome)
        const notRepo = Path.join(home, "..", `${Path.basename(home)}-plain`)
        homes.push(notRepo)
        Fs.mkdirSync(notRepo)
        const bad: ReadonlyArray<[ReadonlyArray<string>, RegExp]> = [
          [["workspace", "create", "--repo", notRepo], /not a git repository/],
          [["workspace", "create", "--repo", repo, "--ref", "no-such"], /--ref no-such: no such branch or commit/],
          [["workspace", "create", "--ref", "main"], /--ref goes with --repo/],
          [["workspace", "create", "--repo", inHome], /overlaps \$SUBSTRAT_HOME/],
          [["agent", "create", "--provider", "claude", "--name", "x", "--repo", notRepo], /not a git repository/],
          [["agent", "create", "--provider", "claude", "--name", "x", "--repo", repo, "--ref", "nope"], /no such branch or commit/],
          [["agent", "create", "--provider", "claude", "--name", "bad name", "--repo", repo], /name/]
        ]
        for (const [args, want] of bad) {
          const r = await cli(home, args)
          expect(r.code, args.join(" ")).toBe(2)
          expect(r.stderr, args.join(" ")).toMatch(want)
        }
        expect((await cliJson<{ workspaces: ReadonlyArray<Ws> }>(home, ["workspace", "list"])).workspaces).toEqual([])
        expect((await cliJson<{ agents: ReadonlyArray<unknown> }>(home, ["agent", "list"])).agents).toEqual([])
        expect(userState(repo)).toEqual(before)

        // The README's commands, from the repository.
        const created = await cliJson<AgentWs>(home, ["agent", "create", "--provider", "claude", "--name", "lead", "--instructions", LEAD_INSTRUCTIONS, "--repo", repo])
        const sent = await cli(home, ["agent", "send", "--wait", "lead", TASK])
        expect(sent.stderr).toBe("")
        expect(sent.stdout).toBe(`${FINAL}\n`)
        const { by } = await checkTeamEndState(home)
        const ws = (await cliJson<{ workspaces: ReadonlyArray<Ws> }>(home, ["workspace", "list"])).workspaces.find((w) => w.id === created.workspace_id)!
        expect(ws.repo).toEqual({ path: Fs.realpathSync(repo), branch: "substrat/lead", base, target: "main" })
        expect(by["coder"]!.workspace_id).toBe(ws.id)

        // The user's checkout: untouched; only refs/heads/substrat/lead is new.
        const after = userState(repo)
        expect({ ...after, branches: [] }).toEqual({ ...before, branches: [] })
        expect(after.branches).toEqual(["refs/heads/main", "refs/heads/substrat/lead"])
        expect(gitIn(repo, ["status", "--porcelain"])).toBe("")
        expect(Fs.existsSync(Path.join(repo, "version.ts"))).toBe(false)
        // The team's history on the branch: the coder's turn, with its trailers, on top of the user's HEAD.
        const log = gitIn(repo, ["log", "--format=%an%x1f%B%x1e", `${base}..substrat/lead`]).split("\x1e").map((s) => s.trim()).filter((s) => s !== "")
        const coderTurn = log.find((l) => l.startsWith("coder\x1f"))
        expect(coderTurn, log.join("\n---\n")).toBeDefined()
        expect(coderTurn).toContain("Substrat-Agent: coder")
        expect(coderTurn).toContain(`Substrat-Workspace: ${ws.id}`)
        expect(coderTurn).toMatch(/Substrat-Turn: [0-9a-f-]{36}/)
        expect(gitIn(repo, ["diff", "--name-only", base, "substrat/lead"])).toBe("version.ts\n")
        // The clone followed: inside, the coder's turn is HEAD and nothing is pending.
        expect(gitIn(ws.root_path, ["rev-parse", "HEAD"])).toBe(gitIn(repo, ["rev-parse", "substrat/lead"]))
        const wlog = await cli(home, ["workspace", "log", "lead"])
        expect(wlog.stdout).toMatch(/coder/)

        // merge: refused on a dirty tree (exit 2, nothing changed), then exactly the coder's file.
        Fs.appendFileSync(Path.join(repo, "readme.md"), "local edit\n")
        const dirty = userState(repo)
        const refused = await cli(home, ["workspace", "merge", "lead"])
        expect(refused.code).toBe(2)
        expect(refused.stderr).toMatch(/uncommitted changes/)
        expect(userState(repo)).toEqual(dirty)
        gitIn(repo, ["checkout", "-q", "--", "readme.md"])
        const badInto = await cli(home, ["workspace", "merge", "--into", "no-such", "lead"])
        expect(badInto.code).toBe(2)
        expect(badInto.stderr).toMatch(/no such branch/)
        const merged = await cli(home, ["workspace", "merge", "lead"])
        expect(merged.stderr).toBe("")
        expect(merged.code).toBe(0)
        expect(merged.stdout).toMatch(/substrat\/lead into main/)
        expect(gitIn(repo, ["diff", "--name-only", base, "main"])).toBe("version.ts\n")
        expect(Fs.readFileSync(Path.join(repo, "version.ts"), "utf8")).toBe(FILE_BYTES)
        expect(gitIn(repo, ["status", "--porcelain"])).toBe("")
        const patches = Path.join(repo, "..", `${Path.basename(repo)}-patches`)
        homes.push(patches)
        const exported = await cli(home, ["workspace", "export", "lead", "--patch", patches])
        expect(exported.code).toBe(0)
        const files = Fs.readdirSync(patches)
        expect(files.length).toBeGreaterThan(0)
        expect(files.map((f) => Fs.readFileSync(Path.join(patches, f), "utf8")).join("")).toContain("+export const version = \"1.2.3\"")
      }
    ), 300_000)
})
