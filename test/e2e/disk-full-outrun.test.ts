// A disk filled faster than the free-space floor is checked (the floor off, a 2 MiB tmpfs, sends
// and the turns they start racing for the last blocks): the daemon stays up (read-only), says why
// its own log cannot be written (`daemon status`), and after a restart on a bigger disk every
// acknowledged message is in the log. Needs root (mount); skipped otherwise.
import { afterAll, describe, expect, it } from "vitest"
import { join } from "node:path"
import { daemons } from "../integration/daemon.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { lostAfterRestart, mountTmpfs, outrunDisk, unmount } from "./disk-outrun.support.js"

const isRoot = process.getuid?.() === 0
const owned = daemons()
const dir = makeTmpDir("substrat-outrun-")
const mnt = join(dir, "mnt")
const mounted = isRoot && mountTmpfs(mnt, "2m")

afterAll(async () => {
  await owned.killAll()
  if (mounted) unmount(mnt)
  removeDir(dir)
})

describe.skipIf(!mounted)("a disk filled faster than the floor is checked (tmpfs; needs root)", () => {
  it("stays up read-only, reports why its log cannot be written, loses nothing acknowledged", async () => {
    const run = await outrunDisk(mnt, owned.track)
    expect(run.acked.length).toBeGreaterThan(0)
    expect(run.refused).toBeGreaterThan(0)
    expect(run.alive).toBe(true)
    expect(run.status?.storage?.mode).toBe("read-only")
    expect(run.status?.storage?.reason).toMatch(/ENOSPC/)
    expect(run.status?.storage?.log_error).toMatch(/daemon\.log.*ENOSPC/)
    expect(await lostAfterRestart(mnt, run, owned.track)).toEqual([])
  }, 240_000)
})
