"""benchmarks/harness.py's goal report: the per-round ratios beside a goal's medians. Nothing here
is timed: the contenders' samples are set by hand."""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.harness import Contender, Report, round_ratios  # noqa: E402


def _sampled(name, samples):
    c = Contender(name, lambda: None)
    c.samples = list(samples)
    return c


def test_round_ratios_pair_each_rounds_samples():
    ours, peer = _sampled("ours", [1.0, 2.0, 4.0]), _sampled("peer", [2.0, 3.0, 10.0])
    assert round_ratios(peer, ours) == [2.0, 1.5, 2.5]


def test_a_goal_shows_its_rounds_range_and_keeps_them(capsys):
    rep = Report()
    rep.goal("Q: ours vs peer (>= 2x)", 2.0, 2, "x faster", rounds=[2.0, 1.5, 2.5])
    rep.goal("plain", 3.0, 2, "x faster")
    rep.goal("large", 3000.0, 1000, "x", rounds=[2950.4, 3400.2])
    rep.print_goals()
    out = capsys.readouterr().out.splitlines()
    assert out[-3].endswith("(1.00x the target >= 2; rounds 1.5-2.5)") and " met " in out[-3]
    assert out[-2].endswith("(1.50x the target >= 2)")
    assert out[-1].endswith("(3.00x the target >= 1,000; rounds 2,950-3,400)")
    assert rep.goals[0]["rounds"] == [2.0, 1.5, 2.5] and "rounds" not in rep.goals[1]


def test_a_ratio_goal_is_the_medians_ratio_with_its_rounds():
    rep = Report()
    ours, peer = _sampled("ours", [1.0, 2.0, 4.0]), _sampled("peer", [2.0, 3.0, 10.0])
    rep.ratio_goal("peer vs ours", peer, ours, 2, "x faster")
    g = rep.goals[0]
    assert g["value"] == 3.0 / 2.0 and g["met"] is False and g["rounds"] == [2.0, 1.5, 2.5]
