"""benchmarks/ab_tpch.py: the paired A/B driver runs real workers, each importing qdbpm from its own
tree, and summarises paired ratios. Nothing here is timed: only what the driver reports is checked."""

from __future__ import annotations

import json
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks import ab_tpch  # noqa: E402
from support.residual_cases import write_table  # noqa: E402


def test_summary_is_the_paired_ratio_and_its_quartiles():
    s = ab_tpch.summary([2.0, 4.0, 3.0, 1.0], [1.0, 2.0, 2.0, 2.0])  # ratios 2, 2, 1.5, 0.5
    assert s["pairs"] == 4
    assert s["ratio_median"] == pytest.approx(1.75)
    assert s["ratio_q1"] == pytest.approx(1.25) and s["ratio_q3"] == pytest.approx(2.0)
    assert s["base_median_s"] == pytest.approx(2.5) and s["new_median_s"] == pytest.approx(2.0)
    assert ab_tpch.verdict(s).startswith("too few pairs (4)")
    k = ab_tpch.MIN_PAIRS // 2
    assert ab_tpch.verdict(ab_tpch.summary([2.0, 4.0, 3.0, 1.0] * k, [1.0, 2.0, 2.0, 2.0] * k)).startswith("new faster")
    assert ab_tpch.verdict(ab_tpch.summary([1.0] * 2 * k, [2.0] * 2 * k)).startswith("new slower")
    assert ab_tpch.verdict(ab_tpch.summary([1.0, 2.0] * k, [2.0, 1.0] * k)).startswith("no difference")
    with pytest.raises(ValueError):
        ab_tpch.summary([1.0], [])


def test_pairs_of_real_workers_on_a_table(tmp_path):
    root, _ = write_table(tmp_path)
    spec = json.dumps({"root": root, "columns": ["id", "dec"], "where": "a > 10", "q6": False, "warmup": 1})
    s = ab_tpch.run_pairs(REPO, REPO, spec, 3)
    assert s["pairs"] == 3 and s["base_median_s"] > 0 and s["new_median_s"] > 0


def test_the_driver_prints_its_summary(tmp_path, capsys):
    root, _ = write_table(tmp_path)
    ab_tpch.main(["--base-dir", REPO, "--root", root, "--where", "a > 10", "--pairs", "2", "--warmup", "0",
                  "--new-env", "QDBPM_AB_TEST=1", "--json"])
    assert json.loads(capsys.readouterr().out)["pairs"] == 2


def test_a_tree_without_qdbpm_is_named(tmp_path):
    root, _ = write_table(tmp_path)
    spec = json.dumps({"root": root, "columns": None, "where": None, "q6": False, "warmup": 0})
    with pytest.raises(SystemExit, match="ended before it was ready"):
        ab_tpch.run_pairs(str(tmp_path / "p0"), REPO, spec, 1)


def test_env_items_must_be_key_value():
    assert ab_tpch._envs(["A=1", "B=x=y"]) == {"A": "1", "B": "x=y"}
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        ab_tpch._envs(["A"])


def test_where_without_a_root_is_refused():
    with pytest.raises(SystemExit, match="--root"):
        ab_tpch.main(["--base-dir", REPO, "--where", "a > 10"])


def test_a_toggle_runs_pairs_in_this_process_and_restores_the_switch(tmp_path, capsys):
    """--toggle: one process, a module-level switch set to A for each pair's base run and to B
    for its new one; both settings must give the same answer; the switch is restored after."""
    from qdbpm.parquet import _snappy

    root, _ = write_table(tmp_path)
    before = _snappy.NOGIL_BYTES
    spec = json.dumps({"root": root, "columns": ["id", "dec"], "where": "a > 10", "q6": False, "warmup": 1})
    s = ab_tpch.toggle_pairs(spec, "qdbpm.parquet._snappy.NOGIL_BYTES=0,1099511627776", 3)
    assert s["pairs"] == 3 and s["base_median_s"] > 0 and s["new_thread_cpu_s"] > 0
    assert _snappy.NOGIL_BYTES == before
    ab_tpch.main(["--toggle", "qdbpm.table.scan.LAZY_READS=False,True", "--root", root, "--where", "a > 10",
                  "--pairs", "2", "--warmup", "0"])
    assert "calling thread's CPU" in capsys.readouterr().out
    for bad in ["qdbpm.table.scan.NO_SUCH=1,2", "qdbpm.table.scan.LAZY_READS=True", "qdbpm.table.scan.LAZY_READS"]:
        with pytest.raises(SystemExit, match="--toggle"):
            ab_tpch.toggle_pairs(spec, bad, 1)


def test_a_toggle_whose_settings_answer_differently_is_refused(tmp_path, monkeypatch):
    from qdbpm.table import read

    root, _ = write_table(tmp_path)
    real = read.read_table
    monkeypatch.setattr(read, "QDBPM_AB_FLAG", 0, raising=False)
    monkeypatch.setattr(read, "read_table", lambda *a, **k: real(*a, **k).slice(read.QDBPM_AB_FLAG))
    spec = json.dumps({"root": root, "columns": ["id"], "where": None, "q6": False, "warmup": 0})
    with pytest.raises(SystemExit, match="answer differently"):
        ab_tpch.toggle_pairs(spec, "qdbpm.table.read.QDBPM_AB_FLAG=0,1", 1)
