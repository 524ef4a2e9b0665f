"""The table walk kernel (qdbpm/table/_walk.pyx) against its reference (listing.walk_reference, os.walk),
and a table opened as one batch against the same table opened file by file.

Trees are seeded and random: nested partitions, partitions inside partitions, hidden `.` / `_`
directories, `_pm` as a file, a directory, a symlink to a file or to a directory, a broken
symlink, symlinked directories (never entered), empty directories, non-ASCII and undecodable
names. Each tree is walked with the leaf rule (a directory with link count 2 is not listed) on
and off, for names, identities, and reads.
"""

import os
import random

import numpy as np
import pytest

import qdbpm
from qdbpm.errors import PmError
from qdbpm.pm import _batch
from qdbpm.table import _walk, listing
from qdbpm.table import table as table_mod
from qdbpm.table.table import open_table
from support.table_states import table_state

N_TREES = 60
PM = b"_pm"


def random_tree(root, rnd, pm_bytes):
    """A random directory tree under root (str); returns nothing: the reference says what it holds."""
    dirs = [root]
    names = ["a", "b", "day=1", "x y", "é", "_tmp", ".hidden", "k=v%2F", "z" * 40, "0"]
    for _ in range(rnd.randint(1, 25)):
        parent = rnd.choice(dirs)
        name = rnd.choice(names) + str(rnd.randrange(3))
        d = os.path.join(parent, name)
        if os.path.lexists(d):
            continue
        kind = rnd.random()
        if kind < 0.85:
            os.mkdir(d)
            dirs.append(d)
        elif kind < 0.93:
            os.symlink(rnd.choice(dirs), d)  # a symlinked directory: listed by os.walk, never entered
        else:
            with open(d, "wb") as f:
                f.write(b"x")
    for d in dirs:
        pm = os.path.join(d, "_pm")
        kind = rnd.random()
        if kind < 0.55:
            with open(pm, "wb") as f:
                f.write(pm_bytes)
        elif kind < 0.6:
            os.mkdir(pm)  # a directory named _pm: not a partition
        elif kind < 0.65:
            os.symlink(rnd.choice(dirs), pm)  # a symlink to a directory: not a partition
        elif kind < 0.7:
            os.symlink(os.path.join(root, "nowhere"), pm)  # broken: os.walk lists it as a file
        elif kind < 0.75 and d != root:
            target = os.path.join(root, "target_pm")
            if not os.path.exists(target):
                with open(target, "wb") as f:
                    f.write(pm_bytes)
            os.symlink(target, pm)  # a symlink to a file: a partition
    if rnd.random() < 0.2:
        bad = os.path.join(root.encode(), b"bad\xff")  # an undecodable name: surrogate-escaped
        os.makedirs(bad)
        with open(os.path.join(bad, b"_pm"), "wb") as f:
            f.write(pm_bytes)


@pytest.fixture(scope="module")
def pm_bytes(tmp_path_factory):
    path = os.path.join(str(tmp_path_factory.mktemp("pm")), "_pm")
    qdbpm.write_new(path, table_state(3, 0))
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("seed", range(N_TREES))
def test_walk_equals_os_walk(tmp_path, pm_bytes, seed):
    rnd = random.Random(seed)
    root = str(tmp_path / "t")
    os.mkdir(root)
    random_tree(root, rnd, pm_bytes)
    for identities in (False, True):
        want = listing.walk_reference(root, identities)
        for leaf in (True, False):
            names, idents, *_ = _walk.walk(os.fsencode(root), PM, "._", identities=identities, leaf=leaf)
            assert sorted(names) == sorted(want), (seed, leaf)
            assert len(set(names)) == len(names)
            if identities:
                assert dict(zip(names, idents)) == want, (seed, leaf)
    for leaf in (True, False):
        names, _, arena, at, size, status, _ = _walk.walk(os.fsencode(root), PM, "._", read=True, leaf=leaf,
                                                       max_file=1 << 20, budget=1 << 24)
        if leaf:  # the reads shared with the worker from the first subdirectory on: the same answer
            assert _read_shared(root, max_file=1 << 20, budget=1 << 24) == \
                _read_walk(root, 10 ** 9, max_file=1 << 20, budget=1 << 24), seed
        want = listing.walk_reference(root, False)
        # a broken `_pm` symlink is listed by os.walk (a file) but cannot be read: the one-file
        # open of the table raises for it, so the walk keeps it, not read
        assert sorted(names) == sorted(want), (seed, leaf)
        buf = np.frombuffer(arena, np.uint8)
        for n, a, s, st in zip(names, at.tolist(), size.tolist(), status.tolist()):
            path = os.path.join(root, n, "_pm")
            if st == _batch.OK:
                assert buf[a:a + s].tobytes() == pm_bytes
            else:
                assert st == _batch.SOLO and not os.path.exists(path), (seed, n, st)


def _read_walk(root, ahead, **kw):
    """A read walk's answer, each file's committed bytes in place of its arena offset."""
    names, _, arena, at, size, status, _ = _walk.walk(os.fsencode(root), PM, "._", read=True, ahead=ahead, **kw)
    buf = np.frombuffer(arena, np.uint8)
    return [(n, st, buf[a:a + s].tobytes() if st == _batch.OK else None)
            for n, a, s, st in zip(names, at.tolist(), size.tolist(), status.tolist())]


