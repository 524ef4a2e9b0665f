"""Mutation fuzzing of `_pm` files: the reader must answer every input with a PmError or a
correct object, never another exception, a crash or a hang.

Used by tests/test_fuzz.py (short, hypothesis-driven) and scripts/fuzz.py (long runs).
"""

from __future__ import annotations

import os
import random
import struct
import tempfile
import zlib

import numpy as np

from . import layout as L
from .errors import PmError
from .reader import ParquetMeta


def fix_crc(data: bytearray) -> bytearray:
    """Recompute the latest footer's CRC, so mutations reach the structural checks behind it."""
    if len(data) < L.MIN_COMMITTED_SIZE + 8:
        return data
    size = min(int.from_bytes(data[:8], "little"), len(data))
    at = size - 8
    if at > 8:
        data[at : at + 4] = struct.pack("<I", zlib.crc32(bytes(data[8:at])))
    return data


def mutate(data: bytes, rnd: random.Random) -> bytes:
    """One random structural mutation: bit flips, truncation, size field, u32/u64 fields set to
    edge values, inserted or deleted bytes; the CRC is repaired half of the time."""
    out = bytearray(data)
    kind = rnd.randrange(7) if out else 5  # an emptied file can only grow
    if kind == 0:  # bit flips
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(out))
            out[i] ^= 1 << rnd.randrange(8)
    elif kind == 1:  # truncation
        out = out[: rnd.randrange(len(out) + 1)]
    elif kind == 2:  # the committed size
        v = rnd.choice([0, 1, 35, 36, len(out) - 1, len(out) + 1, 2**63, 2**64 - 1, rnd.randrange(2**32)])
        out[0:8] = struct.pack("<Q", v % 2**64)
    elif kind in (3, 4):  # an aligned u32 / u64 anywhere (counts, offsets, flags, lengths)
        width = 4 if kind == 3 else 8
        if len(out) >= width:
            i = rnd.randrange(0, len(out) - width + 1)
            edge = [0, 1, 7, 8, 32, 36, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, len(out), len(out) >> 3]
            if width == 8:
                edge += [2**32, 2**63 - 1, 2**63, 2**64 - 1, 1 << 40, 1 << 33]
            v = rnd.choice(edge + [rnd.randrange(2 ** (8 * width))])
            out[i : i + width] = v.to_bytes(width, "little")
    elif kind == 5:  # insert bytes
        i = rnd.randrange(len(out) + 1)
        out[i:i] = os.urandom(rnd.randint(1, 16))
    else:  # delete bytes
        i = rnd.randrange(len(out) + 1)
        del out[i : i + rnd.randint(1, 16)]
    if rnd.random() < 0.5:
        out = fix_crc(out)
    return bytes(out)


def exercise(data: bytes, path: str) -> str:
    """Open the bytes as a file and use every accessor. Returns 'ok' or the PmError class name;
    any other exception propagates (a bug)."""
    with open(path, "wb") as f:
        f.write(data)
    try:
        with ParquetMeta(path) as pm:
            pm.snapshots()
            for size in pm.snapshots()[1:4]:
                ParquetMeta(path, parquet_size=size).close()
            for r in range(min(pm.row_group_count, 64)):
                for c in range(min(pm.column_count, 16)):
                    pm.stat_bytes(r, c)
                    pm.bloom_filter(r, c)
                    pm.bloom_ref(r, c)
            for c in range(min(pm.column_count, 16)):
                pm.column_stats(c)
            pm.byte_ranges()
            pm.to_description()
            if pm.column_count:
                from .expr import IsNotNull

                pm.prune(IsNotNull(pm.column_names[0]))
        # the same bytes through the in-memory path (object stores)
        with ParquetMeta(path, data=data):
            pass
        return "ok"
    except PmError as e:
        return type(e).__name__


def run(seeds: list, iterations: int, seed: int = 0, report_every: int = 0) -> dict:
    """Mutate the seed files `iterations` times; returns counts per outcome."""
    rnd = random.Random(seed)
    counts: dict = {}
    fd, path = tempfile.mkstemp(prefix="qdbpm-fuzz-")
    os.close(fd)
    try:
        for i in range(iterations):
            base = rnd.choice(seeds)
            data = base
            for _ in range(rnd.randint(1, 3)):
                data = mutate(data, rnd)
            outcome = exercise(data, path)
            counts[outcome] = counts.get(outcome, 0) + 1
            if report_every and (i + 1) % report_every == 0:
                print(f"  {i + 1:,} mutations: {counts}", flush=True)
    finally:
        os.unlink(path)
    return counts


def hostile_allocation_ok(data: bytes, path: str, factor: int = 64) -> int:
    """Peak Python memory while opening `data`, to check it stays proportional to the file."""
    import tracemalloc

    tracemalloc.start()
    try:
        exercise(data, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


__all__ = ["mutate", "exercise", "run", "fix_crc", "hostile_allocation_ok", "np"]
