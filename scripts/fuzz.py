"""Long mutation-fuzzing run over the golden `_pm` files, on every core.

    python scripts/fuzz.py [--mutations 1000000] [--jobs N] [--seed 1] [--verify both|on|off]

Half the mutants are opened with the CRC check and half without (`--verify both`): without it,
every structural check alone must stand between the bytes and the kernels. Each valid mutant is
then used through every accessor and pruned on every column (== and IN probe its blooms). Every
outcome must be "ok" or a PmError subclass; anything else (an exception of another type, a crash
of a worker) fails the run with exit 1. Same --seed and counts, same mutants.
"""

import argparse
import glob
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))  # support.fuzz


def _read(p):
    with open(p, "rb") as f:
        return f.read()


def work(args):
    seed, n, verify = args
    from support.fuzz import run

    seeds = [_read(p) for p in sorted(glob.glob(os.path.join(HERE, "..", "tests", "golden", "*.pm")))]
    tally = {}
    counts = run(seeds, n, seed=seed, verify=verify, tally=tally)
    return verify, counts, tally


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mutations", type=int, default=1_000_000)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--verify", choices=("both", "on", "off"), default="both")
    a = ap.parse_args()
    modes = {"both": (True, False), "on": (True,), "off": (False,)}[a.verify]
    ntasks = a.jobs * 20
    per = a.mutations // ntasks or 1
    tasks = [(a.seed * 100_000 + k, per, modes[k % len(modes)]) for k in range(ntasks)]
    t0 = time.time()
    total = {m: {} for m in modes}
    tallies = {}
    with ProcessPoolExecutor(a.jobs) as pool:
        for verify, counts, tally in pool.map(work, tasks):
            for key, v in counts.items():
                total[verify][key] = total[verify].get(key, 0) + v
            for key, v in tally.items():
                tallies[key] = tallies.get(key, 0) + v
            done = sum(sum(t.values()) for t in total.values())
            shown = "; ".join(f"verify={m}: {dict(sorted(total[m].items()))}" for m in modes)
            print(f"{done:,} mutations in {time.time() - t0:.0f} s: {shown}", flush=True)
    print(f"accessor use on valid mutants: {dict(sorted(tallies.items()))}")
    print(f"done: {done:,} mutations, 0 failures (any non-PmError would have raised)")


if __name__ == "__main__":
    main()
