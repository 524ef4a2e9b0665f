"""`_pm` generation from files written here by three real writers — pyarrow, DuckDB and Spark —
checked against pyarrow's view of each footer (tests/support/generate_checks.check_pm): chunk fields,
min/max bytes decoded back to typed values, inline bitsets equal to the Parquet file's bytes,
external entries addressing exactly the raw bitsets. Bloom filters are then probed and used for
pruning, and cross-checked with DuckDB's own probe of the same filters.
"""

import decimal
import glob
import os
import uuid

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col
from qdbpm.pm import layout as L
from qdbpm.bloom.sbbf import SplitBlockBloomFilter, expected_fpp
from qdbpm.sync.generate import generate

from support.generate_checks import check_pm

MODES = ("inline", "external", None)


def all_modes(path, tmp_path, min_blooms=0):
    """Generate in every bloom mode and compare; returns the inline `_pm` path (beside the file
    when it is called data.parquet, so external filters resolve)."""
    seen = {}
    for mode in MODES:
        pm = str(tmp_path / f"_pm.{mode}")
        generate(path, pm, bloom=mode)
        seen[mode] = check_pm(pm, path, bloom=mode)
    assert seen["inline"]["blooms"] == seen["external"]["blooms"] >= min_blooms
    assert seen[None]["blooms"] == 0
    assert seen["inline"]["pyarrow"] == seen["inline"]["chunks"] > 0
    return seen


# --- pyarrow ------------------------------------------------------------------------------------------


