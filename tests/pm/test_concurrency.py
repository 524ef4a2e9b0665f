"""One writer publishing >= 1,000 updates while 4 reader processes open pinned and latest
snapshots in a loop: every open verifies and shows exactly its snapshot's row groups."""

import multiprocessing as mp
import os
import random
import time

import numpy as np

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.pm.description import Column, Description

UPDATES = int(os.environ.get("QDBPM_CONCURRENCY_UPDATES", "1000"))
COLS = [Column("ts", type=L.QDB_TIMESTAMP, physical_type=L.PT_INT64), Column("v", type=L.QDB_LONG, physical_type=L.PT_INT64)]


def state(v):
    """Snapshot v: v + 1 row groups; row group r has r + 1 rows; Parquet footer offset 1000 + v."""
    n = v + 1
    ch = np.zeros((n, 2), L.CHUNK_DTYPE)
    ch["byte_range_start"][:, 0] = 4 + np.arange(n) * 100
    ch["byte_range_start"][:, 1] = 54 + np.arange(n) * 100
    ch["total_compressed"] = 50
    ch["num_values"] = (np.arange(n) + 1)[:, None]
    return Description(columns=COLS, num_rows=(np.arange(n) + 1).astype(np.uint64), chunks=ch,
                       parquet_footer_offset=1000 + v, parquet_footer_length=10)


def writer(path, done):
    for v in range(1, UPDATES + 1):
        qdbpm.write_update(path, state(v))
    done.set()


def reader(path, done, out, seed):
    rnd = random.Random(seed)
    opens = errors = 0
    seen = []
    while not done.is_set() or opens < 50:
        try:
            pin = rnd.choice(seen) if seen and rnd.random() < 0.5 else None
            with qdbpm.open(path, parquet_size=pin) as pm:
                v = pm.parquet_footer_offset - 1000
                ok = (pm.row_group_count == v + 1 and pm.num_rows.tolist() == list(range(1, v + 2))
                      and (pin is None or pm.parquet_size == pin))
                if not ok:
                    errors += 1
                if pin is None and len(seen) < 200:
                    seen.append(pm.parquet_size)
            opens += 1
        except Exception as e:  # noqa: BLE001 - every failure counts
            errors += 1
            out.put(f"{type(e).__name__}: {e}")
    out.put((opens, errors))


def test_writer_and_four_readers(tmp_path):
    path = str(tmp_path / "_pm")
    qdbpm.write_new(path, state(0))
    ctx = mp.get_context("spawn")
    done = ctx.Event()
    out = ctx.Queue()
    readers = [ctx.Process(target=reader, args=(path, done, out, k)) for k in range(4)]
    for r in readers:
        r.start()
    t0 = time.time()
    w = ctx.Process(target=writer, args=(path, done))
    w.start()
    w.join(600)
    assert w.exitcode == 0
    results = [out.get(timeout=120) for _ in readers]
    for r in readers:
        r.join(60)
    problems = [r for r in results if isinstance(r, str)]
    assert not problems, problems[:5]
    opens = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    print(f"\nconcurrency: {UPDATES} updates, 4 readers, {opens} opens in {time.time() - t0:.1f} s, {errors} errors")
    assert errors == 0 and opens >= 200
    with qdbpm.open(path) as pm:
        assert pm.row_group_count == UPDATES + 1 and len(pm.snapshots()) == UPDATES + 1


def appender(parquet, done, n):
    import pyarrow as pa

    for v in range(1, n + 1):
        qdbpm.append(parquet, pa.table({"v": pa.array([v] * v, pa.int64())}))
    done.set()


def append_reader(pm_path, done, out, seed):
    rnd = random.Random(seed)
    opens = errors = 0
    seen = []
    while not done.is_set() or opens < 50:
        try:
            pin = rnd.choice(seen) if seen and rnd.random() < 0.5 else None
            with qdbpm.open(pm_path, parquet_size=pin) as pm:
                k = pm.row_group_count  # row group i (after the first) holds i rows of value i
                ok = pm.num_rows.tolist() == [1] + list(range(1, k)) and (pin is None or pm.parquet_size == pin)
                errors += not ok
                if pin is None and len(seen) < 200:
                    seen.append(pm.parquet_size)
            opens += 1
        except Exception as e:  # noqa: BLE001
            errors += 1
            out.put(f"{type(e).__name__}: {e}")
    out.put((opens, errors))


def test_appender_and_four_readers(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = int(os.environ.get("QDBPM_CONCURRENCY_APPENDS", "1000"))
    parquet = str(tmp_path / "data.parquet")
    pq.write_table(pa.table({"v": pa.array([0], pa.int64())}), parquet)
    qdbpm.generate(parquet)
    ctx = mp.get_context("spawn")
    done, out = ctx.Event(), ctx.Queue()
    readers = [ctx.Process(target=append_reader, args=(str(tmp_path / "_pm"), done, out, k)) for k in range(4)]
    for r in readers:
        r.start()
    t0 = time.time()
    w = ctx.Process(target=appender, args=(parquet, done, n))
    w.start()
    w.join(900)
    assert w.exitcode == 0
    results = [out.get(timeout=120) for _ in readers]
    for r in readers:
        r.join(60)
    problems = [r for r in results if isinstance(r, str)]
    assert not problems, problems[:5]
    opens, errors = sum(r[0] for r in results), sum(r[1] for r in results)
    print(f"\nconcurrency: {n} appends, 4 readers, {opens} opens in {time.time() - t0:.1f} s, {errors} errors")
    assert errors == 0 and opens >= 200
    assert pq.read_table(parquet).num_rows == 1 + n * (n + 1) // 2