def _read_shared(root, **kw):
    """_read_walk with every directory's subdirectories shared with the worker, three ways: this
    thread claiming from the front as it does; claiming none (each stat and open then comes from
    the prefetch job, run by the worker or, not started, by this thread: either way the
    prefetched path); and claiming none with the worker holding 3 files open at most (it stops
    there: the rest is this thread's). All must agree."""
    got = _read_walk(root, 1, **kw)
    _walk.MAIN_CLAIMS = False
    try:
        assert _read_walk(root, 1, **kw) == got
        _walk.HOLD = 3
        assert _read_walk(root, 1, **kw) == got
    finally:
        _walk.MAIN_CLAIMS, _walk.HOLD = True, 256
    return got


def test_reads_shared_with_the_worker_equal_the_walk_alone(tmp_path):
    # One flat directory of partitions, as a table's: small and large `_pm` (one past max_file),
    # a leaf without `_pm`, a `_pm` that is a directory, a symlink to one and a broken symlink, a
    # FIFO (never blocks), a nested partition; a budget that runs out midway.
    root = str(tmp_path / "t")
    os.mkdir(root)
    small, large = (_pm_bytes(tmp_path, n) for n in (3, 250))
    max_file = 20_000
    assert len(small) < max_file < len(large)
    for i in range(40):
        d = os.path.join(root, f"p{i:02d}")
        os.mkdir(d)
        pm = os.path.join(d, "_pm")
        kind = i % 8
        if kind in (0, 1, 2, 3):
            with open(pm, "wb") as f:
                f.write(large if kind == 3 else small)
        elif kind == 4:
            pass  # no _pm: not a partition
        elif kind == 5:
            os.symlink(os.path.join(root, "nowhere"), pm) if i % 16 == 5 else os.mkfifo(pm)
        elif kind == 6:
            os.symlink(root, pm) if i % 16 == 6 else os.mkdir(pm)
        else:
            os.mkdir(os.path.join(d, "inner"))
            with open(os.path.join(d, "inner", "_pm"), "wb") as f:
                f.write(small)
    for budget in (1 << 26, 12 * len(small)):  # the second runs out after ~12 small files
        kw = dict(max_file=max_file, budget=budget)
        alone = _read_walk(root, 10 ** 9, **kw)
        assert _read_shared(root, **kw) == alone, budget
        assert sorted(n for n, _, _ in alone) == sorted(listing.walk_reference(root, False))
    assert {st for _, st, _ in alone} >= {_batch.OK, _batch.SOLO, _batch.LARGE}


def _pm_bytes(tmp_path, row_groups):
    path = os.path.join(str(tmp_path), f"pm{row_groups}")
    qdbpm.write_new(path, table_state(row_groups, 0))
    with open(path, "rb") as f:
        return f.read()


def test_list_partitions_uses_the_kernel_and_matches(tmp_path, pm_bytes):
    root = str(tmp_path)
    random_tree(root, random.Random(99), pm_bytes)
    got, names = listing.list_partitions(root), listing.find_partitions(root)
    listing.KERNEL = False
    try:
        assert listing.list_partitions(root) == got
        assert listing.find_partitions(root) == names
    finally:
        listing.KERNEL = True


def test_deep_and_long_trees_are_refused_with_a_clear_error(tmp_path, pm_bytes):
    d = str(tmp_path / "deep")
    os.makedirs(os.path.join(d, *["d"] * 300))
    with pytest.raises(PmError, match="deeper than 256"):
        _walk.walk(os.fsencode(d), PM, "._", leaf=False)
    with pytest.raises(PmError, match="deeper than 256"):
        open_table(d)


def test_missing_root_is_a_clear_error(tmp_path):
    with pytest.raises(PmError, match="not a directory"):
        open_table(str(tmp_path / "nope"))


# --- a table as one batch vs one file at a time -------------------------------------------------


def _tables(root):
    table_mod.BATCH = False
    try:
        ref = open_table(root)
    finally:
        table_mod.BATCH = True
    return open_table(root), ref


def test_a_corrupt_partition_raises_what_a_one_file_open_raises(tmp_path, pm_bytes):
    root = str(tmp_path)
    for k in range(5):
        os.makedirs(os.path.join(root, f"p{k}"))
        with open(os.path.join(root, f"p{k}", "_pm"), "wb") as f:
            f.write(pm_bytes)
    bad = bytearray(pm_bytes)
    bad[60] ^= 0x10
    with open(os.path.join(root, "p3", "_pm"), "wb") as f:
        f.write(bad)
    errors = []
    for t in _tables(root):
        with t, pytest.raises(qdbpm.ChecksumError) as e:
            t.prune("true")
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "p3" in errors[0]
    with open(os.path.join(root, "p3", "_pm"), "wb") as f:
        f.write(pm_bytes[:30])  # shorter than the header
    errors = []
    for t in _tables(root):
        with t, pytest.raises(qdbpm.CorruptFileError) as e:
            t.prune("true")
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "shorter than" in errors[0]
