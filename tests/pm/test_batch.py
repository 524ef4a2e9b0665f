"""The batch open (qdbpm/pm/batch.py, kernel pm/_batch.pyx) against the one-file open it stands in for.

A file the batch takes must be one a one-file open (CRC included) accepts, with the same snapshot:
the same row counts, chunk records and schema; a file it does not take is left to the one-file
open (which raises the error, or maps a large file). Seeds are the golden files and multi-snapshot
files; mutants are seeded (support/fuzz.mutate), so the verdicts are compared on thousands of
valid and invalid files in one batch.
"""

import glob
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.errors import PmError
from qdbpm.pm import _batch
from qdbpm.pm import layout as L
from qdbpm.pm.batch import PmBatch
from qdbpm.prune.stats import Schema
from qdbpm.sync.generate import generate
from support.fuzz import fields, fix_crc, mutate
from support.table_states import table_state

from conftest import GOLDEN, read_bytes

N_MUTANTS = 1500


def _multi_snapshot(d) -> str:
    path = os.path.join(d, "multi", "_pm")
    os.makedirs(os.path.dirname(path))
    qdbpm.write_new(path, table_state(2, 0))
    qdbpm.write_update(path, table_state(3, 1, changed={0}))
    qdbpm.write_update(path, table_state(4, 2, changed={2}))
    return path


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("seeds"))
    out = {os.path.basename(p): read_bytes(p) for p in sorted(glob.glob(os.path.join(GOLDEN, "*.pm")))}
    out["multi"] = read_bytes(_multi_snapshot(d))
    return out


def one_file(path, **kw):
    """("ok", num_rows, chunk records, schema key) or ("error", class) of a one-file open."""
    try:
        with qdbpm.open(path, **kw) as pm:
            return "ok", np.array(pm.num_rows), np.array(pm.chunks), (pm.columns.tobytes(), tuple(pm.column_names))
    except PmError as e:
        return "error", type(e).__name__


def write_all(d, blobs) -> list:
    paths = []
    for i, data in enumerate(blobs):
        p = os.path.join(d, f"{i:05d}", "_pm")
        os.makedirs(os.path.dirname(p))
        with open(p, "wb") as f:
            f.write(data)
        paths.append(p)
    return paths


def assert_agrees(batch, paths, **kw):
    """Every file the batch takes opens alone with the same arrays; every file it leaves is one a
    one-file open rejects or maps (the walk reports it to the caller). Returns (taken, left)."""
    keys = {}
    taken = left = 0
    for i, p in enumerate(paths):
        want = one_file(p, **kw)
        if not batch.ok[i]:
            left += 1
            if batch.status[i] == _batch.LARGE:
                continue
            assert want[0] == "error", (p, "a valid file left out of the batch")
            continue
        taken += 1
        assert want[0] == "ok", (p, "the batch took a file a one-file open rejects:", want)
        rgs = np.arange(batch.rg_start[i], batch.rg_start[i + 1])
        assert np.array_equal(batch.num_rows[rgs], want[1])
        for c in range(want[2].shape[1] if want[2].ndim == 2 else 0):
            assert batch.records([i], c).tobytes() == np.ascontiguousarray(want[2][:, c]).tobytes()
        keys.setdefault(int(batch.schema_id[i]), set()).add(want[3])
        with qdbpm.open(p, **kw) as pm, qdbpm.open(p, **kw) as via:
            assert Schema.of(pm) is Schema.of(via)
    # one id per distinct (descriptors, names), and distinct ids for distinct keys
    assert all(len(v) == 1 for v in keys.values()), keys
    assert len({next(iter(v)) for v in keys.values()}) == len(keys)
    return taken, left


def test_seeds_are_taken_and_agree(seeds, tmp_path):
    paths = write_all(str(tmp_path), list(seeds.values()) * 2)
    b = PmBatch(paths)
    assert b.ok.all()
    assert assert_agrees(b, paths) == (len(paths), 0)
    # files with byte-equal descriptors and names share a schema id (each seed appears twice)
    n = len(seeds)
    assert np.array_equal(b.schema_id[:n], b.schema_id[n:])


