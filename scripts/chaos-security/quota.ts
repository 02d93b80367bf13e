// Attacks on the quota surface, replayed by `npm run chaos -- --only security`.
import { join } from "node:path"
import { daemons } from "../../test/integration/daemon.support.js"
import { lostAfterRestart, mountTmpfs, outrunDisk, unmount } from "../../test/e2e/disk-outrun.support.js"
import { makeTmpDir, removeDir } from "../../test/support/tmp.js"
import type { Attack } from "./attack.js"

/** 22.12: fill the disk faster than the free-space floor is probed; breached if the daemon dies, stays silent or loses an ack. */
const diskOutrun: Attack = {
  name: "22.12 disk filled faster than the floor",
  rootOnly: true,
  run: async () => {
    const owned = daemons()
    const dir = makeTmpDir("substrat-sec-outrun-")
    const mnt = join(dir, "mnt")
    if (!mountTmpfs(mnt, "2m")) throw new Error("cannot mount a tmpfs")
    try {
      const run = await outrunDisk(mnt, owned.track)
      const log = run.status?.storage?.log_error ?? null
      const lost = await lostAfterRestart(mnt, run, owned.track)
      return {
        breached: !run.alive || run.status?.storage?.mode !== "read-only" || log === null || lost.length > 0,
        detail: `${run.acked.length} acked, ${run.refused} refused; daemon ${run.alive ? "alive" : "DEAD"}, storage ${
          run.status?.storage?.mode ?? "?"
        }, daemon.log: ${log ?? "no reason reported"}; after a restart on a bigger disk ${lost.length} acked message(s) lost`
      }
    } finally {
      await owned.killAll()
      unmount(mnt)
      removeDir(dir)
    }
  }
}

export const attacks: ReadonlyArray<Attack> = [diskOutrun]
