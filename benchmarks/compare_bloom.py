"""Standalone comparison, one run, one core: qdbpm's batch SBBF probes vs per-value Python tools.

    python benchmarks/compare_bloom.py [--quick]

Measures (medians of repeated runs):
  * qdbpm batch probe: value x filter probes per second (probe_many over R filters, hashes ready),
    and end to end from Python strings (hashing included);
  * qdbpm batch XXH64 vs the `xxhash` package called once per value;
  * pybloom-live (if installed: `pip install pybloom-live`): `value in filter` per value.
  * CRC-32 GB/s of zlib vs ISA-L (`isal`, what qdbpm.crc uses when installed), 64 KiB .. 64 MiB.
Goals: >= 50 M value x filter probes/s in batch, >= 100x pybloom-live.
"""

import argparse
import os
import sys

import numpy as np

from qdbpm import bloom

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from datasets import median_seconds  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller inputs, fewer repeats")
    args = ap.parse_args(argv)
    repeat = 3 if args.quick else 7
    n_values = 20_000 if args.quick else 100_000
    row_groups = 64
    per_filter = 10_000

    rng = np.random.default_rng(7)
    strings = [f"user-{i:09d}" for i in rng.integers(0, 10**9, n_values).tolist()]
    inserted = strings[: per_filter]

    # R filters of one column, 16 KiB each (10,000 values, ~0.2 % FPP), back to back in one buffer.
    num_bytes = bloom.optimal_num_bytes(per_filter, 0.01)
    data = np.zeros(row_groups * num_bytes, np.uint8)
    for r in range(row_groups):
        chunk = data[r * num_bytes:(r + 1) * num_bytes]
        bloom.insert_hashes(chunk, bloom.hash_values(inserted if r == 0 else [f"{s}/{r}" for s in inserted]))
    offsets = np.arange(row_groups, dtype=np.int64) * num_bytes
    lengths = np.full(row_groups, num_bytes, np.int64)
    hashes = bloom.hash_values(strings)
    probes = n_values * row_groups

    rows = []
    t_probe = median_seconds(lambda: bloom.probe_many(hashes, data, offsets, lengths), repeat)
    ours_probe_rate = probes / t_probe
    rows.append(("qdbpm probe_many (hashes x %d filters)" % row_groups, t_probe, ours_probe_rate, "probes/s"))

    t_e2e = median_seconds(lambda: bloom.probe_many(bloom.hash_values(strings), data, offsets, lengths), repeat)
    rows.append(("qdbpm hash_values + probe_many (str)", t_e2e, probes / t_e2e, "probes/s"))

    single = bloom.SplitBlockBloomFilter.from_bytes(data[:num_bytes])
    t_contains = median_seconds(lambda: single.contains(strings), repeat)
    ours_contains_rate = n_values / t_contains
    rows.append(("qdbpm SplitBlockBloomFilter.contains (str)", t_contains, ours_contains_rate, "values/s"))

    t_hash = median_seconds(lambda: bloom.hash_values(strings), repeat)
    ours_hash_rate = n_values / t_hash
    rows.append(("qdbpm hash_values (str, batch)", t_hash, ours_hash_rate, "hashes/s"))

    encoded = [s.encode() for s in strings]
    ints = rng.integers(0, 2**62, n_values, dtype=np.int64)
    t_hash_i = median_seconds(lambda: bloom.hash_values(ints), repeat)
    rows.append(("qdbpm hash_values (int64, batch)", t_hash_i, n_values / t_hash_i, "hashes/s"))

    xx_rate = None
    try:
        import xxhash
    except ImportError:
        print("xxhash package not installed: skipped", file=sys.stderr)
    else:
        f = xxhash.xxh64_intdigest
        t_xx = median_seconds(lambda: [f(b) for b in encoded], repeat)
        xx_rate = n_values / t_xx
        rows.append(("xxhash.xxh64_intdigest per value (bytes)", t_xx, xx_rate, "hashes/s"))

    pyb_rate = None
    try:
        from pybloom_live import BloomFilter
    except ImportError:
        print("pybloom-live not installed (pip install pybloom-live): skipped", file=sys.stderr)
    else:
        pyb = BloomFilter(capacity=per_filter, error_rate=0.01)
        for s in inserted:
            pyb.add(s)
        t_pyb = median_seconds(lambda: [s in pyb for s in strings], repeat)
        pyb_rate = n_values / t_pyb
        rows.append(("pybloom-live `in` per value (str)", t_pyb, pyb_rate, "probes/s"))

    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'median s':>10}  rate")
    for name, secs, rate, unit in rows:
        print(f"{name:<{width}}  {secs:>10.5f}  {rate / 1e6:9.2f} M {unit}")
    print()
    goal = "met" if ours_probe_rate >= 50e6 else "NOT met"
    print(f"batch probe rate: {ours_probe_rate / 1e6:.1f} M value x filter probes/s on one core (goal >= 50 M: {goal})")
    if xx_rate:
        print(f"batch XXH64 vs xxhash per value: {ours_hash_rate / xx_rate:.1f}x")
    if pyb_rate:
        ratio = ours_probe_rate / pyb_rate
        print(f"batch probe vs pybloom-live: {ratio:.0f}x (goal >= 100x: {'met' if ratio >= 100 else 'NOT met'})")
        print(f"contains(str) incl. hashing vs pybloom-live: {ours_contains_rate / pyb_rate:.0f}x")
    print()
    crc_table(repeat)
    return 0


def crc_table(repeat):
    import zlib

    try:
        from isal import isal_zlib
    except ImportError:
        isal_zlib = None
        print("isal not installed (pip install isal): CRC comparison shows zlib only", file=sys.stderr)
    rng = np.random.default_rng(3)
    print(f"{'CRC-32 buffer':>14}  {'zlib GB/s':>10}  {'isal GB/s':>10}  ratio")
    for size in (64 << 10, 1 << 20, 8 << 20, 64 << 20):
        buf = memoryview(rng.integers(0, 256, size, dtype=np.uint8))
        reps = max(1, (256 << 20) // size)  # ~256 MiB per timed sample

        def rate(fn):
            return size * reps / median_seconds(lambda: [fn(buf) for _ in range(reps)], repeat) / 1e9

        z = rate(zlib.crc32)
        line = f"{size >> 10:>10} KiB  {z:>10.2f}"
        if isal_zlib is not None:
            assert isal_zlib.crc32(buf) == zlib.crc32(buf)
            i = rate(isal_zlib.crc32)
            line += f"  {i:>10.2f}  {i / z:.1f}x"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
