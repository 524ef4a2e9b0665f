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
import threading

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


def _flat(root, names, pm_bytes):
    """Partitions `names` directly under root, each with `pm_bytes` as its `_pm`."""
    for name in names:
        os.makedirs(os.path.join(root, name))
        with open(os.path.join(root, name, "_pm"), "wb") as f:
            f.write(pm_bytes)


def test_a_corrupt_partition_raises_what_a_one_file_open_raises(tmp_path, pm_bytes):
    root = str(tmp_path)
    _flat(root, [f"p{k}" for k in range(5)], pm_bytes)
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


# --- the probe: a directory's first system calls made by two threads at once -----------------


class _Thread:
    """A helper as the walk takes one (pool.Task's settle): fn on a thread of its own."""

    def __init__(self, fn):
        self.thread = threading.Thread(target=fn)
        self.thread.start()

    def settle(self):
        self.thread.join()


class _Never:
    """A helper that never starts: the walking thread probes every entry."""

    def __init__(self, fn):
        pass

    def settle(self):
        pass


def _first(fn):
    """A helper that probes every entry before the walking thread starts."""
    fn()
    return _Never(fn)


def _refused(fn):
    """A helper with no thread to give (threading's RuntimeError): the walking thread probes alone."""
    raise RuntimeError("can't start new thread")


HELPERS = [_Thread, _Never, _first, _refused]


def _read_walk(root, helper, **kw):
    """(names, each one's (status, bytes read or None)) of a reading walk, every probe on."""
    kw = {"max_file": 1 << 20, "budget": 1 << 24, **kw}
    names, _, arena, at, size, status, checker = _walk.walk(os.fsencode(root), PM, "._", read=True, helper=helper,
                                                            probe_min=1, crc=listing.crc32_of, **kw)
    buf = np.frombuffer(arena, np.uint8)
    got = [(st, buf[a:a + s].tobytes() if st == _batch.OK else None)
           for a, s, st in zip(at.tolist(), size.tolist(), status.tolist())]
    return names, got, checker.finish()


def _same(a, b):
    assert a[0] == b[0] and a[1] == b[1]
    for x, y in zip(a[2], b[2]):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("seed", range(0, N_TREES, 3))
def test_a_probed_walk_answers_as_the_walk_alone(tmp_path, pm_bytes, seed):
    root = str(tmp_path / "t")
    os.mkdir(root)
    random_tree(root, random.Random(seed), pm_bytes)
    want = _read_walk(root, None)
    assert sorted(want[0]) == sorted(listing.walk_reference(root, False))
    for helper in HELPERS:
        _same(_read_walk(root, helper), want)


def test_a_probe_leaves_large_files_budgets_and_odd_entries_to_the_walk(tmp_path, pm_bytes):
    # 64 KiB or more (the probe's one read is short of them), a budget that runs out midway,
    # an empty `_pm`, a `_pm` directory, a leaf without a `_pm`, a non-leaf partition, a FIFO
    root = str(tmp_path)
    big = pm_bytes + b"\0" * (1 << 16)  # committed bytes as pm_bytes says, then unpublished bytes
    for k in range(24):
        d = os.path.join(root, f"p{k:02d}")
        os.mkdir(d)
        pm = os.path.join(d, "_pm")
        if k == 3:
            os.mkdir(pm)
        elif k == 4:
            continue
        elif k == 5:
            open(pm, "wb").close()
        elif k == 6:
            os.mkfifo(pm)
        else:
            with open(pm, "wb") as f:
                f.write(big if k % 4 == 0 else pm_bytes)
        if k == 7:
            os.mkdir(os.path.join(d, "inner"))
            with open(os.path.join(d, "inner", "_pm"), "wb") as f:
                f.write(pm_bytes)
    n = len(pm_bytes)
    for kw in ({}, {"budget": 8 * n}, {"budget": 8 * n + 100}, {"budget": (1 << 16) + 5 * n}, {"max_file": n},
               {"max_file": 100}):
        want = _read_walk(root, None, **kw)
        assert len(want[0]) == 23  # p03's `_pm` is a directory and p04 has none; p07/inner is one more
        for helper in HELPERS:
            _same(_read_walk(root, helper, **kw), want)


def test_read_partitions_probes_on_the_decode_pool_and_agrees(tmp_path, pm_bytes):
    root = str(tmp_path)
    _flat(root, [f"day={k}" for k in range(40)], pm_bytes)
    paths = lambda ps: [os.path.join(root, p, "_pm") for p in ps]  # noqa: E731
    got = []
    for probe in (True, False):
        listing.PROBE = probe
        try:
            parts, batch = listing.read_partitions(root, paths)
        finally:
            listing.PROBE = True
        got.append((parts, [batch.data(i).tobytes() for i in range(len(parts))]))
    assert got[0] == got[1] and len(got[0][0]) == 40
