"""The fused validation kernel (qdbpm/pm/_validate.pyx) against the Python checks it stands in for.

The kernel answers "all fine" (a Plan) or "something is wrong" (None); the reader then opens the
fast way or runs the reference checks (validate.py), which raise. So on every input: the kernel's
verdict is the reference's, an open raises the very error (class and message) a reference-only
open raises, and a fast open sets the very attributes a reference open sets. Mutants are seeded
and region-targeted (header, descriptors, names and lists, block records, footer, block offsets,
bloom table, footer sections, CRC and trailer) over real files. A truncated or mutated buffer
placed against PROT_NONE pages must not make the kernel read outside it.
"""

import contextlib
import glob
import os
import pickle
import random
import struct
import subprocess
import sys

import numpy as np
import pytest

import qdbpm
from qdbpm.errors import PmError
from qdbpm.pm import _validate
from qdbpm.pm import layout as L
from qdbpm.pm import validate as V
from qdbpm.pm.reader import PmFile
from support.fuzz import fields, fix_crc, mutate, with_footer
from support.table_states import table_state

from conftest import GOLDEN, read_bytes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- seeds ---------------------------------------------------------------------------------------


def refooter(data: bytes, order=None, fff=0, sections=b"") -> bytes:
    """`data` with a new latest footer: the latest's fixed fields and row groups (listed in `order`:
    block offsets and bloom table rows, placed by hand), FOOTER_FEATURE_FLAGS `fff` and the
    section bytes `sections` before the CRC."""
    with PmFile("<seed>", data=data) as pm:
        fixed = bytearray(pm._footer.raw)
        order = np.arange(pm.row_group_count) if order is None else np.asarray(order)
        entries = (pm.block_offsets[order] >> L.BLOCK_OFFSET_SHIFT).astype("<u4").tobytes()
        blooms = b"" if pm.bloom_table is None else pm.bloom_table[order].tobytes()
    fixed[32:40] = struct.pack("<Q", fff)
    return with_footer(data, bytes(fixed) + entries + blooms + sections)


def _multi_snapshot(tmp_dir) -> bytes:
    """Three snapshots, row groups 0 and 2 rewritten later: unevenly spaced blocks, a PREV chain."""
    path = os.path.join(tmp_dir, "_pm")
    qdbpm.write_new(path, table_state(2, 0))
    qdbpm.write_update(path, table_state(3, 1, changed={0}))
    qdbpm.write_update(path, table_state(4, 2, changed={2}))
    return read_bytes(path)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    out = {os.path.basename(p): read_bytes(p) for p in sorted(glob.glob(os.path.join(GOLDEN, "*.pm")))}
    out["multi_snapshot"] = multi = _multi_snapshot(str(tmp_path_factory.mktemp("multi")))
    out["reversed_blocks"] = refooter(out["inline_bloom.pm"], [2, 1, 0])  # apart, unordered
    out["shuffled_blocks"] = refooter(multi, [2, 0, 3, 1])
    return out


# --- both opens ----------------------------------------------------------------------------------


@contextlib.contextmanager
def reference_only():
    """Opens skip the kernel: every one takes the reference path (validate.py's checks)."""
    kernel = V.check_open
    V.check_open = lambda buf, parquet_size=None: None
    try:
        yield
    finally:
        V.check_open = kernel


def _value(v):
    if isinstance(v, np.ndarray):
        return ("array", v.dtype.descr, v.shape, v.tobytes())
    if isinstance(v, list):
        return ("list", [(type(x).__name__, _value(x)) for x in v])
    if isinstance(v, tuple):
        return ("tuple", [(type(x).__name__, _value(x)) for x in v])
    if type(v).__name__ == "_Footer":
        return ("footer", v.pm_size, v.start, v.length, v.raw, v.parquet_size, v.prev_pm_size)
    return (type(v).__name__, v)


def state(pm) -> dict:
    """Everything an open set, comparable across the two paths."""
    return {k: _value(v) for k, v in vars(pm).items() if k not in ("_mm", "_buf")}


def outcome(data, **kw):
    """("ok", attributes) or (error class, message) of opening the bytes."""
    try:
        with PmFile("<mutant>", data=data, **kw) as pm:
            return "ok", state(pm)
    except PmError as e:
        return type(e).__name__, str(e)


