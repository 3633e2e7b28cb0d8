"""TmpfsLogDir: a broker's log dir on a small tmpfs of its own, so disk faults hit that broker only.

* :meth:`fill` allocates every free block to a filler file (``posix_fallocate``): the next append that needs a
  new page fails with ENOSPC (disk full); :meth:`unfill` deletes it.
* :meth:`remount_ro` / :meth:`remount_rw`: Linux refuses a read-only remount (EBUSY) while any file on it is open
  for writing, which a running broker always has (its active segments); so the read-only fault is applied with
  the broker down (the runner kills it first and starts it on the read-only disk).
"""
from __future__ import annotations

import os
from pathlib import Path

from tests.harness.nemesis.netns import NetLabError, sh


class TmpfsLogDir:
    def __init__(self, path: Path, size_mb: int) -> None:
        self.path = Path(path)
        self.size_mb = size_mb
        self.filler = self.path / ".nemesis-filler"
        self.mounted = False

    def mount(self) -> "TmpfsLogDir":
        self.path.mkdir(parents=True, exist_ok=True)
        sh("mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0755", "tmpfs", str(self.path))
        self.mounted = True
        return self

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def used_fraction(self) -> float:
        st = os.statvfs(self.path)
        return 1.0 - st.f_bavail / max(st.f_blocks, 1)

    def fill(self) -> int:
        """Take every free byte (1 MiB chunks, then pages, until ENOSPC: the broker appends meanwhile); returns
        how many bytes the filler took."""
        fd = os.open(self.filler, os.O_RDWR | os.O_CREAT, 0o600)
        taken = os.fstat(fd).st_size
        try:
            for chunk in (1 << 20, 4096):
                while True:
                    try:
                        os.posix_fallocate(fd, taken, chunk)
                    except OSError:
                        break
                    taken += chunk
        finally:
            os.close(fd)
        return taken

    def unfill(self) -> None:
        try:
            self.filler.unlink()
        except FileNotFoundError:
            pass

    def remount_ro(self) -> None:
        sh("mount", "-o", "remount,ro", str(self.path))

    def remount_rw(self) -> None:
        sh("mount", "-o", "remount,rw", str(self.path))

    def unmount(self) -> None:
        if self.mounted:
            r = sh("umount", str(self.path), check=False)
            if r.returncode != 0:
                sh("umount", "-l", str(self.path), check=False)
            self.mounted = False


__all__ = ["TmpfsLogDir", "NetLabError"]
