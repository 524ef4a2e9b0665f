"""Mutation fuzzing of `_pm` files: the reader must answer every input with a PmError or a
correct object, never another exception, a crash or a hang.

A run opens its mutants with or without the CRC check (`verify`): without it, no structural
check can lean on the checksum. A valid mutant is then used through every accessor and pruned on
every column.
Runs are seeded: the same seed and count give the same mutants. Used by tests/pm/test_fuzz.py
(fixed seeds and counts) and scripts/fuzz.py (long runs).
"""

from __future__ import annotations

import os
import random
import struct
import tempfile
import zlib

import numpy as np

from qdbpm.pm import layout as L
from qdbpm.errors import PmError
from qdbpm.meta import ParquetMeta


def fix_crc(data: bytearray) -> bytearray:
    """Recompute the latest footer's CRC, so mutations reach the structural checks behind it."""
    if len(data) < L.MIN_COMMITTED_SIZE + 8:
        return data
    size = min(int.from_bytes(data[:8], "little"), len(data))
    at = size - 8
    if at > 8:
        data[at : at + 4] = struct.pack("<I", zlib.crc32(bytes(data[8:at])))
    return data


def with_footer(data: bytes, body: bytes) -> bytes:
    """`data` with `body` (fixed footer fields, block entries, ...) appended as a new latest footer:
    padded to 8, then CRC and FOOTER_LENGTH, the committed size updated and the CRC computed."""
    out = bytearray(data) + bytes(-len(data) % 8)
    out += body
    crc_at = len(out)
    out += struct.pack("<II", 0, len(body) + 4)  # CRC, then FOOTER_LENGTH through the CRC
    out[0:8] = struct.pack("<Q", len(out))
    out[crc_at : crc_at + 4] = struct.pack("<I", zlib.crc32(bytes(out[8:crc_at])))
    return bytes(out)


def fields(data: bytes) -> list:
    """(offset, width, value) of every typed field of a valid file's latest snapshot: header,
    column descriptors, footer, block offsets, bloom table, chunk records and inline bloom
    LENGTH prefixes. Mutating these lands each edge value on a field the checks must catch."""
    out = []

    def add(base, dtype, rec):
        for name in dtype.names:
            dt, off = dtype.fields[name]
            out.append((base + off, dt.itemsize, int(rec[name])))

    with ParquetMeta("<seed>", data=data) as pm:
        add(0, L.HEADER_DTYPE, np.frombuffer(data, L.HEADER_DTYPE, count=1)[0])
        for i in range(pm.column_count):
            add(L.HEADER_SIZE + L.COLUMN_SIZE * i, L.COLUMN_DTYPE, pm.columns[i])
        ft = pm.footer_offset
        add(ft, L.FOOTER_DTYPE, pm._footer.fixed)
        rgc = pm.row_group_count
        for r in range(rgc):
            out.append((ft + L.FOOTER_FIXED_SIZE + 4 * r, 4, int(pm.block_offsets[r]) >> L.BLOCK_OFFSET_SHIFT))
            off = int(pm.block_offsets[r])
            out.append((off, 8, int(pm.num_rows[r])))
            for c in range(pm.column_count):
                add(off + 8 + L.CHUNK_SIZE * c, L.CHUNK_DTYPE, pm.chunks[r, c])
        if pm.bloom_table is not None:
            at = ft + L.FOOTER_FIXED_SIZE + 4 * rgc
            for e in pm.bloom_table.reshape(-1):
                if pm.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL:
                    out += [(at, 8, int(e["offset"])), (at + 8, 8, int(e["length"]))]
                    at += 16
                else:
                    out.append((at, 4, int(e)))
                    if int(e):
                        p = int(e) << L.BLOCK_OFFSET_SHIFT
                        out.append((p, 4, int.from_bytes(data[p : p + 4], "little")))
                    at += 4
    return out


