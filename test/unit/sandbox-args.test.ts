// The pure bwrap argv builder, path policy and limit attribution.
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import { noLimits, ResourceLimits, SymlinkSpec } from "../../src/domain/workspace.js"
import { type BwrapInput, buildBwrapArgs, type HostLayout } from "../../src/sandbox/BwrapArgs.js"
import { attributeExit, defaultSandboxLimits, normaliseExit, prlimitPrefix, withDefaults } from "../../src/sandbox/Limits.js"
import { absolutePath, isWithin, linkRefusal, relativePath, sandboxTarget } from "../../src/sandbox/PathPolicy.js"
import { fuzzParams } from "../support/fuzz.js"

const host: HostLayout = {
  system: [
    { path: "/usr", kind: "dir" },
    { path: "/bin", kind: "symlink", target: "usr/bin" },
    { path: "/lib64", kind: "dir" },
    { path: "/etc/some-file", kind: "file" }
  ],
  etcBase: ["/etc/passwd"],
  etcNetwork: ["/etc/resolv.conf", "/etc/ssl"]
}

const base: BwrapInput = {
  spec: { root_path: "/srv/ws/root", network_access: false, symlinks: [] },
  host,
  command: ["echo", "hi"],
  env: { PATH: "/usr/bin", HOME: "/tmp" }
}

const argv = (over: Partial<BwrapInput> = {}) => {
  const r = buildBwrapArgs({ ...base, ...over })
  if (Either.isLeft(r)) throw new Error(r.left.message)
  return r.right
}
const err = (over: Partial<BwrapInput>) => {
  const r = buildBwrapArgs({ ...base, ...over })
  if (Either.isRight(r)) throw new Error(`expected an error, got ${r.right.join(" ")}`)
  return r.left
}
/** Index of the triple `flag a b` in argv, -1 if absent. */
const triple = (a: ReadonlyArray<string>, flag: string, x: string, y: string) =>
  a.findIndex((v, i) => v === flag && a[i + 1] === x && a[i + 2] === y)
const pair = (a: ReadonlyArray<string>, flag: string, x: string) => a.findIndex((v, i) => v === flag && a[i + 1] === x)

