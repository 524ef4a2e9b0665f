"""Hive partition keys against pyarrow and DuckDB, for a fixed seeded set of random predicates
mixing key and file columns under AND / OR / NOT (support.hive_cases): `Table.scan` returns exactly
what `pyarrow.dataset.dataset(root, partitioning="hive")` returns with the same filter (same schema,
key columns appended) and DuckDB's `read_parquet(..., hive_partitioning=true)` the same row ids;
`count()` agrees; no row group holding a match is skipped and a full one holds no non-match; and a
recording filesystem shows that the `_pm` opened are exactly those of the partitions the keys
leave, computed by brute force over every value the non-key atoms could take. The same holds on
SeaweedFS, counted on the wire.
"""

import random
import urllib.parse

import fsspec
import pyarrow.dataset as pads
import pytest

import qdbpm

from support.hive_cases import (N_PREDICATES, RG, atoms_of, duck_rids, hive_parts, may_be_true, partition_name,
                                random_tree, render, sorted_rows, write_hive_table)
from support.table_files import RecordingFS, upload


@pytest.fixture(scope="module")
def hive_root(tmp_path_factory):
    return write_hive_table(tmp_path_factory.mktemp("hive"))


def test_random_predicates_equal_pyarrow_and_duckdb_and_open_only_surviving_pm(hive_root):
    rng = random.Random(1515)
    ref = pads.dataset(hive_root, partitioning="hive")
    parts = {partition_name(d, s): (d, s) for d, s in hive_parts()}
    seen_pruned = seen_mixed = 0
    for i in range(N_PREDICATES):
        node = random_tree(rng)
        sql, duck, expr = render(node, 1), render(node, 2), render(node, 3)
        want = ref.to_table(filter=expr)
        rec = RecordingFS(fsspec.filesystem("file"))
        with qdbpm.open_table(hive_root, rec) as table:
            scan = table.scan(sql)
            got = scan.to_table()
            what = f"case {i}: {sql}"
            assert got.schema == want.schema, what
            assert sorted_rows(got) == sorted_rows(want), what
            assert sorted(got.column("rid").to_pylist()) == duck_rids(hive_root, duck), what
            assert scan.count() == want.num_rows, what
            # the _pm opened: those of the partitions the keys leave (the first one's when none)
            expect = {p for p, (d, s) in parts.items() if may_be_true(node, d, s)}
            opened = rec.pm_partitions(table.root)
            assert opened == (expect or {table.partitions[0]}), what
            seen_pruned += len(expect) < len(parts)
            seen_mixed += len(expect) > 0 and any(a[4] is None for a in atoms_of(node)) and \
                any(a[4] is not None for a in atoms_of(node))
            # no row group with a match is skipped; a full one holds no non-match
            rgs = scan.row_groups().to_pylist()
            kept = {(r["partition"], r["row_group"]): r for r in rgs}
            hits = {}  # (partition, row group) -> matching rows, from the row ids
            for rid in got.column("rid").to_pylist():
                k, j = divmod(rid, 10_000)
                key = (partition_name(*hive_parts()[k]), j // RG)
                hits[key] = hits.get(key, 0) + 1
            assert set(hits) <= set(kept), what
            for key, r in kept.items():
                if r["full"]:
                    assert hits.get(key, 0) == r["num_rows"], (what, key)
            assert {r["partition"] for r in rgs} <= expect, what
    # the generator exercised what it should
    assert seen_pruned >= N_PREDICATES // 4 and seen_mixed >= 20, (seen_pruned, seen_mixed)


def test_s3_fetches_only_the_pm_of_partitions_the_keys_leave(s3_server, s3_bucket, s3_proxy, hive_root):
    upload(s3_server.filesystem(), hive_root, f"{s3_bucket}/t")
    rng = random.Random(15)
    parts = {partition_name(d, s): (d, s) for d, s in hive_parts()}
    # predicates whose keys leave some partitions but not all, and one that leaves none
    left = [(c, sum(may_be_true(c, d, s) for d, s in parts.values())) for c in (random_tree(rng) for _ in range(60))]
    cases = [c for c, n in left if 0 < n < len(parts)][:5] + [c for c, n in left if n == 0][:1]
    assert len(cases) == 6
    opts = s3_proxy.storage_options(s3_server)
    prefix = f"/{s3_bucket}/t/"
    for node in cases:
        sql = render(node, 1)
        s3_proxy.reset()
        with qdbpm.open_table(f"s3://{s3_bucket}/t", storage_options=opts) as table:
            got = table.scan(sql).to_table()
        fetched = {urllib.parse.unquote(urllib.parse.urlsplit(path).path)[len(prefix):-len("/_pm")]
                   for kind, path, _, _ in s3_proxy.requests if kind == "GET" and path.split("?")[0].endswith("/_pm")}
        expect = {p for p, (d, s) in parts.items() if may_be_true(node, d, s)}
        assert fetched == (expect or {min(parts)}), sql
        with qdbpm.open_table(hive_root) as local:
            want = local.scan(sql).to_table()
        assert got.schema == want.schema and sorted_rows(got) == sorted_rows(want), sql
