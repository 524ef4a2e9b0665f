"""Paired A/B of one TPC-H query, one shot: this tree's `read_table` against another revision's.

    python benchmarks/ab_tpch.py --base HEAD~1 [--query Q6] [--pairs 150]
    python benchmarks/ab_tpch.py --base-dir /path/to/other/checkout ...
    python benchmarks/ab_tpch.py --base-dir . --new-env QDBPM_X=1 ...   (an environment toggle)
    python benchmarks/ab_tpch.py --toggle qdbpm.parquet._snappy.NOGIL_BYTES=0,65536 ...   (in-process)

Why: a change worth a few percent of a 25 ms one-shot read cannot be seen by running the two
versions one after the other on a shared 2-vCPU VM, whose speed drifts by more than that within
minutes (docs/performance.md). Here two worker processes, one per version, each with its own
import of qdbpm, are asked in turn for the same query, the order swapped every pair; each pair's
ratio base / new cancels the drift both saw. The report is the median of those ratios and its
interquartile range: > 1 favours the new version, and an IQR that does not hold 1 is a difference
the drift did not make. Report only: no goal (compare_tpch.py judges the goals against DuckDB).

--toggle MODULE.NAME=A,B runs one process of this tree and sets a module-level switch to A, then
B, for the two runs of each pair (A is "base"): a change behind a switch compared with no second
process, its CPU cost included (the calling thread's CPU medians are printed too).

--base REV builds REV's extensions in a temporary `git worktree` (removed at the end); --base-dir
uses a checkout as it is (built). The data is compare_tpch.py's lineitem (built once); --root
points at another table (then --where / --columns say the query).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def summary(base, new) -> dict:
    """Medians of each side's seconds and the paired ratios base / new: median and quartiles."""
    import numpy as np

    b, n = np.asarray(base, float), np.asarray(new, float)
    if len(b) != len(n) or not len(b):
        raise ValueError("paired samples of equal, nonzero length")
    r = b / n
    q1, med, q3 = np.percentile(r, [25, 50, 75])
    return {"pairs": len(r), "base_median_s": float(np.median(b)), "new_median_s": float(np.median(n)),
            "ratio_median": float(med), "ratio_q1": float(q1), "ratio_q3": float(q3)}


MIN_PAIRS = 20  # fewer pairs' quartiles say little: no verdict


def verdict(s) -> str:
    if s["pairs"] < MIN_PAIRS:
        return f"too few pairs ({s['pairs']}) to judge: base/new {s['ratio_median']:.3f}"
    if s["ratio_q1"] > 1:
        return f"new faster: base/new {s['ratio_median']:.3f} (IQR {s['ratio_q1']:.3f}-{s['ratio_q3']:.3f})"
    if s["ratio_q3"] < 1:
        return f"new slower: base/new {s['ratio_median']:.3f} (IQR {s['ratio_q1']:.3f}-{s['ratio_q3']:.3f})"
    return f"no difference the drift did not make: base/new {s['ratio_median']:.3f} " \
           f"(IQR {s['ratio_q1']:.3f}-{s['ratio_q3']:.3f})"


# --- the worker: one version, one query, timed on request ----------------------------------------


def worker(tree, spec):
    """Import qdbpm from `tree`, warm up, then per line "go" on stdin run the query once and print
    its wall seconds. Only qdbpm comes from `tree`: the query is spec's (JSON)."""
    sys.path.insert(0, tree)
    import qdbpm

    if not os.path.abspath(qdbpm.__file__).startswith(os.path.abspath(tree) + os.sep):
        raise SystemExit(f"ab worker: qdbpm from {qdbpm.__file__}, not from {tree}")

    # the query's own code from this tree (qdbpm's submodules still load from `tree`: the package's path)
    sys.path.remove(tree)
    sys.path.insert(0, REPO)
    from benchmarks.harness import Contender

    q = json.loads(spec)
    run = _runner(q)
    answer = run()
    for _ in range(q["warmup"]):
        run()
    print(json.dumps({"ready": True, "answer": str(answer)}), flush=True)
    c = Contender("ab", run)  # the compare scripts' sample: garbage collected and heap trimmed first
    for line in sys.stdin:
        if line.strip() != "go":
            break
        c.sample()
        print(f"{c.samples[-1]:.9f}", flush=True)


