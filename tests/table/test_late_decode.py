"""Late materialisation of dictionary-encoded string columns (qdbpm/table/decode.py late_columns):
a scan decodes the columns it does not filter on as dictionaries and casts the (kept) rows back.
The rows and types must be exactly what pyarrow.dataset returns, whatever the encoding:
dictionary pages, a dictionary that overflowed into plain pages, plain, nulls, all-null chunks."""

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.table import decode as D
from qdbpm.table.read import read_table

N = 4000


def table(seed):
    rng = np.random.default_rng(seed)
    k = np.arange(N)
    words = np.array([f"w{i:03d}" for i in range(40)])
    s = words[rng.integers(0, 40, N)].astype(object)
    s[rng.random(N) < 0.1] = None
    wide = np.array([f"unique-{seed}-{i}-" + "x" * int(rng.integers(0, 30)) for i in range(N)], dtype=object)
    return pa.table({
        "k": pa.array(k, pa.int64()),
        "s": pa.array(s, pa.string()),  # dictionary pages
        "b": pa.array([None if v is None else v.encode() for v in s], pa.binary()),
        "plain": pa.array(s, pa.string()),  # written without a dictionary
        "wide": pa.array(wide, pa.string()),  # the dictionary overflows into plain pages
        "ls": pa.array(s, pa.large_string()),  # dictionary pages, but a large_string column
        "gone": pa.array([None] * N, pa.string()),  # all null: never fetched
    })


@pytest.fixture(autouse=True, params=["direct", "pyarrow"])
def decoder(request, monkeypatch):
    """Every test twice: units decoded by qdbpm's direct path, and by pyarrow's reader (where the
    late dictionary columns live; the direct path takes these units whole)."""
    from qdbpm.table import scan

    monkeypatch.setattr(scan, "DIRECT", request.param == "direct")
    return request.param


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    base = tmp_path_factory.mktemp("late")
    parts = []
    for day in range(3):
        d = base / f"day={day}"
        d.mkdir()
        t = table(day)
        pq.write_table(t, d / "data.parquet", row_group_size=1000, use_dictionary=["s", "b", "wide", "ls", "gone"],
                       dictionary_pagesize_limit=2048)
        qdbpm.generate(str(d / "data.parquet"))
        parts.append(t)
    return str(base)


def test_the_late_columns_are_the_dictionary_encoded_plain_string_ones(root):
    with qdbpm.open_table(root) as t:
        pm = t.meta("day=0")
        names = pm.column_names
        cols = list(range(len(names)))
        schemas = t.column_schemas("day=0")
        late = {names[c] for c in D.late_columns(pm, [0, 1, 2, 3], cols, schemas.fields(pm, cols))}
    assert late == {"s", "b", "wide", "gone"}  # not plain (no dictionary), ls (large_string), k


@pytest.mark.parametrize("where", ["k IN (3, 10, 1500, 2222, 3999)", "k < 1500 AND k > 1200", "s = 'w007'", "s IS NULL OR k = 5",
                                   "k > 100000", "k >= 0", "b = 'w001' AND k < 3000", "wide LIKE 'unique-1-%'"])
def test_late_decoded_rows_equal_pyarrow(root, where):
    from qdbpm.prune.arrow import to_arrow
    from qdbpm.prune.filters import where_text

    dataset = ds.dataset(root, partitioning="hive")
    want = dataset.to_table(filter=to_arrow(where_text(where), dataset.schema))
    got = read_table(root, where=where)
    assert got.schema.equals(want.schema), (got.schema, want.schema)
    order = [("day", "ascending"), ("k", "ascending")]
    assert got.sort_by(order).equals(want.sort_by(order)), where
    for name in ("s", "b", "wide", "gone"):
        assert not pa.types.is_dictionary(got.schema.field(name).type)


@pytest.mark.parametrize("columns,where", [
    (["s", "k"], "k < 10"), (["wide"], "k IN (5, 3001)"), (["day", "b", "k"], "day = 1 AND k > 3990"),
    (["s", "plain"], "s = 'w0075'"), (["gone", "ls"], "s = 'w003' AND day >= 1"), (["k"], "wide LIKE '%-1-x%'"),
])
def test_two_phase_columns_and_keys_equal_pyarrow(root, columns, where):
    from qdbpm.prune.arrow import to_arrow
    from qdbpm.prune.filters import where_text

    dataset = ds.dataset(root, partitioning="hive")
    want = dataset.to_table(columns=columns, filter=to_arrow(where_text(where), dataset.schema))
    got = read_table(root, columns, where)
    assert got.schema.equals(want.schema), (got.schema, want.schema)
    assert sorted(got.to_pylist(), key=repr) == sorted(want.to_pylist(), key=repr), where


def test_the_late_path_is_taken(root, monkeypatch, decoder):
    """A scan that filters decodes s / b / wide as dictionaries (the test above would pass without)."""
    from qdbpm.table import scan

    monkeypatch.setattr(scan, "DIRECT", False)  # the direct path takes these units whole; this is pyarrow's
    seen = []
    real = D.decode_chunks

    def spy(pm, rgs, cols, blobs, schemas=None, dictionary=()):
        seen.append(set(dictionary))
        return real(pm, rgs, cols, blobs, schemas, dictionary)

    import qdbpm.table.decode as mod

    monkeypatch.setattr(mod, "decode_chunks", spy)
    read_table(root, where="k IN (3, 10, 1500, 2222, 3999)")
    assert seen and all({"s", "b", "wide"} <= d for d in seen)
    seen.clear()
    read_table(root, where="k >= 0")  # every row matches: nothing filtered, all of them late
    assert seen and all({"s", "b", "wide"} <= d for d in seen)
    seen.clear()
    read_table(root, where="s = 'w001'")  # the predicate's own column is decoded plain
    assert seen and all("s" not in d and {"b", "wide"} <= d for d in seen)