def committed(data):
    """The committed bytes the kernel sees, or None when the size check fails before it runs."""
    try:
        n = V.committed_size(len(data), bytes(data[: L.PM_SIZE_BYTES]), lambda msg: ValueError(msg))
    except ValueError:
        return None
    return np.frombuffer(data, np.uint8, count=n)


def compare(data, parquet_size=None, modes=(False, True)) -> str:
    """Kernel verdict == reference verdict, and both opens alike, without and with the CRC check.
    Returns "ok", "bad" or "size" (rejected before the kernel runs)."""
    buf = committed(data)
    for verify in modes:
        fast = outcome(data, parquet_size=parquet_size, verify=verify)
        with reference_only():
            ref = outcome(data, parquet_size=parquet_size, verify=verify)
        assert fast == ref, (verify, parquet_size, fast[:1], ref[:1], data.hex())
        if not verify:
            if buf is None:
                assert ref[0] != "ok"
                verdict = "size"
            else:
                fine = _validate.check_open(buf, parquet_size) is not None
                assert fine == (ref[0] == "ok"), (parquet_size, ref, data.hex())
                verdict = "ok" if fine else "bad"
    return verdict


# --- regions and mutations -----------------------------------------------------------------------


def regions(data: bytes) -> dict:
    """name -> list of (start, end) spans of one valid file's latest snapshot."""
    with PmFile("<seed>", data=data) as pm:
        ncols, rgc, ft = pm.column_count, pm.row_group_count, pm.footer_offset
        desc_end = L.HEADER_SIZE + L.COLUMN_SIZE * ncols
        fixed = L.block_size(ncols)
        offs = pm.block_offsets.tolist()
        entries = ft + L.FOOTER_FIXED_SIZE
        bt_end = entries + L.ROW_GROUP_ENTRY_SIZE * rgc
        if pm.bloom_table is not None:
            bt_end += pm.bloom_table.nbytes
        out = {
            "header": [(0, L.HEADER_SIZE)],
            "descriptors": [(L.HEADER_SIZE, desc_end)],
            "names and lists": [(desc_end, pm.header_end)],
            "chunk records": [(o, o + fixed) for o in offs],
            "block data": [(o + fixed, (offs + [ft])[i + 1] if i + 1 < len(offs) else ft) for i, o in enumerate(offs)],
            "footer": [(ft, entries)],
            "block offsets": [(entries, entries + L.ROW_GROUP_ENTRY_SIZE * rgc)],
            "bloom table": [(entries + L.ROW_GROUP_ENTRY_SIZE * rgc, bt_end)],
            "footer sections": [(bt_end, pm.crc_offset)],
            "crc and trailer": [(pm.crc_offset, pm.pm_size)],
        }
    spans = {k: [(a, b) for a, b in v if b > a] for k, v in out.items()}
    return {k: v for k, v in spans.items() if v}


