// requires: bwrap, git
// The escape suite: every attempt runs a real bwrap sandbox and must fail from inside. Each attempt
// has a positive control in the same run (the command demonstrably executed), so a broken sandbox
// that runs nothing cannot pass. Runs under every identity we can take (see sandbox.support.ts).
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import { homedir, tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { WorkspaceSpec } from "../../src/domain/workspace.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { alive, findExact, findProcs, identities, makeRuntime, openTraversal, type Runtime, sh, waitFor } from "./sandbox.support.js"

const tally: Array<{ identity: string; attempt: string; escaped: boolean }> = []

const record = (identity: string, attempt: string, escaped: boolean) => {
  tally.push({ identity, attempt, escaped })
  expect(escaped, `${identity}: escape attempt "${attempt}" SUCCEEDED`).toBe(false)
}

afterAll(() => {
  const ok = tally.filter((t) => !t.escaped).length
  const byId = new Map<string, number>()
  for (const t of tally) byId.set(t.identity, (byId.get(t.identity) ?? 0) + 1)
  console.log(
    `[sandbox escape suite] ${tally.length} escape attempts ran, ${tally.length - ok} succeeded ` +
      `(${[...byId].map(([k, v]) => `${k}: ${v}`).join("; ")})`
  )
})

const hostFileToken = (): { path: string; token: string } | null => {
  // A readable regular file in the real home directory of the user running the tests, if any.
  try {
    for (const e of fs.readdirSync(homedir())) {
      const p = join(homedir(), e)
      const st = fs.lstatSync(p)
      if (st.isFile() && st.size > 8) {
        const text = fs.readFileSync(p, "utf8").slice(0, 200).split("\n").find((l) => l.trim().length >= 6)
        if (text !== undefined) return { path: p, token: text.trim() }
      }
    }
  } catch {
    // unreadable home
  }
  return null
}

for (const idc of identities) {
  describe(`escape suite — ${idc.label}`, () => {
    let T = ""
    let rt: Runtime
    let A: WorkspaceSpec
    let B: WorkspaceSpec
    const secret = `home-secret-${Math.random().toString(36).slice(2)}`
    const agentSecret = `agent-secret-${Math.random().toString(36).slice(2)}`
    const bSecret = `ws-b-secret-${Math.random().toString(36).slice(2)}`
    const own = `own-token-${Math.random().toString(36).slice(2)}`
    const envSecret = `env-secret-${Math.random().toString(36).slice(2)}`

    beforeAll(async () => {
      T = fs.mkdtempSync(join(tmpdir(), "substrat-escape-"))
      fs.chmodSync(T, 0o755)
      fs.mkdirSync(join(T, "home"))
      fs.writeFileSync(join(T, "home", "secret.txt"), secret, { mode: 0o644 })
      fs.mkdirSync(join(T, "shared"))
      fs.writeFileSync(join(T, "shared", "file.txt"), "original\n", { mode: 0o666 })
      fs.chmodSync(join(T, "shared"), 0o777)
      const home = join(T, "substrat")
      rt = makeRuntime(home, idc.identity)
      const mk = (name: string) =>
        rt.runPromise(Effect.flatMap(WorkspaceStore, (s) => s.create({ name, ...(idc.owner ? { owner: idc.owner } : {}) })))
      A = await mk("a")
      B = await mk("b")
      A = await rt.runPromise(
        Effect.flatMap(WorkspaceStore, (s) => s.link(A.id, { host_path: join(T, "shared"), mount_path: "shared", mode: "ro" }))
      )
      fs.mkdirSync(join(home, "agents", "x"), { recursive: true })
      fs.writeFileSync(join(home, "agents", "x", "session.json"), agentSecret, { mode: 0o644 })
      fs.writeFileSync(join(B.root_path, "b-secret.txt"), bSecret, { mode: 0o644 })
      fs.writeFileSync(join(A.root_path, "own.txt"), own, { mode: 0o644 })
      fs.symlinkSync(join(T, "home", "secret.txt"), join(A.root_path, "abs-link"))
      fs.symlinkSync(`../../${B.id}/root/b-secret.txt`, join(A.root_path, "rel-link"))
      fs.symlinkSync(join(T, "home"), join(A.root_path, "dir-link"))
      if (idc.needsTraversal) {
        for (const d of [home, join(home, "workspaces"), join(home, "workspaces", A.id), join(home, "workspaces", B.id), join(home, "agents"), join(home, "agents", "x")]) {
          fs.chmodSync(d, 0o755)
        }
        openTraversal(T)
      }
      process.env["SUBSTRAT_ESCAPE_TEST_SECRET"] = envSecret
    })

    afterAll(async () => {
      delete process.env["SUBSTRAT_ESCAPE_TEST_SECRET"]
      await rt?.dispose()
      if (T !== "") fs.rmSync(T, { recursive: true, force: true })
    })

    const run = (script: string, ws: WorkspaceSpec = A) =>
      rt.runPromise(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws, command: sh(script) })))

    /** Runs `cat own.txt` (control) then `attack`; returns stdout. */
    const attempt = async (attack: string) => {
      const r = await run(`cat /workspace/own.txt; echo; ${attack}`)
      expect(r.stdout, `control did not run; stderr: ${r.stderr}`).toContain(own)
      return r
    }

    it("cannot read a file in the user's home (fake home by host path, and the real $HOME)", async () => {
      const r = await attempt(`cat ${join(T, "home", "secret.txt")}`)
      record(idc.label, "read fake home by host path", r.stdout.includes(secret))
      const real = hostFileToken()
      if (real !== null) {
        const r2 = await attempt(`cat '${real.path}'`)
        record(idc.label, "read real $HOME file", r2.stdout.includes(real.token))
      }
    })

    it("cannot read $SUBSTRAT_HOME: agent records, its own spec, its own history", async () => {
      const home = join(T, "substrat")
      const r = await attempt(`cat ${join(home, "agents", "x", "session.json")}`)
      record(idc.label, "read $SUBSTRAT_HOME/agents", r.stdout.includes(agentSecret))
      const r2 = await attempt(`cat ${join(home, "workspaces", A.id, "workspace.json")}; ls /workspace/..; cat /workspace/../workspace.json`)
      record(idc.label, "read own workspace.json", r2.stdout.includes('"root_path"'))
      const r3 = await attempt(`cat ${join(home, "workspaces", A.id, "history.git", "HEAD")}; cat /workspace/../history.git/HEAD`)
      record(idc.label, "read own history.git", r3.stdout.includes("ref: refs/heads"))
    })

    it("cannot read another workspace (host path, relative symlink)", async () => {
      const r = await attempt(`cat ${join(B.root_path, "b-secret.txt")}`)
      record(idc.label, "read other workspace by host path", r.stdout.includes(bSecret))
      const r2 = await attempt("cat /workspace/rel-link")
      record(idc.label, "read other workspace via ../ symlink", r2.stdout.includes(bSecret))
    })

    it("a symlink in the workspace pointing at a host path does not reach it", async () => {
      const r = await attempt("cat /workspace/abs-link; cat /workspace/dir-link/secret.txt")
      record(idc.label, "symlink to host path", r.stdout.includes(secret))
    })

    it("cannot write through a read-only bind (plain write, new file, remount)", async () => {
      const r = await attempt(
        "echo pwned > /workspace/shared/file.txt; echo pwned > /workspace/shared/new.txt; " +
          "mount -o remount,rw /workspace/shared 2>/dev/null && echo pwned > /workspace/shared/file.txt; true"
      )
      expect(r.stderr).toMatch(/Read-only file system/)
      const escaped = fs.readFileSync(join(T, "shared", "file.txt"), "utf8") !== "original\n" ||
        fs.existsSync(join(T, "shared", "new.txt"))
      record(idc.label, "write through RO bind", escaped)
    })

    it("cannot write outside /workspace and /tmp", async () => {
      const marker = `escape-${Math.random().toString(36).slice(2)}`
      const targets = [`/${marker}`, `/usr/${marker}`, `/etc/${marker}`, join(T, marker), join(tmpdir(), marker)]
      const r = await attempt(
        `${targets.map((t) => `touch ${t} 2>/dev/null`).join("; ")}; touch /workspace/${marker}-ok /tmp/${marker}-ok && echo WROTE-OK`
      )
      expect(r.stdout).toContain("WROTE-OK") // /workspace and /tmp are writable
      for (const t of targets) record(idc.label, `write ${t.replace(marker, "<x>")}`, fs.existsSync(t))
      fs.rmSync(join(A.root_path, `${marker}-ok`), { force: true })
    })

    it("cannot reach the network when it is off: host loopback TCP and abstract unix sockets", async () => {
      let connections = 0
      const server = net.createServer((c) => {
        connections++
        c.end("hello\n")
      })
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()))
      const port = (server.address() as net.AddressInfo).port
      const abstractName = `substrat-escape-${Math.random().toString(36).slice(2)}`
      const abs = net.createServer((c) => {
        connections++
        c.end("hello\n")
      })
      await new Promise<void>((r) => abs.listen(`\0${abstractName}`, () => r()))
      try {
        const py = (code: string) => `python3 -c "${code}"`
        const tcp = py(`import socket; s=socket.socket(); s.settimeout(3); s.connect(('127.0.0.1', ${port})); print('CONNECTED', s.recv(10))`)
        const unix = py(`import socket; s=socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect('\\\\0${abstractName}'); print('CONNECTED', s.recv(10))`)
        const r = await attempt(`${tcp}; ${unix}; true`)
        record(idc.label, "TCP to host 127.0.0.1", r.stdout.includes("CONNECTED") || connections > 0)
        // Positive control: with network_access the same probe connects (so the probe itself works).
        const withNet = await run(tcp, { ...A, network_access: true } as WorkspaceSpec)
        expect(withNet.stdout).toContain("CONNECTED")
      } finally {
        server.close()
        abs.close()
      }
    })

    it("cannot see or signal host processes; sees no host environment", async () => {
      const marker = `hostproc${Math.random().toString(36).slice(2)}`
      const host = (await import("node:child_process")).spawn("/bin/sh", ["-c", `sleep 60; : ${marker}`], { stdio: "ignore" })
      try {
        await waitFor(() => findProcs(marker).length > 0)
        const hostPid = findProcs(marker)[0]!
        const r = await attempt(
          // The marker is assembled in a file so that no process inside has it on its own command line.
          `printf '%s%s' ${marker.slice(0, 6)} ${marker.slice(6)} > /tmp/pat; ` +
            `for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done | grep -c -f /tmp/pat; ` +
            `ls /proc | grep -c '^[0-9]'; kill -9 ${hostPid} 2>/dev/null; env`
        )
        const counts = r.stdout.split("\n").filter((l) => /^\d+$/.test(l.trim())).map(Number)
        expect(counts).toHaveLength(2)
        expect(counts[1]).toBeGreaterThan(0) // it did list its own /proc
        const seen = counts[0]! > 0
        record(idc.label, "see host processes", seen)
        record(idc.label, "kill a host process", !alive(hostPid, marker))
        record(idc.label, "read host environment", r.stdout.includes(envSecret))
      } finally {
        host.kill("SIGKILL")
      }
    })

    it("a double-forked setsid process does not survive the scope (nor a normal exit)", async () => {
      const marker = `987.${Math.floor(Math.random() * 1e9)}`
      const script = `setsid sh -c 'sleep ${marker} & echo $! > /workspace/sleep.pid' </dev/null >/dev/null 2>&1 & sleep 300`
      const scope = await rt.runPromise(Scope.make())
      await rt.runPromise(Effect.flatMap(Sandbox, (s) => s.start({ workspace: A, command: sh(script) })).pipe(Scope.extend(scope)))
      const found = await waitFor(() => fs.existsSync(join(A.root_path, "sleep.pid")) && findExact(["sleep", marker]).length > 0)
      expect(found, "the daemonised sleep never started").toBe(true)
      const pid = findExact(["sleep", marker])[0]!
      // The pidfile holds the pid *inside* the sandbox's pid namespace; the host sees it as NSpid.
      const nsPid = fs.readFileSync(join(A.root_path, "sleep.pid"), "utf8").trim()
      const nspidLine = fs.readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("NSpid:")) ?? ""
      expect(nspidLine.trim().split(/\s+/).pop()).toBe(nsPid)
      await rt.runPromise(Scope.close(scope, Exit.void))
      const gone = await waitFor(() => !alive(pid, marker), 10_000)
      record(idc.label, "setsid sleep survives scope close", !gone)
      fs.rmSync(join(A.root_path, "sleep.pid"), { force: true })

      const marker2 = `988.${Math.floor(Math.random() * 1e9)}`
      const r2 = await run(
        `setsid sh -c 'sleep ${marker2} & echo $! > /tmp/s2.pid' </dev/null >/dev/null 2>&1; ` +
          `while [ ! -s /tmp/s2.pid ]; do sleep 0.05; done; kill -0 $(cat /tmp/s2.pid) && echo RUNNING`
      )
      expect(r2.stdout).toContain("RUNNING") // it was alive when the command exited
      const gone2 = await waitFor(() => findExact(["sleep", marker2]).length === 0, 10_000)
      record(idc.label, "setsid sleep survives command exit", !gone2)
    })

    it("a parent's agent swapping a child's directory for a symlink cannot widen the child", async () => {
      const child = await rt.runPromise(Effect.flatMap(WorkspaceStore, (s) => s.create({ name: `kid-${Math.random().toString(36).slice(2, 6)}`, parent: A.id })))
      fs.rmSync(child.root_path, { recursive: true })
      fs.symlinkSync(join(T, "home"), child.root_path) // what a malicious parent agent could do inside its tree
      const r = await rt.runPromise(
        Effect.flatMap(Sandbox, (s) => s.run({ workspace: child, command: sh("cat /workspace/secret.txt") })).pipe(Effect.either)
      )
      const escaped = r._tag === "Right" && r.right.stdout.includes(secret)
      if (r._tag === "Left") expect(r.left._tag).toBe("SandboxPathError")
      record(idc.label, "child root swapped for a symlink", escaped)
    })
  })
}
