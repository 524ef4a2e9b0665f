"""The page kernels (qdbpm/parquet/_pages.pyx) read nothing past their buffer, proven with a
guard page: each input ends on the last byte before a page mapped PROT_NONE, so a read one byte
too far is a segfault instead of a silent read of the allocator's next bytes (which the value
tests cannot see). Run in a child process, so a fault fails this test, not the whole session."""

import subprocess
import sys

CHILD = r'''
import ctypes, mmap, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import _pages
from test_direct import random_runs

PAGE = mmap.PAGESIZE
area = mmap.mmap(-1, 2 * PAGE)
base = ctypes.addressof(ctypes.c_char.from_buffer(area))
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
assert libc.mprotect(base + PAGE, PAGE, 0) == 0  # PROT_NONE: the byte after the buffer faults
whole = np.frombuffer(area, np.uint8, count=PAGE)


def guarded(data):
    """`data` as a view whose last byte is the last one before the guard page."""
    view = whole[PAGE - len(data):]
    view[:] = np.frombuffer(data, np.uint8)
    return view


def calls(buf, bw, count, rng):
    yield lambda: _pages.rle_hybrid(buf, 0, len(buf), bw, count, np.empty(count, np.int32), 1 << 33)
    yield lambda: _pages.rle_lookup_and(buf, 0, len(buf), bw, count, np.ones(1 << min(bw, 12), np.uint8),
                                        np.ones(count, np.uint8), 1 << min(bw, 12))
    picks = np.sort(rng.choice(count, min(count, 40), replace=False)).astype(np.int64)
    yield lambda: _pages.rle_pick(buf, 0, len(buf), bw, count, picks, np.empty(len(picks), np.int32), 1 << 33)
    yield lambda: _pages.byte_array_index(buf, 0, len(buf), count, np.empty(count, np.int64),
                                          np.empty(count, np.int32))


rng = np.random.default_rng(7)
runs = 0
for case in range(400):
    bw = [0, 1, 3, 8, 13, 32][case % 6]
    raw, made = random_runs(rng, bw, int(rng.integers(1, 300)))
    raw = raw.tobytes()
    for cut in {len(raw), int(rng.integers(0, len(raw) + 1))}:  # whole, and truncated at random
        data = raw[:cut]
        if not 0 < len(data) <= PAGE:
            continue
        buf = guarded(data)
        for call in calls(buf, bw, made, rng):
            try:
                call()
            except ParquetFormatError:
                pass
            runs += 1
print("ok", runs)
'''


def test_no_page_kernel_reads_past_its_buffer(tmp_path):
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(repo, "tests", "table"), repo]))
    got = subprocess.run([sys.executable, "-c", CHILD, repo], capture_output=True, text=True, env=env, timeout=300)
    assert got.returncode == 0, f"child ended {got.returncode} (-11: a read past the buffer)\n{got.stderr[-2000:]}"
    assert got.stdout.startswith("ok ") and int(got.stdout.split()[1]) > 2000
