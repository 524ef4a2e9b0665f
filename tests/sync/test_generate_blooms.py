"""qdbpm.generate's bloom_columns: split-block filters built from the data hold every stored
value, prune absent ones, keep the file's own filters, and refuse what cannot be built."""

import decimal
import os
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col
from qdbpm.bloom.sbbf import SplitBlockBloomFilter
from qdbpm.errors import PmError
from qdbpm.sync.generate import generate

from support.generate_checks import check_pm

_EXACT = decimal.Context(prec=100)


# --- bloom_columns: filters built from the data ---------------------------------------------------------

N_BUILT = 1200


def built_table(n=N_BUILT):
    rng = np.random.default_rng(5)
    ints = rng.integers(0, 10 ** 9, n)
    ints[::7] = 0  # repeats
    null = rng.random(n) < 0.1
    f64 = rng.normal(size=n)
    f64[::50] = np.nan
    f64[1::50] = -0.0
    return pa.table({
        "i64": pa.array(ints, pa.int64(), mask=null),
        "i32": pa.array((ints % 100_000).astype(np.int32), pa.int32(), mask=null),
        "i8": pa.array((ints % 200 - 100).astype(np.int8), pa.int8()),
        "u32": pa.array((ints * 5).astype(np.uint32), pa.uint32()),
        "f64": pa.array(f64, pa.float64(), mask=null),
        "f32": pa.array(f64.astype(np.float32), pa.float32()),
        "s": pa.array([None if m else f"str-{v}" for v, m in zip(ints, null)]),
        "bin": pa.array([v.tobytes() for v in ints], pa.binary()),
        "ts_s": pa.array(ints, pa.timestamp("s")),
        "ts_ms": pa.array(ints, pa.timestamp("ms", "UTC")),
        "ts_ns": pa.array(ints * 1000, pa.timestamp("ns")),
        "date": pa.array((ints % 40000).astype(np.int32), pa.date32()),
        "time_s": pa.array((ints % 86400).astype(np.int32), pa.time32("s")),
        "dec": pa.array([decimal.Decimal(int(v)).scaleb(-3) for v in ints], pa.decimal128(18, 3)),
        "dec_big": pa.array([decimal.Decimal(int(v) * 10 ** 30).scaleb(-5) for v in ints], pa.decimal256(60, 5)),
        "u": pa.array([uuid.UUID(int=int(v)).bytes for v in ints], pa.binary(16)).cast(pa.uuid()),
        "fsb": pa.array([v.tobytes() for v in ints], pa.binary(8)),
        "dict": pa.array([f"k{v % 50}" for v in ints]).dictionary_encode(),
        "f16": pa.array((ints % 1000).astype(np.float16)),
    })


def stored_values(t, name, rows, width=None):
    """The values of one column in rows [a, b) as the Parquet file stores them (the SBBF's
    input): non-null, temporal in the stored unit, decimals unscaled big-endian in `width`
    bytes (the FIXED_LEN_BYTE_ARRAY length), UUIDs as 16 bytes."""
    a, b = rows
    arr = t.column(name).combine_chunks().slice(a, b - a).drop_null()
    typ = arr.type
    if pa.types.is_dictionary(typ):
        arr = arr.dictionary_decode()
    if name == "ts_s":
        return arr.cast(pa.timestamp("ms")).cast(pa.int64()).to_numpy()
    if name == "time_s":
        return (arr.cast(pa.int32()).to_numpy() * 1000).astype(np.int32)
    if pa.types.is_timestamp(typ):
        return arr.cast(pa.int64()).to_numpy()
    if pa.types.is_date32(typ):
        return arr.cast(pa.int32()).to_numpy()
    if pa.types.is_decimal(typ):
        return [int(v.scaleb(typ.scale, _EXACT)).to_bytes(width, "big", signed=True) for v in arr.to_pylist()]
    if typ == pa.uuid():
        return arr.storage.to_pylist()
    if pa.types.is_float16(typ):
        v = arr.to_numpy(zero_copy_only=False)
        return [x.tobytes() for x in v[~np.isnan(v)].astype("<f2")]
    if pa.types.is_integer(typ):
        wide = np.int64 if typ.bit_width == 64 else np.int32
        return arr.to_numpy().astype(wide)
    if pa.types.is_floating(typ):
        v = arr.to_numpy(zero_copy_only=False)
        return v[~np.isnan(v)]  # NaN is never inserted (and never contained)
    return arr.to_pylist()


BUILT = ["i64", "i32", "i8", "u32", "f64", "f32", "s", "bin", "ts_s", "ts_ms", "ts_ns", "date", "time_s", "dec",
         "dec_big", "u", "fsb", "dict", "f16"]


