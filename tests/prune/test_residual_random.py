"""Residual predicates (prune.residual) against DuckDB: seeded random WHERE clauses mixing
residual and plain leaves (support.residual_cases) return DuckDB's rows, and pruning is sound (no
row group holding a match is skipped, an ALWAYS one holds only matches) and not vacuous.
"""

import random

import numpy as np
import pytest

import qdbpm
from qdbpm import parse
from qdbpm.table import direct

from support.residual_cases import (N_PREDICATES, WORDS, duck_in, duckdb_source, has_residual, random_leaf,
                                    random_predicate, row_group_layout, same_text, seeded_predicates, write_table)


@pytest.fixture(scope="module")
def table_files(tmp_path_factory):
    return write_table(tmp_path_factory.mktemp("residual"))


def test_random_residual_predicates_match_duckdb_and_prune_soundly(table_files, monkeypatch):
    root, files = table_files
    con, src = duckdb_source(files)
    where, groups = row_group_layout(files)
    seen = {"residual": 0, "rows": 0, "empty": 0, "pruned": 0, "residual_pruned": 0, "always": 0, "per_value": 0}
    real = direct.distinct_rows  # the filter pass decided per dictionary entry is among those checked

    def per_value(*a, **k):
        seen["per_value"] += 1
        return real(*a, **k)

    monkeypatch.setattr(direct, "distinct_rows", per_value)
    with qdbpm.open_table(root) as table:
        for q, d in seeded_predicates():
            want = {r[0] for r in con.execute(f"select id from {src} where {d}").fetchall()}
            got = table.scan(q, columns=["id"]).to_table()["id"].to_pylist()
            assert len(got) == len(set(got)) and set(got) == want, f"{q!r}: {len(got)} rows, DuckDB {len(want)}"
            classes = table.classify_masks(q)
            masks = table.prune_masks(q)
            pruned = 0
            for part, (maybe, always) in classes.items():
                assert np.array_equal(maybe, masks[part])
                for r in range(len(maybe)):
                    ids = groups[(part, r)]
                    if ids & want:
                        assert maybe[r], f"{q!r}: pruned {part} row group {r} holding a matching row"
                    if always[r]:
                        assert ids <= want, f"{q!r}: {part} row group {r} ALWAYS with a non-matching row"
                pruned += int((~maybe).sum())
                seen["always"] += int(always.sum())
            residual = has_residual(parse(q))
            seen["residual"] += residual
            seen["residual_pruned"] += residual and pruned > 0
            seen["pruned"] += pruned
            seen["rows"] += bool(want)
            seen["empty"] += not want
    # Not vacuous: residuals are common, clauses select and reject rows, residual clauses prune.
    assert seen["residual"] > N_PREDICATES // 2, seen
    assert seen["rows"] > N_PREDICATES // 3 and seen["empty"] > 10, seen
    assert seen["residual_pruned"] > N_PREDICATES // 5 and seen["always"] > 100, seen
    assert seen["per_value"] > N_PREDICATES // 5, seen


def test_residual_in_a_conjunction_never_weakens_pruning(table_files):
    """masks(P AND Q) is within masks(P) for a residual Q: what P prunes stays pruned."""
    root, _ = table_files
    rng = random.Random("qdbpm-residual-and")
    n = 0
    with qdbpm.open_table(root) as table:
        for _ in range(120):
            p, _ = random_predicate(rng, 2)
            r, _ = random_leaf(rng)
            if not has_residual(parse(r)):
                continue
            base = table.prune_masks(p)
            for both in (f"({p}) AND ({r})", f"({r}) AND ({p})"):
                masks = table.prune_masks(both)
                for part, m in masks.items():
                    assert not (m & ~base[part]).any(), (both, part)
            n += 1
    assert n > 50


def test_substring_in_predicates_matches_duckdb_and_prunes_soundly(table_files):
    root, files = table_files
    con, src = duckdb_source(files)
    _, groups = row_group_layout(files)
    rng = random.Random("qdbpm-substring")
    seen = {"rows": 0, "empty": 0, "pruned": 0}
    with qdbpm.open_table(root) as table:
        for k in range(120):
            w, w2 = rng.choice(WORDS), rng.choice(WORDS)
            n, st = rng.randint(1, 6), rng.choice([-3, -1, 0, 1, 1, 1, 2])
            vals = f"'{w[:n]}', '{w2[:n - 1]}', '{w2}_{rng.randint(0, 4)}'"
            leaf = rng.choice([
                same_text(f"substring(s, {st}, {n}) {rng.choice(['=', '<>', '<', '>='])} '{w[:n]}'"),
                same_text(f"substring(s FROM {st}) = '{w}_{rng.randint(0, 4)}'"),
                (f"substring(s, {st}, {n}) IN ({vals})", duck_in(f"substring(s, {st}, {n})", vals)),
                (f"substring(s, 1, {n}) NOT IN ({vals})", f"NOT {duck_in(f'substring(s, 1, {n})', vals)}"),
            ])
            other = random_predicate(rng, 2)
            q, d = rng.choice([leaf, (f"NOT ({leaf[0]})", f"NOT ({leaf[1]})"),
                               (f"({leaf[0]}) AND ({other[0]})", f"({leaf[1]}) AND ({other[1]})"),
                               (f"({leaf[0]}) OR ({other[0]})", f"({leaf[1]}) OR ({other[1]})")])
            want = {r[0] for r in con.execute(f"select id from {src} where {d}").fetchall()}
            got = table.scan(q, columns=["id"]).to_table()["id"].to_pylist()
            assert len(got) == len(set(got)) and set(got) == want, f"{q!r}: {len(got)} rows, DuckDB {len(want)}"
            for part, (maybe, always) in table.classify_masks(q).items():
                for r in range(len(maybe)):
                    ids = groups[(part, r)]
                    assert maybe[r] or not ids & want, f"{q!r}: pruned {part} row group {r} holding a matching row"
                    assert not always[r] or ids <= want, f"{q!r}: {part} row group {r} ALWAYS, a row does not match"
                seen["pruned"] += int((~maybe).sum())
            seen["rows"] += bool(want)
            seen["empty"] += not want
    assert seen["rows"] > 40 and seen["empty"] > 10 and seen["pruned"] > 100, seen