def _runner(q):
    """The query of spec `q` as a call: read_table with qdbpm as imported, then Q6's sum or the
    row count (what both versions must agree on)."""
    from benchmarks.compare_tpch import q6_sum
    from qdbpm.table.read import read_table

    def run():
        t = read_table(q["root"], q["columns"], q["where"])
        return q6_sum(t) if q["q6"] else t.num_rows

    return run


def toggle_pairs(spec, target, pairs) -> dict:
    """In this process: `target` ("module.NAME=A,B", A and B Python literals) set to A for the base
    run of each pair and to B for the new one (order swapped every pair), restored after.
    summary() of the wall times, with the calling thread's CPU medians."""
    import ast
    import importlib
    import time

    import numpy as np

    if REPO not in sys.path:
        sys.path.insert(0, REPO)

    name, sep, values = target.partition("=")
    mod, _, attr = name.rpartition(".")
    try:
        a, b = (ast.literal_eval(v) for v in values.split(","))
        m = importlib.import_module(mod)
    except (ValueError, SyntaxError, ImportError) as e:
        raise SystemExit(f"ab: --toggle takes MODULE.NAME=A,B (two Python literals), not {target!r}: {e}")
    if not sep or not hasattr(m, attr):
        raise SystemExit(f"ab: --toggle: {mod!r} has no {attr!r}")
    q, old = json.loads(spec), getattr(m, attr)
    run = _runner(q)

    got, cpu = {"base": [], "new": []}, {"base": [], "new": []}
    try:
        answers = set()
        for v in (a, b):
            setattr(m, attr, v)
            answers.add(str(run()))
            for _ in range(q["warmup"]):
                run()
        if len(answers) != 1:
            raise SystemExit(f"ab: {name} = {a!r} and = {b!r} answer differently: {sorted(answers)}")
        for i in range(pairs):
            for k in (("base", "new") if i % 2 else ("new", "base")):
                setattr(m, attr, a if k == "base" else b)
                t0, c0 = time.perf_counter(), time.thread_time()
                run()
                got[k].append(time.perf_counter() - t0)
                cpu[k].append(time.thread_time() - c0)
    finally:
        setattr(m, attr, old)
    s = summary(got["base"], got["new"])
    s.update(base_thread_cpu_s=float(np.median(cpu["base"])), new_thread_cpu_s=float(np.median(cpu["new"])))
    return s


# --- the driver ----------------------------------------------------------------------------------


def _spawn(tree, spec, env):
    e = dict(os.environ)
    e.update(env)
    e.pop("PYTHONPATH", None)  # each worker's qdbpm from its own tree only
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", tree, spec],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=e, cwd=tempfile.gettempdir())
    head = p.stdout.readline()
    if not head:
        _close(p)
        raise SystemExit(f"ab: the worker for {tree} ended before it was ready (exit {p.returncode})")
    return p, json.loads(head)["answer"]


def _ask(p) -> float:
    p.stdin.write("go\n")
    p.stdin.flush()
    line = p.stdout.readline()
    if not line:
        raise SystemExit("ab: a worker ended mid-run")
    return float(line)