def test_mutants_agree_with_one_file_opens(seeds, tmp_path):
    rnd = random.Random(20261123)
    names = sorted(seeds)
    blobs = []
    for _ in range(N_MUTANTS):
        data = seeds[rnd.choice(names)]
        blobs.append(bytes(mutate(data, rnd, fields(data) if rnd.random() < 0.5 else None)))
    paths = write_all(str(tmp_path), blobs)
    for verify in (True, False):
        taken, left = assert_agrees(PmBatch(paths, verify=verify), paths, verify=verify)
        assert taken > 100 and left > 300, (taken, left)  # both verdicts well exercised


def test_both_crc_paths_give_the_same_verdicts(seeds, tmp_path, monkeypatch):
    # The Checker calls ISA-L's CRC from C (pm/_crc) where it can, else pm/crc.py's function:
    # on mutants whose CRC is left stale or made right, both take and leave the same files.
    rnd = random.Random(20261130)
    names = sorted(seeds)
    blobs = []
    for i in range(400):
        m = bytearray(mutate(seeds[rnd.choice(names)], rnd))
        blobs.append(bytes(fix_crc(m) if i % 2 else m))
    paths = write_all(str(tmp_path), blobs)
    native = PmBatch(paths)
    monkeypatch.setattr(_batch, "NATIVE_CRC", False)
    fallback = PmBatch(paths)
    assert np.array_equal(native.ok, fallback.ok) and np.array_equal(native.status, fallback.status)
    assert 50 < native.ok.sum() < len(paths) - 50, native.ok.sum()
    assert_agrees(native, paths)


def test_the_walk_checks_each_file_as_it_reads_it_and_agrees(seeds, tmp_path):
    # listing.read_partitions checks each `_pm` right after reading it (Checker), in directory
    # order, and lays the results out in sorted order: the same verdicts, schema ids and
    # representatives as check_files over the sorted files, and each taken file agrees with
    # its one-file open
    from qdbpm.table import listing

    rnd = random.Random(20261126)
    names = sorted(seeds)
    blobs = [bytes(mutate(seeds[n], rnd, fields(seeds[n]) if rnd.random() < 0.5 else None)) if rnd.random() < 0.6
             else seeds[n] for n in (rnd.choice(names) for _ in range(400))]
    paths = write_all(str(tmp_path), blobs)
    parts, fused = listing.read_partitions(str(tmp_path), lambda ps: [os.path.join(tmp_path, p, "_pm") for p in ps])
    assert parts == [os.path.basename(os.path.dirname(p)) for p in paths]
    plain = PmBatch(paths)
    assert np.array_equal(fused.status, plain.status) and np.array_equal(fused.rg_start, plain.rg_start)
    assert np.array_equal(fused.schema_id, plain.schema_id) and np.array_equal(fused.reps, plain.reps)
    assert np.array_equal(fused.num_rows, plain.num_rows)
    taken, left = assert_agrees(fused, paths)
    assert taken > 100 and left > 50, (taken, left)
    assert len(set(fused.schema_id.tolist()) - {-1}) > 3  # several schemas, numbered in sorted order
    # the walk reads in directory order, not sorted: the results were permuted for real
    assert not np.array_equal(fused.at[fused.ok], plain.at[plain.ok])


def test_checker_finish_refuses_a_bad_order():
    arena = _batch.read_files([], 1 << 20, 1 << 24)[0]
    c = _batch.Checker(arena, True, None)
    with pytest.raises(ValueError, match="permutation"):
        c.finish([0])  # nothing checked: no file 0
    rg, block, rows, sid, reps = c.finish([])
    assert rg.tolist() == [0] and len(block) == len(rows) == len(sid) == len(reps) == 0