def _edge(width, v, rnd):
    """An edge value for a field of `width` bytes holding `v`: near the old value, near a block
    size, at a sign or width boundary, or random."""
    top = 1 << (8 * width)
    near = [v + 1, v - 1, v + 32, v - 32, v + 31, v * 2, v >> 3, v << 3, v ^ 0x80]
    edges = [0, 1, 7, 8, 31, 32, 33, 48, top // 2 - 1, top // 2, top - 1, top - 32]
    if width >= 4:
        edges += [1 << 31, 1 << 32, (1 << 37) + 32] if width == 8 else [1 << 31]
    return rnd.choice(near + edges + [rnd.randrange(top)]) % top


def mutate(data: bytes, rnd: random.Random, fields_of=None) -> bytes:
    """One random structural mutation: bit flips, truncation, size field, u32/u64 fields set to
    edge values, inserted or deleted bytes, or (given `fields_of`, the data's `fields`) one typed
    field set to an edge value; the CRC is repaired half of the time."""
    out = bytearray(data)
    kind = rnd.randrange(9 if fields_of else 7) if out else 5  # an emptied file can only grow
    if kind >= 7:  # a typed field
        at, width, v = rnd.choice(fields_of)
        out[at : at + width] = _edge(width, v, rnd).to_bytes(width, "little")
    elif kind == 0:  # bit flips
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
        out[i:i] = rnd.randbytes(rnd.randint(1, 16))  # seeded: a run replays exactly
    else:  # delete bytes
        i = rnd.randrange(len(out) + 1)
        del out[i : i + rnd.randint(1, 16)]
    if rnd.random() < 0.5:
        out = fix_crc(out)
    return bytes(out)


# Literals tried on every column, by the comparison kind of its type: enough to bind on each kind
# and reach the min/max rules and, through == and IN, the bloom probes.
_LITERALS = {
    "int": (0, 1_700_000_000_000_500, -1, 2**63, 1.5),
    "uint": (0, 7, 2**32 - 1),
    "anysign": (0, -1, 2**63),
    "float": (0.0, -1.5, float("nan")),
    "bytes": (b"AAPL", "TSLA", bytes(16), b""),
    "bigdec": (0, 12, -7),
    "none": (0, b"x"),
}


def _predicates(name, kind):
    """(may probe blooms, predicate) pairs for one column."""
    from qdbpm.prune import expr as E

    vals = _LITERALS[kind]
    yield True, E.Cmp(name, "==", vals[0])
    yield True, E.In(name, tuple(vals))
    yield True, E.In(name, (vals[1], None))
    yield False, E.Cmp(name, "<", vals[1]) | E.Cmp(name, ">=", vals[-1])
    yield False, E.Not(E.Cmp(name, "==", vals[-1])) & E.IsNotNull(name)
    yield False, E.Between(name, vals[0], vals[1])
    yield False, E.IsNull(name)


def _use(pm, verify, parquet_file, path, tally):
    """Every accessor and pruning over one open snapshot; PredicateError (a literal that does not
    fit a mutated column type) is an answer, not a failure."""
    from qdbpm import bloom
    from qdbpm.errors import PredicateError

    pm.snapshots()
    for size in pm.snapshots()[1:4]:
        ParquetMeta(path, parquet_size=size, verify=verify).close()
    np.array(pm.chunks)
    np.array(pm.num_rows)
    h = bloom.hash_values([b"AAPL", b"TSLA"])
    for r in range(min(pm.row_group_count, 64)):
        for c in range(min(pm.column_count, 16)):
            pm.stat_bytes(r, c)
            bits = pm.bloom_filter(r, c)
            if bits is not None:
                bloom.probe(bits, h)
            pm.bloom_ref(r, c)
    pm.byte_ranges()
    pm.to_description()
    for ts in (0, 1_700_000_000_000_500):
        try:
            pm.timestamp_find(ts)
            pm.timestamp_range(ts, ts + 1000)
        except PredicateError:
            pass
    seen = set()
    for c in range(min(pm.column_count, 16)):
        name = pm.column_names[c]
        pm.column_stats(c)
        idx = pm.bloom_index(c, parquet_file)
        if idx is not None:
            bloom.probe_many(h, *idx, any_of=c % 2 == 1)  # every filter reaches a kernel
            tally["bloom_indexes"] = tally.get("bloom_indexes", 0) + 1
        if name in seen:
            continue  # a duplicated name binds to its first column
        seen.add(name)
        for eq, pred in _predicates(name, pm.schema.types[c].kind):
            try:
                pm.prune(pred, parquet_file=parquet_file)
            except PredicateError:
                tally["PredicateError"] = tally.get("PredicateError", 0) + 1
                continue
            tally["prunes"] = tally.get("prunes", 0) + 1
            if idx is not None and eq:
                tally["bloom_prunes"] = tally.get("bloom_prunes", 0) + 1


def exercise(data: bytes, path: str, *, verify: bool = True, parquet_file=None, tally=None) -> str:
    """Open the bytes as a file, use every accessor and prune on every column. Returns 'ok' or the
    PmError class name; any other exception propagates (a bug). `parquet_file` backs external
    bloom references; `tally` (a dict) counts prunes, bloom-backed prunes and unbindable literals."""
    tally = {} if tally is None else tally
    with open(path, "wb") as f:
        f.write(data)
    try:
        with ParquetMeta(path, verify=verify) as pm:
            _use(pm, verify, parquet_file, path, tally)
        # the same bytes through the in-memory path (object stores)
        with ParquetMeta(path, data=data, verify=verify):
            pass
        return "ok"
    except PmError as e:
        return type(e).__name__


def fake_parquet(path: str, size: int = 16384, seed: int = 0) -> str:
    """Random bytes standing in for data.parquet: external bloom entries of the seeds (and of
    mutants, when their references stay inside it) read their bitsets from here."""
    with open(path, "wb") as f:
        f.write(random.Random(seed).randbytes(size))
    return path


def run(seeds: list, iterations: int, seed: int = 0, report_every: int = 0, *, verify: bool = True,
        tally=None) -> dict:
    """Mutate the seed files `iterations` times; returns counts per outcome. Deterministic for a
    given seed. A non-PmError propagates with a note naming the seed and iteration."""
    rnd = random.Random(seed)
    counts: dict = {}
    tally = {} if tally is None else tally
    seed_fields = [fields(d) for d in seeds]
    tmp = tempfile.mkdtemp(prefix="qdbpm-fuzz-")
    path = os.path.join(tmp, "_pm")
    pq = fake_parquet(os.path.join(tmp, "data.parquet"))
    try:
        for i in range(iterations):
            k = rnd.randrange(len(seeds))
            data = seeds[k]
            for j in range(rnd.randint(1, 3)):
                data = mutate(data, rnd, seed_fields[k] if j == 0 else None)
            try:
                outcome = exercise(data, path, verify=verify, parquet_file=pq, tally=tally)
            except BaseException as e:
                e.add_note(f"qdbpm.fuzz.run(seed={seed}, verify={verify}): iteration {i}; mutant "
                           f"({len(data)} bytes) = {data.hex()}")
                raise
            counts[outcome] = counts.get(outcome, 0) + 1
            if report_every and (i + 1) % report_every == 0:
                print(f"  {i + 1:,} mutations: {counts}", flush=True)
    finally:
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
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


__all__ = ["mutate", "fields", "exercise", "run", "fix_crc", "fake_parquet", "hostile_allocation_ok"]