def run_pairs(base_tree, new_tree, spec, pairs, base_env=None, new_env=None) -> dict:
    """The paired run: both workers started, their answers checked equal, then `pairs` pairs."""
    procs = {}
    try:
        procs["base"], a = _spawn(base_tree, spec, base_env or {})
        procs["new"], b = _spawn(new_tree, spec, new_env or {})
        if a != b:
            raise SystemExit(f"ab: the two versions answer differently: base {a}, new {b}")
        got = {"base": [], "new": []}
        for i in range(pairs):
            for k in (("base", "new") if i % 2 else ("new", "base")):
                got[k].append(_ask(procs[k]))
        return summary(got["base"], got["new"])
    finally:
        for p in procs.values():
            _close(p)


def _close(p):
    """End a worker (its stdin closed ends its loop) and close its pipes."""
    p.stdin.close()
    p.wait()
    p.stdout.close()


def _worktree(rev):
    """A temporary worktree of `rev` with its extensions built in place (removed by the caller)."""
    d = tempfile.mkdtemp(prefix="qdbpm-ab-")
    subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", "-q", d, rev], check=True)
    got = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=d, capture_output=True,
                         text=True)
    if got.returncode:
        subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", d], check=False)
        raise SystemExit(f"ab: building {rev} failed:\n{got.stderr[-4000:]}")
    return d


def _envs(items):
    out = {}
    for kv in items or []:
        k, sep, v = kv.partition("=")
        if not sep:
            raise SystemExit(f"ab: --*-env takes KEY=VALUE, not {kv!r}")
        out[k] = v
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--base", help="a git revision, built in a temporary worktree")
    where.add_argument("--base-dir", help="a built checkout to compare against (this tree itself: .)")
    where.add_argument("--toggle", help="MODULE.NAME=A,B: one process, a module-level switch set to A, then B")
    ap.add_argument("--query", default="Q6", help="compare_tpch.py's query name (default Q6)")
    ap.add_argument("--root", help="another table; then --where and --columns give the query")
    ap.add_argument("--where")
    ap.add_argument("--columns", help="comma-separated (default: all)")
    ap.add_argument("--pairs", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--base-env", action="append", help="KEY=VALUE for the base worker (repeatable)")
    ap.add_argument("--new-env", action="append", help="KEY=VALUE for the new worker (repeatable)")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(*args.worker)
    if args.pairs < 1:
        raise SystemExit("ab: --pairs must be at least 1")
    if args.root is None and (args.where is not None or args.columns is not None):
        raise SystemExit("ab: --where and --columns ask a --root table; a TPC-H query is named by --query")
    if args.root is not None:
        cols = None if not args.columns else args.columns.split(",")
        spec = {"root": os.path.abspath(args.root), "columns": cols, "where": args.where, "q6": False}
    else:
        sys.path.insert(0, REPO)
        from benchmarks.compare_tpch import QUERIES, lineitem, read_args

        if args.query not in QUERIES:
            raise SystemExit(f"ab: no query {args.query!r} (one of {', '.join(QUERIES)})")
        cols, where = read_args(args.query)
        spec = {"root": lineitem(), "columns": cols, "where": where, "q6": args.query == "Q6"}
    spec["warmup"] = args.warmup
    made = None
    try:
        if args.toggle is not None:
            s = toggle_pairs(json.dumps(spec), args.toggle, args.pairs)
        else:
            base = (made := _worktree(args.base)) if args.base is not None else os.path.abspath(args.base_dir or REPO)
            s = run_pairs(base, REPO, json.dumps(spec), args.pairs, _envs(args.base_env), _envs(args.new_env))
    finally:
        if made is not None:
            subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", made], check=False)
    if args.json:
        print(json.dumps(s))
    else:
        print(f"base median {s['base_median_s'] * 1e3:.2f} ms | new median {s['new_median_s'] * 1e3:.2f} ms | "
              f"{s['pairs']} pairs")
        if "base_thread_cpu_s" in s:
            print(f"calling thread's CPU: base {s['base_thread_cpu_s'] * 1e3:.2f} ms | "
                  f"new {s['new_thread_cpu_s'] * 1e3:.2f} ms")
        print(verdict(s))


if __name__ == "__main__":
    main()
