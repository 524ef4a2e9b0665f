"""The writer's I/O seam: every write, fsync, truncate and rename of pm/writer.py (and of
qdbpm.sync's Parquet appends) goes through a `FileOps`. Crash tests substitute one that counts
the calls and kills the process at a chosen boundary."""

from __future__ import annotations

import ctypes
import functools
import os
import sys


@functools.cache
def _sync_file_range():
    """libc's sync_file_range through ctypes (Python's os module does not expose it), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        f = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    f.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    f.restype = ctypes.c_int
    return f


class FileOps:
    """Plain os calls: the I/O of every real write."""

    def open_rw(self, path):
        return os.open(path, os.O_RDWR)

    def pwrite(self, fd, data, offset):
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, offset)
            view = view[n:]
            offset += n

    def fsync(self, fd):
        os.fsync(fd)

    def start_writeback(self, fd, offset, length):
        """Ask the kernel to start writing [offset, offset + length) back now, without waiting
        (Linux sync_file_range(SYNC_FILE_RANGE_WRITE)); a later fsync then has less to wait for.
        Only a hint: no durability boundary, a no-op where unsupported."""
        f = _sync_file_range()
        if f is not None:
            f(fd, offset, length, 2)  # SYNC_FILE_RANGE_WRITE; a failure is harmless

    def truncate(self, fd, size):
        os.ftruncate(fd, size)

    def close(self, fd):
        os.close(fd)

    def replace(self, src, dst):
        os.replace(src, dst)

    def fsync_dir(self, path):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


DEFAULT_OPS = FileOps()