def test_pinned_snapshots_agree(seeds, tmp_path):
    paths = write_all(str(tmp_path), [seeds["multi"]] * 4)
    with qdbpm.open(paths[0]) as pm:
        chain = [pm.parquet_size, pm.prev_pm_size]
    sizes = [None, chain[0], 1, 12345]  # the latest, the latest by size, and two never committed
    b = PmBatch(paths, parquet_sizes=sizes)
    for i, size in enumerate(sizes):
        want = one_file(paths[i], parquet_size=size)
        assert bool(b.ok[i]) == (want[0] == "ok"), (size, want)
        if want[0] == "ok":
            rgs = np.arange(b.rg_start[i], b.rg_start[i + 1])
            assert np.array_equal(b.num_rows[rgs], want[1])


def test_files_it_cannot_take(seeds, tmp_path):
    data = seeds["multi"]
    d = str(tmp_path)
    good, big, bad_crc, short, missing, directory, fifo = (os.path.join(d, n) for n in
                                                           ("good", "big", "crc", "short", "missing", "dir", "fifo"))
    for p, b in ((good, data), (big, data), (short, data[:20])):
        with open(p, "wb") as f:
            f.write(b)
    flipped = bytearray(data)
    flipped[100] ^= 1
    with open(bad_crc, "wb") as f:
        f.write(flipped)
    os.mkdir(directory)
    os.mkfifo(fifo)
    paths = [good, big, bad_crc, short, missing, directory, fifo]
    b = PmBatch(paths, max_file=len(data) + 1)
    assert b.ok.tolist() == [True, True, False, False, False, False, False]
    assert b.status[4] == _batch.MISSING and b.status[5] == _batch.MISSING
    small = PmBatch(paths, max_file=len(data) - 1)  # over its share: mapped one by one, not an error
    assert small.status[0] == small.status[1] == _batch.LARGE
    assert PmBatch([good, big], budget=len(data) + 8).status.tolist() == [_batch.OK, _batch.LARGE]
    with pytest.raises(qdbpm.ChecksumError):
        qdbpm.open(bad_crc)  # what a table reports for the file the batch left
    with pytest.raises(ValueError, match="not in the batch"):
        b.data(2)


def test_a_file_longer_than_the_first_read(tmp_path):
    """Files past the kernel's first 64 KiB read are read whole (the size asked, then the rest)."""
    parquet = os.path.join(str(tmp_path), "data.parquet")
    pq.write_table(pa.table({"a": np.arange(600), "s": [f"v{i}" for i in range(600)]}), parquet, row_group_size=1)
    generate(parquet)
    path = os.path.join(str(tmp_path), "_pm")
    assert os.path.getsize(path) > 65536
    b = PmBatch([path, path])
    assert b.ok.all()
    assert assert_agrees(b, [path, path]) == (2, 0)


def test_gather_refuses_addresses_outside_the_buffer(seeds, tmp_path):
    paths = write_all(str(tmp_path), [seeds["multi"]])
    b = PmBatch(paths)
    out = np.empty((1, L.CHUNK_SIZE), np.uint8)
    for at in (-1, len(b.buffer) - L.CHUNK_SIZE + 1, 1 << 62):
        with pytest.raises(qdbpm.CorruptFileError):
            _batch.gather(b.arena, np.array([at], np.int64), out)


def test_constants_match_layout():
    assert _batch.CONSTANTS == {"HEADER_SIZE": L.HEADER_SIZE, "COLUMN_SIZE": L.COLUMN_SIZE,
                                "MIN_COMMITTED_SIZE": L.MIN_COMMITTED_SIZE, "CRC_START": L.CRC_START,
                                "BLOCK_NUM_ROWS_SIZE": L.BLOCK_NUM_ROWS_SIZE,
                                "COLUMN_AT": {"name_offset": L.COLUMN_AT["name_offset"],
                                              "name_length": L.COLUMN_AT["name_length"]}}


def test_fix_crc_mutants_are_taken_only_when_valid(seeds, tmp_path):
    """CRC-repaired mutants pass the checksum: the structural checks alone decide."""
    rnd = random.Random(5)
    blobs = [bytes(fix_crc(bytearray(mutate(seeds["multi"], rnd)))) for _ in range(300)]
    paths = write_all(str(tmp_path), blobs)
    taken, left = assert_agrees(PmBatch(paths), paths)
    assert taken + left == len(paths)
