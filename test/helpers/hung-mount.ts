// A mount that never answers, as a network share whose server is gone: a FUSE file system mounted on a connection
// nobody serves (/dev/fuse opened, handed to mount(8), never read). Every call into it waits in the kernel — the
// first one on the INIT reply — until the connection ends: closing the descriptor aborts it, and the waiting calls
// then fail with ENOTCONN (a dead FUSE daemon's "Transport endpoint is not connected"). Needs root, /dev/fuse and
// the fuse module, as this project's machines have.
import { spawnSync } from "node:child_process";
import { closeSync, mkdirSync, openSync } from "node:fs";

export interface HungMount {
  /** Ends the connection (the calls waiting in it fail with ENOTCONN); the mount stays, dead. */
  abort(): void;
  /** abort(), then unmount. */
  close(): void;
}

export function hungMount(dir: string): HungMount {
  mkdirSync(dir, { recursive: true });
  let fd: number | null = openSync("/dev/fuse", "r+");
  // -i: no mount.fuse helper; the kernel takes the connection from the mounting process's descriptor 3
  const mounted = spawnSync("mount", ["-i", "-t", "fuse", "-o", "fd=3,rootmode=40000,user_id=0,group_id=0", "rlloop-hung", dir], {
    stdio: ["ignore", "pipe", "pipe", fd], encoding: "utf8",
  });
  if (mounted.status !== 0) {
    closeSync(fd);
    throw new Error(`mount of a FUSE file system on ${dir} failed (${mounted.status}): ${mounted.stderr}`);
  }
  const abort = () => {
    if (fd !== null) closeSync(fd);
    fd = null;
  };
  return {
    abort,
    close() {
      abort();
      spawnSync("umount", ["-l", dir]);
    },
  };
}
