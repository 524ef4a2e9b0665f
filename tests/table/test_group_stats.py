"""Out-of-line bounds (byte strings, big decimals) of a schema group: read for every member at
once from the batch buffer when many members are wanted (table.group.BATCH_MEMBERS), else member
by member. Both must give the same stats and the same masks, and the masks must never drop a row
group holding a match (brute force over the rows)."""

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.table import group as G

PARTS = 40
WORDS = [f"w{i:02d}" for i in range(60)] + ["", "zz" * 20, "é"]  # long ones stored out of line


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    base = tmp_path_factory.mktemp("groupstats")
    rng = np.random.default_rng(3)
    rows = {}
    for p in range(PARTS):
        n = 300
        lo = int(rng.integers(0, 50))
        s = [WORDS[int(i)] for i in rng.integers(lo, lo + 12, n)]
        s = [None if rng.random() < 0.05 else v for v in s]
        if p == 7:
            s = [None] * n  # no bounds at all
        dec = [decimal.Decimal(int(a) * 10**6 + int(b)).scaleb(-3)
               for a, b in zip(rng.integers(-10**16, 10**16, n), rng.integers(0, 10**6, n))]
        t = pa.table({"k": pa.array(np.arange(n) + p * n), "s": pa.array(s, pa.string()),
                      "dec": pa.array(dec, pa.decimal128(30, 3))})
        d = base / f"p={p:02d}"
        d.mkdir()
        pq.write_table(t, d / "data.parquet", row_group_size=100)
        qdbpm.generate(str(d / "data.parquet"))
        rows[p] = t
    return str(base), rows


PREDICATES = ["s = 'w10'", "s IN ('w03', 'w55')", "s < 'w05'", "s >= 'w58'", "s > 'zz'", "s = ''",
              "s BETWEEN 'w20' AND 'w21'", "dec > 9000000000000000000", "dec < -9999999999999999999.5",
              "dec BETWEEN 0 AND 1000 OR s = 'w40'"]


def _masks(root, monkeypatch, members):
    monkeypatch.setattr(G, "BATCH_MEMBERS", members)
    with qdbpm.open_table(root) as t:
        return {q: t.prune_masks(q) for q in PREDICATES}


def test_batch_and_member_stats_give_the_same_masks_and_keep_every_match(table, monkeypatch):
    root, rows = table
    calls = []
    real = G.variable_stats
    monkeypatch.setattr(G, "variable_stats", lambda *a: calls.append(1) or real(*a))
    batch = _masks(root, monkeypatch, 0)
    assert calls  # the batch pass ran
    calls.clear()
    alone = _masks(root, monkeypatch, 10**9)
    assert not calls  # member by member
    pruned = 0
    for q in PREDICATES:
        assert batch[q].keys() == alone[q].keys()
        for part, m in batch[q].items():
            assert np.array_equal(m, alone[q][part]), (q, part)
            t = rows[int(part.split("=")[1])]
            expr = qdbpm.prune.arrow.to_arrow(qdbpm.parse(q), t.schema)
            for r in range(len(m)):
                if not m[r]:
                    assert t.slice(100 * r, 100).filter(expr).num_rows == 0, (q, part, r)
            pruned += int((~m).sum())
    assert pruned > 100  # not vacuous