EDGES32 = [0, 1, 7, 8, 31, 32, 33, 36, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
EDGES64 = EDGES32 + [2**32, 2**37, 2**37 + 32, 2**63 - 1, 2**63, 2**64 - 1, 2**48]


def mutate_in(data: bytes, span, rnd: random.Random) -> bytes:
    """One mutation inside [a, b): bit flips, a byte, or a u32 / u64 set to an edge, a near or a
    random value (a wide value may spill past b); the CRC repaired half of the time."""
    a, b = span
    out = bytearray(data)
    kind = rnd.randrange(5)
    at = rnd.randrange(a, b)
    if kind == 0:
        for _ in range(rnd.randint(1, 3)):
            out[rnd.randrange(a, b)] ^= 1 << rnd.randrange(8)
    elif kind == 1:
        out[at] = rnd.choice([0, 0xFF, 0x80, 0x7F, rnd.randrange(256)])
    else:
        width = 4 if kind in (2, 3) else 8
        at = a + (at - a) // width * width if kind in (2, 4) else at  # aligned to the span, or not
        at = min(at, len(out) - width)
        if at < 0:
            return bytes(out)
        old = int.from_bytes(out[at : at + width], "little")
        edges = EDGES32 if width == 4 else EDGES64
        v = rnd.choice(edges + [old + 1, old - 1, old + 8, old - 8, old << 3, old >> 3, old ^ (1 << 31),
                                len(out), len(out) >> 3, rnd.randrange(2 ** (8 * width))])
        out[at : at + width] = (v % 2 ** (8 * width)).to_bytes(width, "little")
    if rnd.random() < 0.5:
        out = fix_crc(out)
    return bytes(out)


def mutants(seeds, count, seed):
    """(name, region, bytes, parquet_size) cases, every region of every seed in turn."""
    rnd = random.Random(seed)
    plan = []
    for name, data in seeds.items():
        for region, spans in regions(data).items():
            plan.append((name, region, spans))
    with PmFile("<seed>", data=seeds["multi_snapshot"]) as pm:
        chain = pm.snapshots()
    out = []
    for i in range(count):
        name, region, spans = plan[i % len(plan)]
        data = seeds[name]
        for _ in range(rnd.choice([1, 1, 1, 2])):
            data = mutate_in(data, rnd.choice(spans), rnd)
        ps = None
        if name == "multi_snapshot" and rnd.random() < 0.5:
            ps = rnd.choice(chain + [chain[-1] + 1, 2**64 + 7, -8, 0])
        out.append((name, region, data, ps))
    return out


# --- tests ---------------------------------------------------------------------------------------


def test_constants_match_layout():
    K = _validate.CONSTANTS
    for name, v in K.items():
        if name.endswith("_AT"):
            home = getattr(L, name)
            assert v == {f: home[f] for f in v}, name
        else:
            assert v == getattr(L, name), name


def test_seeds_open_alike_every_snapshot(seeds):
    for name, data in seeds.items():
        with PmFile("<seed>", data=data) as pm:
            chain = pm.snapshots()
        for ps in [None] + chain:
            assert compare(data, ps) == "ok", (name, ps)
        assert compare(data, chain[-1] + 1) == "bad", name  # no such snapshot


def test_fast_path_is_taken(seeds):
    """Valid files never need the reference checks (and the uneven / unordered seeds are valid)."""
    calls = []
    real = V.check_block_offsets
    V.check_block_offsets = lambda *a: calls.append(a) or real(*a)
    try:
        for data in seeds.values():
            PmFile("<seed>", data=data).close()
    finally:
        V.check_block_offsets = real
    assert not calls


@pytest.mark.parametrize("seed", [17, 18])
def test_mutants_kernel_verdict_is_the_reference_verdict(seeds, seed):
    tally = {}
    for name, region, data, ps in mutants(seeds, 2000, seed):
        verdict = compare(data, ps)
        tally.setdefault(region, {}).setdefault(verdict, 0)
        tally[region][verdict] += 1
    # Every region is reached, and in each the kernel both accepts and rejects.
    assert len(tally) == 10, tally
    for region, counts in tally.items():
        assert counts.get("bad", 0) >= 5, (region, counts)
        if region not in ("crc and trailer", "footer", "header"):
            assert counts.get("ok", 0) >= 5, (region, counts)


def test_fuzz_mutants_kernel_verdict_is_the_reference_verdict(seeds):
    """The fuzz suite's own mutations (truncations, inserts, the committed size, typed fields)."""
    rnd = random.Random(7)
    names = sorted(seeds)
    field_lists = {n: fields(seeds[n]) for n in names}
    counts = {}
    for _ in range(1500):
        n = rnd.choice(names)
        data = mutate(seeds[n], rnd, field_lists[n])
        v = compare(data)
        counts[v] = counts.get(v, 0) + 1
    assert min(counts.get(k, 0) for k in ("ok", "bad", "size")) > 50, counts


def test_parquet_size_targets(seeds):
    data = seeds["multi_snapshot"]
    with PmFile("<seed>", data=data) as pm:
        chain = pm.snapshots()
    for ps in chain + [np.int64(chain[1]), True, 2**64 + chain[0], -chain[0], float(chain[0]), chain[0] + 0.5]:
        assert compare(data, ps) == ("ok" if ps in chain else "bad"), ps


def list_fields(data: bytes) -> list:
    """(offset, width, value) of the fields support.fuzz.fields leaves out: sorting and bloom column
    lists, the squash tracker, footer sections, stored CRC and trailer."""
    out = []
    with PmFile("<seed>", data=data) as pm:
        at = L.HEADER_SIZE + L.COLUMN_SIZE * pm.column_count
        out += [(at + 4 * i, 4, int(v)) for i, v in enumerate(pm.sorting_column_indices)]
        if len(pm.bloom_columns):
            at = pm.bloom_columns.__array_interface__["data"][0] - pm.buffer.__array_interface__["data"][0]
            out.append((at - 4, 4, len(pm.bloom_columns)))
            out += [(at + 4 * i, 4, int(v)) for i, v in enumerate(pm.bloom_columns)]
        if pm.squash_tracker is not None:
            out.append((pm.header_end - 8, 8, pm.squash_tracker))
        pos = pm.footer_offset + L.FOOTER_FIXED_SIZE + 4 * pm.row_group_count
        pos += 0 if pm.bloom_table is None else pm.bloom_table.nbytes
        if pm.seq_txn is not None:
            out.append((pos, 8, pm.seq_txn))
            pos += 8
        if pm.scratchpad is not None:
            out.append((pos, 4, len(pm.scratchpad)))
            pos += 4
            for code, val in pm.scratchpad:
                out += [(pos, 4, code), (pos + 4, 4, len(val))]
                pos += 8 + len(val)
        out += [(pm.crc_offset, 4, pm.stored_crc), (pm.pm_size - 4, 4, pm.pm_size - 4 - pm.footer_offset)]
    return out


def sweep_values(width, v):
    """Edge values for a field of `width` bytes holding `v`."""
    top = 1 << (8 * width)
    vals = {0, 1, v - 1, v + 1, v + 8, v - 8, v + 32, v - 32, v ^ 0x80, top - 1, top // 2, top // 2 - 1}
    if width == 1:
        vals |= {7, 8, 9, 15, 0x10, 0x1F, 0x88, 0x89}
    if width == 8:
        vals |= {1 << 32, 1 << 37, (1 << 37) + 32, 1 << 48, (1 << 48) + 8}
    return sorted(x % top for x in vals if x % top != v)


def unchecked(data: bytes) -> set:
    """Offsets of the fields no check reads (ids, types, counts, byte ranges, reserved bytes): the
    sweep sets them to one value only."""
    with PmFile("<seed>", data=data) as pm:
        out = {L.HEADER_AT["reserved"], pm.footer_offset + L.FOOTER_AT["unused_bytes"]}
        for i in range(pm.column_count):
            out |= {L.column_field_offset(i, f) for f in ("id", "type", "max_rep_level", "max_def_level", "reserved")}
        for o in pm.block_offsets.tolist():
            out.add(o)
            for c in range(pm.column_count):
                out |= {L.chunk_field_offset(o, c, f) for f in L.CHUNK_DTYPE.names
                        if f not in ("codec", "stat_flags", "stat_sizes", "min_stat", "max_stat")}
    return out


def test_every_field_swept(seeds):
    """Each typed field of each seed set to each of its edge values (CRC repaired); scratchpad.pm
    has every section of dts_asc.pm and seq_txn.pm, shuffled_blocks the case of reversed_blocks."""
    counts = {}
    for name, data in seeds.items():
        if name in ("dts_asc.pm", "seq_txn.pm", "reversed_blocks"):
            continue
        skip = unchecked(data)
        for at, width, v in fields(data) + list_fields(data):
            for x in sweep_values(width, v)[: 1 if at in skip else None]:
                out = bytearray(data)
                out[at : at + width] = x.to_bytes(width, "little")
                verdict = compare(bytes(fix_crc(out)), modes=(False,))
                counts[verdict] = counts.get(verdict, 0) + 1
    assert counts.get("ok", 0) > 3000 and counts.get("bad", 0) > 3000, counts


def _scratchpad(*lengths) -> bytes:
    return struct.pack("<I", len(lengths)) + b"".join(struct.pack("<II", 7, n) + bytes(n) for n in lengths)


def test_boundaries(seeds):
    """Checks the mutants reach rarely, each just inside and just past its bound."""
    cases = []
    a = seeds["example_a.pm"]
    limit = L.SCRATCHPAD_MAX_BYTES - 4 - 8  # one entry of this length ends the scratchpad at 1 MiB
    for lengths, ok in (((limit,), True), ((limit + 1,), False), ((100, limit - 108), True),
                        ((100, limit - 107), False), ((0, 0, 0), True)):
        cases.append((refooter(a, fff=L.FOOTER_FEATURE_SCRATCHPAD, sections=_scratchpad(*lengths)), ok))
    cases.append((refooter(a, fff=L.FOOTER_FEATURE_SEQ_TXN, sections=bytes(8)), True))
    cases.append((refooter(a, fff=L.FOOTER_FEATURE_SEQ_TXN, sections=bytes(4)), False))
    cases.append((refooter(a, fff=1 << 9, sections=bytes(4)), True))  # explained by an optional bit
    cases.append((refooter(a, fff=1 << 40, sections=b""), False))  # an unknown required bit
    # external filters at the kernels' size limit, with Parquet data large enough for any length
    ext = seeds["external_bloom.pm"]
    with PmFile("<seed>", data=ext) as pm:
        ft, table = pm.footer_offset, pm.footer_offset + 40 + 4 * pm.row_group_count
    for length, ok in ((L.SBBF_MAX_BYTES, True), (L.SBBF_MAX_BYTES + 32, False), (33, False), (32, True)):
        out = bytearray(ext)
        out[ft : ft + 8] = struct.pack("<Q", 1 << 50)
        out[table + 8 : table + 16] = struct.pack("<Q", length)
        cases.append((bytes(fix_crc(out)), ok))
    # out-of-line stats ending exactly at the footer, and one byte past it
    with PmFile("<seed>", data=seeds["ool_stats.pm"]) as pm:
        r, c = map(int, np.argwhere((pm.chunks["stat_flags"] & (L.STAT_MIN_PRESENT | L.STAT_MIN_INLINED))
                                    == L.STAT_MIN_PRESENT)[-1])
        base = int(pm.block_offsets[r]) + L.block_size(pm.column_count)
        at, room = L.chunk_field_offset(int(pm.block_offsets[r]), c, "min_stat"), pm.footer_offset - base
    for rel, ln, ok in ((room - 5, 5, True), (room - 4, 5, False), (room, 0, True), (room + 1, 0, False)):
        out = bytearray(seeds["ool_stats.pm"])
        out[at : at + 8] = struct.pack("<Q", (rel << L.OOL_LENGTH_BITS) | ln)
        cases.append((bytes(fix_crc(out)), ok))
    # a FIXED_LEN_BYTE_ARRAY column needs a positive width; DTS_ASC with a descending DTS column
    for fbl, ok in ((1, True), (0, False), (-1, False)):
        out = bytearray(a)
        out[L.column_field_offset(0, "physical_type")] = L.PT_FIXED_LEN_BYTE_ARRAY
        out[L.column_field_offset(0, "fixed_byte_len") : L.column_field_offset(0, "fixed_byte_len") + 4] = \
            struct.pack("<i", fbl)
        cases.append((bytes(fix_crc(out)), ok))
    dts = seeds["dts_asc.pm"]
    with PmFile("<seed>", data=dts) as pm:
        at = L.column_field_offset(pm.designated_timestamp, "flags")
    out = bytearray(dts)
    out[at] |= L.COLUMN_FLAG_DESCENDING
    cases.append((bytes(fix_crc(out)), False))
    for data, ok in cases:
        assert compare(data) == ("ok" if ok else "bad"), ok


GUARD_SCRIPT = r"""
import ctypes, mmap, pickle, sys
import numpy as np
from qdbpm.pm import _validate

cases = pickle.load(open(sys.argv[1], "rb"))
PAGE = mmap.PAGESIZE
longest = max(len(d) for d in cases)
pages = -(-longest // PAGE) + 2
arena = mmap.mmap(-1, pages * PAGE)
anchor = ctypes.c_char.from_buffer(arena)
base = ctypes.addressof(anchor)
del anchor
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
for page in (0, pages - 1):  # PROT_NONE on both sides of the data pages
    assert libc.mprotect(base + page * PAGE, PAGE, 0) == 0, ctypes.get_errno()
end = (pages - 1) * PAGE
checked = 0
for data in cases:
    for at in (PAGE, end - len(data)):  # flush against the lower guard, then the upper one
        arena[at : at + len(data)] = data
        _validate.check_open(np.frombuffer(arena, np.uint8, count=len(data), offset=at), None)
        checked += 1
print(checked)
"""


def test_kernel_never_reads_outside_the_buffer(seeds, tmp_path):
    """Every prefix of every seed, and mutants, each flush against a PROT_NONE page on either side:
    a read outside the buffer kills the child process."""
    rnd = random.Random(3)
    cases = []
    for data in seeds.values():
        cases += [data[:k] for k in range(len(data) + 1)]
    for _, _, data, _ in mutants(seeds, 600, 5):
        cases.append(data)
        cases.append(data[: rnd.randrange(len(data) + 1)])
    path = tmp_path / "cases.pickle"
    path.write_bytes(pickle.dumps(cases))
    env = dict(os.environ, PYTHONPATH=REPO)
    run = subprocess.run([sys.executable, "-c", GUARD_SCRIPT, str(path)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert int(run.stdout) == 2 * len(cases)
