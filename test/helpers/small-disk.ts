// A real file system the test fills and frees: a tmpfs of a few MiB mounted at a folder. fill() writes a ballast
// file until the kernel refuses with ENOSPC, as a disk that filled up does; free() removes it. Needs root (mount(8)),
// as this project's machines have (loop-frame-roots.test.ts mounts FUSE the same way).
import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, openSync, rmSync, statSync, truncateSync, writeSync } from "node:fs";
import { join } from "node:path";

export interface SmallDisk {
  readonly dir: string;
  /** the ballast file fill() writes (a test double trainer can fill the disk through it too) */
  readonly ballast: string;
  fill(): void;
  /** fill(), then give back `bytes` (a disk nearly full) */
  leave(bytes: number): void;
  free(): void;
  /** free(), then unmount (lazily: a process still holding a file there does not keep it) */
  close(): void;
}

export function smallDisk(dir: string, mib: number): SmallDisk {
  mkdirSync(dir, { recursive: true });
  const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${mib}m`, "rlloop-small-disk", dir], { encoding: "utf8" });
  if (mounted.status !== 0) throw new Error(`mount of a ${mib} MiB tmpfs on ${dir} failed (${mounted.status}; needs root): ${mounted.stderr}`);
  const ballast = join(dir, "ballast");
  const free = () => rmSync(ballast, { force: true });
  const fill = () => {
    const fd = openSync(ballast, "a");
    const block = Buffer.alloc(1 << 16, 1);
    try {
      for (;;) writeSync(fd, block);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
    } finally {
      closeSync(fd);
    }
  };
  return {
    dir,
    ballast,
    fill,
    leave(bytes) {
      fill();
      truncateSync(ballast, Math.max(0, statSync(ballast).size - bytes));
    },
    free,
    close() {
      free();
      spawnSync("umount", ["-l", dir]);
    },
  };
}