def test_bloom_columns_built_from_the_data(tmp_path):
    t = built_table()
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    rows = 300
    pq.write_table(t, path, row_group_size=rows)
    generate(path, pm, bloom_columns=BUILT)
    check_pm(pm, path)
    with qdbpm.open(pm) as m:
        assert [m.column_names[int(b)] for b in m.bloom_columns] == BUILT
        R = m.row_group_count
        assert R == N_BUILT // rows
        for name in BUILT:
            for r in range(R):
                bits = m.bloom_filter(r, name)
                assert bits is not None and len(bits) % 32 == 0, (name, r)
                sbbf = SplitBlockBloomFilter.from_bytes(bits)
                width = int(m.columns["fixed_byte_len"][m.column_index(name)])
                values = stored_values(t, name, (r * rows, (r + 1) * rows), width)
                assert len(values) > 0
                assert sbbf.contains(values).all(), (name, r)


def test_built_filters_prune_absent_values_and_keep_present_ones(tmp_path):
    t = built_table()
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(t, path, row_group_size=100)
    generate(path, pm, bloom_columns=["i64", "s", "ts_s", "dec", "u", "date", "f64"])
    with qdbpm.open(pm) as m:
        R = m.row_group_count
        i64 = t.column("i64").to_pylist()
        ts_s = t.column("ts_s").to_pylist()
        for name, values in (("i64", i64), ("s", t.column("s").to_pylist()), ("ts_s", ts_s),
                             ("dec", t.column("dec").to_pylist()),
                             ("u", [uuid.UUID(bytes=b) for b in t.column("u").cast(pa.binary(16)).to_pylist()]),
                             ("date", t.column("date").to_pylist()), ("f64", t.column("f64").to_pylist())):
            # Every present value: its row group survives.
            for k in range(0, N_BUILT, 37):
                v = values[k]
                if v is None or (isinstance(v, float) and np.isnan(v)):
                    continue
                assert m.prune(col(name) == v)[k // 100], (name, k, v)
        # Absent values: min/max cannot drop the row groups (the values lie inside their ranges),
        # the filters do.
        lo, hi = min(v for v in i64 if v is not None), max(v for v in i64 if v is not None)
        present = set(i64)
        absent = [v for v in range(lo + 1, hi, (hi - lo) // 500) if v not in present][:40]
        kept = sum(int(m.prune(col("i64") == v).sum()) for v in absent)
        assert kept <= 0.1 * len(absent) * R, kept
        s_absent = [f"str-{v}" for v in absent]
        assert sum(int(m.prune(col("s") == v).sum()) for v in s_absent) <= 0.1 * len(absent) * R
        assert m.prune(col("i64").isin(absent[:3])).sum() <= 1
        # Nulls were not inserted: IS NULL still keeps the row groups that have nulls.
        assert m.prune(col("i64").is_null()).all()


def test_bloom_columns_do_not_replace_the_files_filters(tmp_path):
    t = built_table(400)
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(t, path, row_group_size=100, bloom_filter_options={"i64": {"ndv": 1000, "fpp": 0.001}})
    generate(path, pm, bloom_columns=["i64", "s"])
    check_pm(pm, path)  # i64: the file's own bitsets, byte for byte
    with qdbpm.open(pm) as m:
        assert len(m.bloom_filter(0, "i64")) != len(SplitBlockBloomFilter.for_ndv(100).to_bytes())
        assert m.bloom_filter(0, "s") is not None


@pytest.mark.parametrize("kwargs, message", [
    ({"bloom_columns": ["nope"]}, "no column 'nope'"),
    ({"bloom_columns": ["i64"], "bloom": None}, "inline"),
    ({"bloom_columns": ["i64"], "bloom": "external"}, "inline"),
    ({"bloom_columns": ["st.a"]}, "nested"),
    ({"bloom_columns": ["lst.list.element"]}, "nested"),
    ({"bloom_columns": ["flag"]}, "BOOLEAN"),
    ({"bloom": "sometimes"}, "bloom must be"),
])
def test_bloom_argument_errors(tmp_path, kwargs, message):
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(pa.table({"i64": [1, 2], "flag": [True, False], "st": [{"a": 1}, {"a": 2}],
                             "lst": [[1], [2]]}), path)
    with pytest.raises(PmError, match=message):
        generate(path, pm, **kwargs)
    assert not os.path.exists(pm)


def test_bloom_columns_with_empty_and_all_null_row_groups(tmp_path):
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    schema = pa.schema([("x", pa.int64())])
    with pq.ParquetWriter(path, schema) as w:
        w.write_table(pa.table({"x": pa.array([None, None], pa.int64())}))
        w.write_table(pa.table({"x": pa.array([5, None, 6], pa.int64())}))
    generate(path, pm, bloom_columns=["x"])
    with qdbpm.open(pm) as m:
        assert not SplitBlockBloomFilter.from_bytes(m.bloom_filter(0, "x")).contains(np.array([5], np.int64))[0]
        assert SplitBlockBloomFilter.from_bytes(m.bloom_filter(1, "x")).contains(np.array([5, 6], np.int64)).all()
        assert m.prune(col("x") == 5).tolist() == [False, True]
