"""Kill a writer with SIGKILL at every write / fsync / truncate / rename boundary.

The child process runs one writer operation through `KillingOps`, which counts I/O calls of the
writer's seam (`qdbpm.pm.fileops.FileOps`) and SIGKILLs its own process just before call number
`kill_at`. The parent then checks what a reader sees.
"""

import os
import pickle
import signal
import subprocess
import sys

from qdbpm.pm.fileops import FileOps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class KillingOps(FileOps):
    """FileOps that dies (SIGKILL, no cleanup, no flush) before I/O call number `kill_at`."""

    BOUNDARIES = ("pwrite", "fsync", "truncate", "replace", "fsync_dir")

    def __init__(self, kill_at=None):
        self.kill_at = kill_at
        self.calls = 0

    def _boundary(self, before_kill=None):
        if self.kill_at is not None and self.calls == self.kill_at:
            if before_kill is not None:
                before_kill()  # e.g. half of a write lands, as a crash mid-write would leave
            os.kill(os.getpid(), signal.SIGKILL)
        self.calls += 1

    def pwrite(self, fd, data, offset):
        half = bytes(data)[: len(data) // 2]
        self._boundary(lambda: super(KillingOps, self).pwrite(fd, half, offset) if half else None)
        return super().pwrite(fd, data, offset)

    def fsync(self, fd):
        self._boundary()
        return super().fsync(fd)

    def truncate(self, fd, size):
        self._boundary()
        return super().truncate(fd, size)

    def replace(self, src, dst):
        self._boundary()
        return super().replace(src, dst)

    def fsync_dir(self, path):
        self._boundary()
        return super().fsync_dir(path)


CHILD = r"""
import pickle, sys
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
from support.crash_harness import KillingOps
import qdbpm.pm.writer as W
op, args, kill_at = pickle.loads(sys.stdin.buffer.read())
ops = KillingOps(kill_at)
if op == "new":
    W.write_new(*args, ops=ops)
elif op == "update":
    W.write_update(*args, ops=ops)
else:
    import importlib
    mod, fn = op.rsplit(".", 1)
    getattr(importlib.import_module(mod), fn)(*args, ops=ops)
print(ops.calls)
"""


def run_child(op, args, kill_at=None):
    """Run the operation in a child; returns (killed, number of I/O calls when not killed)."""
    code = CHILD.format(root=ROOT, tests=os.path.join(ROOT, "tests"))
    p = subprocess.run([sys.executable, "-c", code], input=pickle.dumps((op, args, kill_at)),
                       capture_output=True, timeout=120)
    if p.returncode == -signal.SIGKILL:
        return True, None
    if p.returncode != 0:
        raise RuntimeError(f"child failed: {p.stderr.decode()[-2000:]}")
    return False, int(p.stdout.decode().strip().splitlines()[-1])