describe("buildBwrapArgs", () => {
  it("isolation flags: die-with-parent, new-session, unshare-all, cap-drop ALL, no network by default", () => {
    const a = argv()
    expect(a.slice(0, 2)).toEqual(["--die-with-parent", "--new-session"])
    expect(a).toContain("--unshare-all")
    expect(pair(a, "--cap-drop", "ALL")).toBeGreaterThan(-1)
    expect(a).not.toContain("--share-net")
    expect(a).not.toContain("--unshare-net") // already part of --unshare-all
  })

  it("network on: --share-net and the /etc network subset", () => {
    const a = argv({ spec: { ...base.spec, network_access: true } })
    expect(a).toContain("--share-net")
    expect(triple(a, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf")).toBeGreaterThan(-1)
    expect(triple(a, "--ro-bind-try", "/etc/ssl", "/etc/ssl")).toBeGreaterThan(-1)
    const off = argv()
    expect(triple(off, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf")).toBe(-1)
    expect(triple(off, "--ro-bind-try", "/etc/passwd", "/etc/passwd")).toBeGreaterThan(-1)
  })

  it("system paths: dirs and files read-only binds, symlinks recreated", () => {
    const a = argv()
    expect(triple(a, "--ro-bind", "/usr", "/usr")).toBeGreaterThan(-1)
    expect(triple(a, "--ro-bind", "/lib64", "/lib64")).toBeGreaterThan(-1)
    expect(triple(a, "--ro-bind", "/etc/some-file", "/etc/some-file")).toBeGreaterThan(-1)
    expect(triple(a, "--symlink", "usr/bin", "/bin")).toBeGreaterThan(-1)
    expect(triple(a, "--ro-bind", "/bin", "/bin")).toBe(-1)
    // Nothing that is not in the layout (e.g. /home, /root) is bound.
    expect(a.some((x) => x.startsWith("/home") || x.startsWith("/root"))).toBe(false)
  })

  it("/proc, /dev, private /tmp, workspace RW at /workspace, then / remounted read-only", () => {
    const a = argv()
    expect(pair(a, "--proc", "/proc")).toBeGreaterThan(-1)
    // /proc/sys read-only right after /proc (its files are writable by their host owner otherwise).
    expect(triple(a, "--ro-bind", "/proc/sys", "/proc/sys")).toBe(pair(a, "--proc", "/proc") + 2)
    expect(pair(a, "--dev", "/dev")).toBeGreaterThan(-1)
    expect(pair(a, "--tmpfs", "/tmp")).toBeGreaterThan(-1)
    const ws = triple(a, "--bind", "/srv/ws/root", "/workspace")
    expect(ws).toBeGreaterThan(-1)
    expect(pair(a, "--remount-ro", "/")).toBeGreaterThan(ws)
  })

  it("SymlinkSpecs: ro → --ro-bind, rw → --bind, under /workspace, parents before children", () => {
    const a = argv({
      spec: {
        ...base.spec,
        symlinks: [
          new SymlinkSpec({ host_path: "/data/out", mount_path: "data/out", mode: "rw" }),
          new SymlinkSpec({ host_path: "/data", mount_path: "data", mode: "ro" })
        ]
      }
    })
    const parent = triple(a, "--ro-bind", "/data", "/workspace/data")
    const child = triple(a, "--bind", "/data/out", "/workspace/data/out")
    expect(parent).toBeGreaterThan(triple(a, "--bind", "/srv/ws/root", "/workspace"))
    expect(child).toBeGreaterThan(parent)
    expect(pair(a, "--remount-ro", "/")).toBeGreaterThan(child)
  })

  it("extra binds (agent socket, MCP config) at absolute sandbox paths", () => {
    const a = argv({
      extraBinds: [
        { host_path: "/h/agent.sock", sandbox_path: "/run/substrat/agent.sock", mode: "ro" },
        { host_path: "/h/cache", sandbox_path: "/var/cache/x", mode: "rw" }
      ]
    })
    expect(triple(a, "--ro-bind", "/h/agent.sock", "/run/substrat/agent.sock")).toBeGreaterThan(-1)
    expect(triple(a, "--bind", "/h/cache", "/var/cache/x")).toBeGreaterThan(-1)
  })

  it("clean environment: --clearenv then sorted --setenv", () => {
    const a = argv({ env: { ZED: "1", ALPHA: "a b" } })
    const c = a.indexOf("--clearenv")
    expect(c).toBeGreaterThan(-1)
    expect(triple(a, "--setenv", "ALPHA", "a b")).toBeGreaterThan(c)
    expect(triple(a, "--setenv", "ZED", "1")).toBeGreaterThan(triple(a, "--setenv", "ALPHA", "a b"))
    expect(a.filter((x) => x === "--setenv")).toHaveLength(2)
  })

  it("--chdir defaults to /workspace; command follows --", () => {
    expect(pair(argv(), "--chdir", "/workspace")).toBeGreaterThan(-1)
    const a = argv({ cwd: "/workspace/src", command: ["ls", "-la", "--", "x"] })
    expect(pair(a, "--chdir", "/workspace/src")).toBeGreaterThan(-1)
    const dd = a.indexOf("--")
    expect(a.slice(dd + 1)).toEqual(["ls", "-la", "--", "x"])
  })

  it("userNamespace=false (inner identity): explicit unshares, no user ns, caps kept for setpriv", () => {
    const a = argv({ userNamespace: false })
    expect(a).not.toContain("--unshare-all")
    expect(a).not.toContain("--cap-drop")
    for (const f of ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net"]) expect(a).toContain(f)
    expect(argv({ userNamespace: false, spec: { ...base.spec, network_access: true } })).not.toContain("--unshare-net")
  })

  it("hostname", () => {
    expect(pair(argv({ hostname: "substrat" }), "--hostname", "substrat")).toBeGreaterThan(-1)
    expect(argv()).not.toContain("--hostname")
  })

  it("rejects bad paths with typed errors", () => {
    expect(err({ spec: { ...base.spec, root_path: "relative/root" } }).reason).toBe("not-absolute")
    expect(err({ spec: { ...base.spec, root_path: "/" } }).reason).toBe("reserved")
    expect(err({ spec: { ...base.spec, root_path: "/srv/../etc" } }).reason).toBe("dot-dot")
    const link = (host_path: string, mount_path: string) => ({
      spec: { ...base.spec, symlinks: [new SymlinkSpec({ host_path, mount_path, mode: "ro" })] }
    })
    expect(err(link("/data", "../escape")).reason).toBe("dot-dot")
    expect(err(link("/data", "a/../../b")).reason).toBe("dot-dot")
    expect(err(link("/data", "/etc")).reason).toBe("not-relative")
    expect(err(link("/data", "")).reason).toBe("empty")
    expect(err(link("/data", "./a")).reason).toBe("not-normalized")
    expect(err(link("data", "a")).reason).toBe("not-absolute")
    expect(err(link("/da\0ta", "a")).reason).toBe("nul-byte")
    const dup = [new SymlinkSpec({ host_path: "/a", mount_path: "x", mode: "ro" }), new SymlinkSpec({ host_path: "/b", mount_path: "x/", mode: "rw" })]
    expect(err({ spec: { ...base.spec, symlinks: dup } }).reason).toBe("duplicate")
    for (const t of ["/", "/proc/self", "/dev/sda", "/tmp", "/workspace", "rel"]) {
      const e = err({ extraBinds: [{ host_path: "/h/s", sandbox_path: t, mode: "ro" }] })
      expect(["reserved", "not-absolute"]).toContain(e.reason)
    }
    expect(err({ cwd: "/workspace/../etc" }).reason).toBe("dot-dot")
    expect(err({ command: [] }).reason).toBe("empty")
    expect(err({ env: { "A=B": "x" } }).field).toBe("env")
  })

  it("property: valid mount paths always land strictly under /workspace; any `..` segment is rejected", () => {
    const seg = fc.stringMatching(/^[A-Za-z0-9_.-]{1,8}$/).filter((s) => s !== "." && s !== "..")
    fc.assert(
      fc.property(fc.array(seg, { minLength: 1, maxLength: 5 }), fc.nat(5), fc.boolean(), (segs, at, inject) => {
        const parts = [...segs]
        if (inject) parts.splice(at % (parts.length + 1), 0, "..")
        const mount = parts.join("/")
        const r = buildBwrapArgs({ ...base, spec: { ...base.spec, symlinks: [new SymlinkSpec({ host_path: "/data", mount_path: mount, mode: "ro" })] } })
        if (inject) return Either.isLeft(r) && r.left.reason === "dot-dot"
        if (Either.isLeft(r)) return false
        const i = triple(r.right, "--ro-bind", "/data", `/workspace/${mount}`)
        return i > -1 && !r.right.some((x) => x.split("/").includes(".."))
      }),
      fuzzParams(200)
    )
  })
})

describe("PathPolicy", () => {
  it("relative/absolute/sandbox targets", () => {
    expect(relativePath("f", "a/b/")).toEqual(Either.right("a/b"))
    expect(absolutePath("f", "/a/b/")).toEqual(Either.right("/a/b"))
    expect(Either.isLeft(absolutePath("f", "/a//b"))).toBe(true)
    expect(Either.isLeft(sandboxTarget("f", "/proc"))).toBe(true)
    expect(sandboxTarget("f", "/run/x.sock")).toEqual(Either.right("/run/x.sock"))
    expect(isWithin("/a", "/a/b")).toBe(true)
    expect(isWithin("/a", "/ab")).toBe(false)
    expect(isWithin("/", "/x")).toBe(true)
  })

  it("link policy: host trees never linked, system dirs never RW, no mounts over .git or tool files", () => {
    const why = (host: string, mount: string, mode: "ro" | "rw") => linkRefusal(host, mount, mode)?.message ?? null
    for (const h of ["/proc", "/proc/1/environ", "/sys/kernel", "/dev", "/dev/sda", "/run", "/run/docker.sock", "/"]) {
      expect(why(h, "x", "ro"), h).toMatch(/refused: .*cannot be linked/)
      expect(linkRefusal(h, "x", "ro")?.reason).toBe("reserved")
    }
    for (const h of ["/etc", "/etc/ssl", "/usr", "/usr/lib", "/lib64", "/var/lib", "/boot", "/opt/x", "/root", "/home", "/home/u", "/home/u/.ssh", "/root/.bashrc"]) {
      expect(why(h, "x", "rw"), h).toMatch(/refused: /)
      expect(why(h, "x", "ro"), h).toBeNull()
    }
    for (const h of ["/srvx", "/home/u/proj", "/root/proj", "/tmp/x", "/etcetera", "/procs"]) expect(why(h, "x", "rw"), h).toBeNull()
    for (const m of [".git", ".git/hooks", ".cursor", ".cursor/mcp.json"]) expect(why("/tmp/p", m, "ro"), m).toMatch(/^mount_path: refused/)
    for (const m of [".gitignore", ".github", "src/.git", ".cursor/rules"]) expect(why("/tmp/p", m, "ro"), m).toBeNull()
    // Checked again when the sandbox is built, so older specs cannot bind them either.
    const old = [new SymlinkSpec({ host_path: "/proc", mount_path: "p", mode: "ro" })]
    expect(err({ spec: { ...base.spec, symlinks: old } }).message).toMatch(/^symlinks\[0\]\.host_path: refused: \/proc cannot be linked/)
  })
})

describe("limits", () => {
  const lim = (o: Partial<ResourceLimits>) => new ResourceLimits({ ...noLimits, ...o })

  it("prlimit prefix: nothing without rlimits; soft<hard CPU so SIGXCPU comes first", () => {
    expect(prlimitPrefix(noLimits)).toEqual([])
    expect(prlimitPrefix(lim({ wall_clock_seconds: 5 }))).toEqual([])
    expect(prlimitPrefix(lim({ memory_bytes: 1e8, cpu_seconds: 2.5, max_processes: 10, max_file_bytes: 4096 }), "/usr/bin/prlimit"))
      .toEqual(["/usr/bin/prlimit", "--as=100000000", "--cpu=3:4", "--nproc=10", "--fsize=4096", "--core=0", "--"])
  })

  it("the default largest file is capped by the workspace growth budget; explicit values and no budget are kept", () => {
    const d = { ...defaultSandboxLimits, max_file_bytes: 1000, workspace_growth_bytes: 300 }
    expect(withDefaults(noLimits, d).max_file_bytes).toBe(300)
    expect(withDefaults(lim({ max_file_bytes: 5000 }), d).max_file_bytes).toBe(5000)
    expect(withDefaults(noLimits, { ...d, workspace_growth_bytes: null }).max_file_bytes).toBe(1000)
    expect(withDefaults(noLimits, { ...d, workspace_growth_bytes: 9000 }).max_file_bytes).toBe(1000)
  })

  it("128+N exit codes are read back as signals", () => {
    expect(normaliseExit({ code: 152, signal: null })).toEqual({ code: 152, signal: "SIGXCPU" })
    expect(normaliseExit({ code: 1, signal: null })).toEqual({ code: 1, signal: null })
  })

  const attr = (status: { code: number | null; signal: string | null }, l: Partial<ResourceLimits>, stderrTail = "", timedOut = false) =>
    attributeExit({ status, limits: lim(l), stderrTail, timedOut })

  it("attribution: signals are certain, stderr heuristics are likely, unrelated exits are not limits", () => {
    expect(attr({ code: null, signal: "SIGKILL" }, { wall_clock_seconds: 1 }, "", true)).toMatchObject({ limit: "wall-clock", certainty: "certain" })
    expect(attr({ code: 152, signal: null }, { cpu_seconds: 1 })).toMatchObject({ limit: "cpu", certainty: "certain", signal: "SIGXCPU" })
    expect(attr({ code: 153, signal: null }, { max_file_bytes: 10 })).toMatchObject({ limit: "file-size", certainty: "certain" })
    expect(attr({ code: 137, signal: null }, { cpu_seconds: 1 })).toMatchObject({ limit: "cpu", certainty: "likely" })
    expect(attr({ code: 2, signal: null }, { max_processes: 5 }, "sh: 0: Cannot fork\n")).toMatchObject({ limit: "processes", certainty: "likely" })
    expect(attr({ code: 1, signal: null }, { memory_bytes: 1e8 }, "MemoryError\n")).toMatchObject({ limit: "memory", certainty: "likely" })
    expect(attr({ code: 139, signal: null }, { memory_bytes: 1e8 })).toMatchObject({ limit: "memory", certainty: "likely" })
    expect(attr({ code: 1, signal: null }, { max_file_bytes: 10 }, "write: File too large")).toMatchObject({ limit: "file-size" })
    expect(attr({ code: 1, signal: null }, { memory_bytes: 1e8 }, "")).toBeNull()
    expect(attributeExit({ status: { code: 137, signal: null }, limits: lim({ memory_bytes: 1e8 }), stderrTail: "", timedOut: false, cgroup: { oomKills: 1, pidsMax: 0 } }))
      .toMatchObject({ limit: "memory", certainty: "certain" })
    // A limit that is not configured never gets blamed; a clean exit is never a limit.
    expect(attr({ code: 152, signal: null }, {})).toBeNull()
    expect(attr({ code: 0, signal: null }, { max_processes: 5 }, "Cannot fork")).toBeNull()
    expect(attr({ code: 2, signal: null }, { memory_bytes: 1e8 }, "Cannot fork")).toBeNull()
  })
})