def every_type_table(n=1000, seed=3):
    """Every physical and common logical type pyarrow writes, with nulls, NaN, +-0.0 and extremes."""
    rng = np.random.default_rng(seed)
    null = rng.random(n) < 0.08
    ints = rng.integers(-(2 ** 62), 2 ** 62, n)
    ints[:4] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1]
    small = rng.integers(-100, 100, n)
    f64 = rng.normal(size=n) * 1e6
    f64[5::97] = np.nan
    f64[6::97] = -0.0
    f64[7] = np.inf
    secs = rng.integers(-(10 ** 9), 4 * 10 ** 9, n)

    def a(values, typ):
        return pa.array(values, typ, mask=null)

    def dec(scale, typ, mul=1):
        return pa.array([None if m else decimal.Decimal(int(v) * mul).scaleb(-scale)
                         for v, m in zip(small * 1234567, null)], typ)

    return pa.table({
        "i8": a(small.astype(np.int8), pa.int8()), "i16": a((small * 300).astype(np.int16), pa.int16()),
        "i32": a((ints >> 33).astype(np.int32), pa.int32()), "i64": a(ints, pa.int64()),
        "u8": a(np.abs(small).astype(np.uint8) * 2, pa.uint8()),
        "u16": a(np.abs(small).astype(np.uint16) * 600, pa.uint16()),
        "u32": a((ints & 0xFFFFFFFF).astype(np.uint32), pa.uint32()), "u64": a(ints.astype(np.uint64), pa.uint64()),
        "f32": a(f64.astype(np.float32), pa.float32()), "f64": a(f64, pa.float64()),
        "ts_s": a(secs, pa.timestamp("s")), "ts_s_tz": a(secs, pa.timestamp("s", "UTC")),
        "ts_ms": a(secs * 1000, pa.timestamp("ms")), "ts_ms_tz": a(secs * 1000, pa.timestamp("ms", "America/New_York")),
        "ts_us": a(secs * 10 ** 6 + 7, pa.timestamp("us")), "ts_us_tz": a(secs * 10 ** 6, pa.timestamp("us", "UTC")),
        "ts_ns": a(secs * 10 ** 9 + 11, pa.timestamp("ns")), "ts_ns_tz": a(secs * 10 ** 9, pa.timestamp("ns", "UTC")),
        "date": a((secs // 86400).astype(np.int32), pa.date32()),
        "dec9": dec(2, pa.decimal128(9, 2)), "dec18": dec(4, pa.decimal128(18, 4), 10 ** 6),
        "dec38": dec(10, pa.decimal128(38, 10), 10 ** 20), "dec76": dec(20, pa.decimal256(76, 20), 10 ** 50),
        "str": pa.array([None if m else f"s{v % 997}-é" for v, m in zip(ints, null)]),
        "long_str": pa.array([None if m else "x" * 30 + str(v) for v, m in zip(ints, null)]),
        "bin": pa.array([None if m else bytes([v % 256]) * int(v % 7) for v, m in zip(small, null)], pa.binary()),
        "fsb": pa.array([None if m else int(v).to_bytes(8, "little", signed=True) * 3 for v, m in zip(ints, null)],
                        pa.binary(24)),
        "uuid": pa.array([uuid.UUID(int=int(v) & (2 ** 128 - 1)).bytes for v in ints * 7919],
                         pa.binary(16)).cast(pa.uuid()),
        "bool": a(small > 0, pa.bool_()),
        "lst": pa.array([None if i % 11 == 0 else list(range(i % 4)) for i in range(n)], pa.list_(pa.int32())),
        "st": pa.array([None if i % 13 == 0 else {"a": i, "b": f"x{i}"} for i in range(n)],
                       pa.struct([("a", pa.int64()), ("b", pa.string())])),
    })


BLOOM_COLS = ["i32", "i64", "u64", "f32", "f64", "ts_us", "ts_ns", "date", "dec18", "dec38", "str", "bin", "fsb",
              "uuid", "lst.list.element"]

PYARROW_VARIANTS = {
    "row_groups_bloom_index": dict(row_group_size=250, compression="zstd", write_page_index=True,
                                   bloom_filter_options={c: {"ndv": 300} for c in BLOOM_COLS}),
    "plain_v2_split": dict(row_group_size=300, use_dictionary=False, data_page_version="2.0",
                           compression="snappy", use_byte_stream_split=["f32", "f64"]),
    "v1_gzip": dict(row_group_size=400, version="1.0", compression="gzip", coerce_timestamps="us",
                    allow_truncated_timestamps=True),
    "no_statistics": dict(write_statistics=False, compression="none"),
    "lz4_brotli": dict(row_group_size=500, compression={"str": "brotli", "i64": "lz4", "f64": "gzip"}),
}


@pytest.mark.parametrize("variant", sorted(PYARROW_VARIANTS))
def test_pyarrow_every_type(tmp_path, variant):
    path = str(tmp_path / "data.parquet")
    pq.write_table(every_type_table(), path, **PYARROW_VARIANTS[variant])
    seen = all_modes(path, tmp_path, min_blooms=4 * len(BLOOM_COLS) if "bloom" in variant else 0)
    if variant != "no_statistics":
        assert seen["inline"]["typed"] > 100
    else:
        assert seen["inline"]["stats"] == 0


def test_pyarrow_bloom_filters_probe_and_prune(tmp_path):
    t = every_type_table(2000)
    path = str(tmp_path / "data.parquet")
    pq.write_table(t, path, row_group_size=500, bloom_filter_options={"i64": True, "str": True, "ts_us": True})
    for mode in ("inline", "external"):
        pm = str(tmp_path / "_pm")
        generate(path, pm, bloom=mode)
        with qdbpm.open(pm) as m:
            assert [m.column_names[int(b)] for b in m.bloom_columns] == ["i64", "ts_us", "str"]
            for r in range(m.row_group_count):
                rows = t.slice(r * 500, 500)
                for name, values in (("i64", rows.column("i64").drop_null().to_numpy()),
                                     ("str", rows.column("str").drop_null().to_pylist()),
                                     ("ts_us", rows.column("ts_us").drop_null().cast(pa.int64()).to_numpy())):
                    if mode == "inline":
                        bits = m.bloom_filter(r, name)
                    else:
                        off, n = m.bloom_ref(r, name)
                        with open(path, "rb") as f:
                            f.seek(off)
                            bits = f.read(n)
                        assert bits == pq_bitset(path, r, name)
                    assert SplitBlockBloomFilter.from_bytes(bits).contains(values).all(), (mode, name, r)
            # A value inside every row group's min/max but in none of them: only the filters drop it.
            i64 = t.column("i64").to_pylist()
            absent = [v for v in range(-10 ** 6, 10 ** 6, 9973) if v not in set(i64)][:30]
            kept = sum(int(m.prune(col("i64") == v).sum()) for v in absent)
            assert kept <= 0.1 * len(absent) * m.row_group_count, (mode, kept)
            for k in range(0, 2000, 97):
                if i64[k] is not None:
                    assert m.prune(col("i64") == i64[k])[k // 500], (mode, k)
                    assert m.prune(col("ts_us") == t.column("ts_us")[k].as_py())[k // 500] or \
                        t.column("ts_us")[k].as_py() is None


def pq_bitset(path, r, name):
    """The raw bitset of one chunk's filter, through pyarrow's metadata and qdbpm.bloom's header parser."""
    from qdbpm.parquet.bloom_header import parse_bloom_header

    md = pq.ParquetFile(path).metadata
    c = [md.schema.column(i).path for i in range(md.num_columns)].index(name)
    cc = md.row_group(r).column(c)
    with open(path, "rb") as f:
        f.seek(cc.bloom_filter_offset)
        raw = f.read(cc.bloom_filter_length)
    nbytes, hlen = parse_bloom_header(raw, 0)
    return raw[hlen : hlen + nbytes]


# --- DuckDB -------------------------------------------------------------------------------------------

DUCKDB_SQL = """
    select (i % 100)::tinyint as i8, (i % 200)::utinyint as u8, (i % 30000)::smallint as i16,
           (i * 1000)::integer as i32, (i % 200)::bigint as k, (i * 10000000000)::bigint as i64,
           (i % 40000)::uinteger as u32, (i * 1.5)::double as d, (i % 997 * 0.5)::float as f,
           (i / 7)::decimal(9, 3) as dec9, (i * 123456789)::decimal(38, 2) as dec38,
           'v' || (i % 300)::varchar as s, ('x' || (i % 700))::blob as b,
           timestamp '2024-01-01' + to_seconds(i) as ts, timestamptz '2024-01-01 00:00:00+00' + to_seconds(i) as tstz,
           date '2020-01-01' + (i % 400)::integer as dt, i % 3 = 0 as flag,
           uuid '00000000-0000-0000-0000-000000000000' as u0,
           [i, i + 1] as lst, {'a': i, 'b': 's' || i} as st,
           case when i % 5 = 0 then null else i % 100 end as nullable
    from range(0, 20000) t(i)
"""


@pytest.mark.parametrize("codec", ["zstd", "snappy", "uncompressed"])
def test_duckdb_written_with_bloom_filters(tmp_path, codec):
    path = str(tmp_path / "data.parquet")
    con = duckdb.connect()
    con.execute(f"copy ({DUCKDB_SQL}) to '{path}' (format parquet, row_group_size 4096, compression '{codec}')")
    md = pq.ParquetFile(path).metadata
    assert md.num_row_groups >= 4
    with_bloom = {md.schema.column(c).path for r in range(md.num_row_groups) for c in range(md.num_columns)
                  if md.row_group(r).column(c).bloom_filter_offset}
    assert {"s", "k", "nullable"} <= with_bloom
    seen = all_modes(path, tmp_path, min_blooms=10)
    assert seen["inline"]["typed"] > 50
    # The same bitsets answer as DuckDB's own probe, value by value.
    with qdbpm.open(str(tmp_path / "_pm.inline")) as m:
        for name, values in (("s", ["v1", "v299", "v300", "nope", "v77"]), ("k", [0, 199, 200, 123456, 17])):
            pos = m.column_index(name)
            for v in values:
                excluded = dict(con.execute(
                    "select row_group_id, bloom_filter_excludes from parquet_bloom_probe(?, ?, ?)",
                    [path, name, v]).fetchall())
                probe = np.array([v], np.int64) if isinstance(v, int) else [v]
                for r in range(m.row_group_count):
                    bits = m.bloom_filter(r, pos)
                    if bits is None:
                        continue
                    assert (not SplitBlockBloomFilter.from_bytes(bits).contains(probe)[0]) == excluded[r], (name, v, r)
        assert not m.prune(col("s") == "nope").any()
        assert m.prune(col("s") == "v299").all()


# --- Spark --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_spark_written_row_groups_and_bloom_filters(spark, tmp_path):
    """One Spark write: several row groups (parquet.block.size small) and bloom filters on two
    columns (parquet.bloom.filter.enabled#col); every part file generates and agrees with pyarrow."""
    from pyspark.sql import functions as F

    out = str(tmp_path / "spark")
    df = (spark.range(0, 20000, numPartitions=1)
          .select(F.col("id").alias("id"), (F.col("id") % 500).alias("k"),
                  F.concat(F.lit("s"), (F.col("id") % 700).cast("string")).alias("s"), (F.col("id") * 0.25).alias("d"),
                  F.when(F.col("id") % 9 == 0, None).otherwise(F.col("id")).alias("maybe"),
                  F.timestamp_micros(F.col("id") * 1000000 + 1700000000000000).alias("ts"),
                  F.to_date(F.lit("2024-01-01")).alias("day"),
                  (F.col("id") % 1000).cast("decimal(12,3)").alias("dec"), (F.col("id") % 2 == 0).alias("flag")))
    (df.write.option("parquet.block.size", 32 * 1024).option("parquet.page.size.row.check.min", 100)
       .option("parquet.page.size.row.check.max", 1000).option("parquet.block.size.row.check.min", 100)
       .option("parquet.block.size.row.check.max", 1000)
       .option("parquet.bloom.filter.enabled#k", "true").option("parquet.bloom.filter.enabled#s", "true")
       .option("parquet.bloom.filter.expected.ndv#k", "500").parquet(out))
    files = sorted(glob.glob(os.path.join(out, "*.parquet")))
    assert files
    total_rgs = 0
    for i, path in enumerate(files):
        d = tmp_path / f"p{i}"
        d.mkdir()
        seen = all_modes(path, d, min_blooms=2)
        with qdbpm.open(str(d / "_pm.inline")) as m:
            total_rgs += m.row_group_count
            assert [m.column_names[int(b)] for b in m.bloom_columns] == ["k", "s"]
            assert m.columns["type"][m.column_index("ts")] == L.QDB_TIMESTAMP or \
                m.columns["type"][m.column_index("ts")] == L.QDB_TIMESTAMP_NS  # INT96 on older Spark
            t = pq.read_table(path)
            start = 0
            for r in range(m.row_group_count):
                n = int(m.num_rows[r])
                rows = t.slice(start, n)
                start += n
                for name, values in (("k", rows.column("k").to_numpy()), ("s", rows.column("s").to_pylist())):
                    f = SplitBlockBloomFilter.from_bytes(m.bloom_filter(r, name))
                    assert f.contains(values).all()
                    # absent values: false positives within 2x of the filter's design (+ Poisson slack)
                    absent = (np.arange(20_000, dtype=np.int64) + 10**9) if name == "k" else \
                        [f"absent-{j}" for j in range(20_000)]
                    fp = int(f.contains(absent).sum())
                    design = expected_fpp(f.num_bytes, len(set(values.tolist() if name == "k" else values)))
                    assert fp <= 2 * design * 20_000 + 4, (name, r, fp, design)
            assert not m.prune(col("k") == 100000).any() and not m.prune(col("s") == "nope").any()
        assert seen["inline"]["typed"] > 0
    assert total_rgs >= 3


def test_every_type_table_really_has_every_type(tmp_path):
    """Guard for the pyarrow writer test: the file holds each physical type and the logical types
    the issue lists."""
    path = str(tmp_path / "t.parquet")
    pq.write_table(every_type_table(50), path)
    s = pq.ParquetFile(path).metadata.schema
    physical = {s.column(i).physical_type for i in range(len(s))}
    assert physical == {"BOOLEAN", "INT32", "INT64", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"}
    logical = {s.column(i).logical_type.type for i in range(len(s))}
    assert {"INT", "TIMESTAMP", "DATE", "DECIMAL", "STRING", "UUID", "NONE"} <= logical
