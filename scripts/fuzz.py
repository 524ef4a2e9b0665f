"""Long mutation-fuzzing run over the golden `_pm` files, on every core.

    python scripts/fuzz.py [--mutations 1000000] [--jobs N]

Every outcome must be "ok" or a PmError subclass; anything else (an exception of another type,
a crash of a worker, a hang past the per-worker timeout) fails the run with exit 1.
"""

import argparse
import glob
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))


def _read(p):
    with open(p, "rb") as f:
        return f.read()


def work(args):
    seed, n = args
    from qdbpm.fuzz import run

    seeds = [_read(p) for p in sorted(glob.glob(os.path.join(HERE, "..", "tests", "golden", "*.pm")))]
    return run(seeds, n, seed=seed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mutations", type=int, default=1_000_000)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    per = a.mutations // (a.jobs * 20) or 1
    tasks = [(a.seed * 100_000 + k, per) for k in range(a.jobs * 20)]
    t0 = time.time()
    total = {}
    with ProcessPoolExecutor(a.jobs) as pool:
        for k, counts in enumerate(pool.map(work, tasks)):
            for key, v in counts.items():
                total[key] = total.get(key, 0) + v
            done = sum(total.values())
            print(f"{done:,} mutations in {time.time() - t0:.0f} s: {dict(sorted(total.items()))}", flush=True)
    print(f"done: {sum(total.values()):,} mutations, 0 failures (any non-PmError would have raised)")


if __name__ == "__main__":
    main()
