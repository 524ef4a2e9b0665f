"""`build.kept_array`, the one-call gather of a one-page chunk's kept rows, against its reference
`build.array(pages.chunk_values(split, rows))`: over chunks of every fixed width, PLAIN and
dictionary pages, DECIMALs stored as INT32 and INT64, from pyarrow and DuckDB, it gives the same
array (values and type) for random sorted rows, and leaves every chunk it does not take (nulls,
several pages, a lazily decoded page, rows past the chunk) to the reference."""

import decimal

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qdbpm.parquet import pages
from qdbpm.table import build, kinds as K

PTYPES = {"INT32": 1, "INT64": 2, "FLOAT": 4, "DOUBLE": 5}
CODECS = {"SNAPPY": 1, "UNCOMPRESSED": 0}


def _source(seed, n=2000, nulls=False):
    rng = np.random.default_rng(seed)
    miss = (rng.random(n) < 0.1) if nulls else None
    few = rng.integers(-500, 500, 30)
    return pa.table({
        "i64": pa.array(rng.integers(-10**15, 10**15, n), mask=miss),
        "i64d": pa.array(rng.choice(few, n), mask=miss),
        "i32": pa.array(rng.integers(-10**6, 10**6, n).astype(np.int32), mask=miss),
        "f64": pa.array(rng.choice(rng.normal(size=20), n), mask=miss),
        "f32": pa.array(rng.normal(size=n).astype(np.float32), mask=miss),
        "dec64": pa.array([decimal.Decimal(int(v)).scaleb(-2) for v in rng.choice(few * 1000, n)],
                          pa.decimal128(15, 2)),
        "dec32": pa.array([decimal.Decimal(int(v)).scaleb(-3) for v in rng.integers(-10**6, 10**6, n)],
                          pa.decimal128(8, 3)),
    })


def _duck(t, path):
    con = duckdb.connect()
    con.register("t", t)
    con.execute(f"COPY (SELECT * FROM t) TO '{path}' (FORMAT parquet, COMPRESSION snappy)")
    con.close()


WRITERS = {
    "pyarrow-dictionary": lambda t, p: pq.write_table(t, p, compression="snappy", store_decimal_as_integer=True),
    "pyarrow-plain": lambda t, p: pq.write_table(t, p, compression="none", use_dictionary=False,
                                                 store_decimal_as_integer=True),
    "pyarrow-small-pages": lambda t, p: pq.write_table(t, p, data_page_size=1000, store_decimal_as_integer=True),
    "duckdb": _duck,
}


def _chunks(path):
    with open(path, "rb") as fh:
        raw = fh.read()
    f = pq.ParquetFile(path)
    arrow = f.schema_arrow
    for r in range(f.metadata.num_row_groups):
        for c in range(f.metadata.num_columns):
            ch = f.metadata.row_group(r).column(c)
            if ch.physical_type not in PTYPES or ch.compression not in CODECS:
                continue
            start = ch.dictionary_page_offset if ch.has_dictionary_page else ch.data_page_offset
            blob = np.frombuffer(raw[start:start + ch.total_compressed_size], np.uint8)
            split = pages.split_chunk(blob, PTYPES[ch.physical_type], CODECS[ch.compression],
                                      f.metadata.schema.column(c).max_definition_level, ch.num_values)
            t = arrow.field(c).type
            yield split, (K.DECIMAL if pa.types.is_decimal(t) else K.VIEW), t, ch.num_values


@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("writer", list(WRITERS))
def test_kept_array_equals_the_general_build(tmp_path, writer, nulls):
    path = str(tmp_path / "f.parquet")
    WRITERS[writer](_source(len(writer) + nulls, nulls=nulls), path)
    rng = np.random.default_rng(7)
    taken = declined = 0
    for split, kind, t, n in _chunks(path):
        for size in (1, 5, n // 3, n):
            rows = np.sort(rng.choice(n, size, replace=False)).astype(np.int64)
            want = build.array(pages.chunk_values(split, rows), kind, t, split.ptype)
            got = build.kept_array(split, rows, kind, t)
            if got is None:
                declined += 1
                continue
            taken += 1
            assert got.type == want.type and got.equals(want), (writer, t, size)
        assert build.kept_array(split, np.array([n], np.int64), kind, t) is None  # a row past the chunk
    if writer == "pyarrow-small-pages" or nulls and writer != "duckdb":
        assert declined > 0  # several pages, or nulls
    if not nulls and writer != "pyarrow-small-pages":
        assert taken > 0 and not declined
