"""Chunks split only up to the last row a read keeps (`pages.split_chunk(..., upto)`): Snappy pages
decoded as far as the picked values need, equal to the whole pages taken, over dictionary and
PLAIN pages, v1 and v2, nulls, byte arrays, several pages per chunk, other codecs (decoded whole);
skewed dictionary runs that need the whole page after all; corrupt bytes inside the prefix raise,
past it they are never read. Through a scan: a time range of sorted data reads as pyarrow does."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import pages
from qdbpm.pm import layout as L
from qdbpm.table import direct, scan
from qdbpm.table.read import read_table

CODECS = {"SNAPPY": L.CODEC_SNAPPY, "ZSTD": L.CODEC_ZSTD, "UNCOMPRESSED": L.CODEC_UNCOMPRESSED}
PTYPES = {"INT64": L.PT_INT64, "BYTE_ARRAY": L.PT_BYTE_ARRAY, "DOUBLE": L.PT_DOUBLE}


def chunks(path):
    """(name, blob, ptype, codec, rows) of each column chunk of row group 0."""
    with open(path, "rb") as f:
        raw = f.read()
    md = pq.ParquetFile(path).metadata.row_group(0)
    for c in range(md.num_columns):
        ch = md.column(c)
        start = ch.dictionary_page_offset if ch.has_dictionary_page else ch.data_page_offset
        yield (ch.path_in_schema, raw[start:start + ch.total_compressed_size], PTYPES[ch.physical_type],
               CODECS[ch.compression], md.num_rows)


def values(got, n):
    valid = np.ones(n, bool) if got.valid is None else got.valid
    if isinstance(got, pages.Binary):
        return [bytes(got.data[got.offsets[k]:got.offsets[k + 1]]) if ok else None for k, ok in enumerate(valid)]
    return [v.item() if ok else None for v, ok in zip(got.values, valid)]


@pytest.mark.parametrize("seed", range(16))
def test_a_prefix_split_equals_the_whole_split_at_the_picks(seed, tmp_path):
    rng = np.random.default_rng(7000 + seed)
    n = 5000
    miss = rng.random(n) < 0.1
    t = pa.table({
        "ts": pa.array(np.sort(rng.integers(0, 10**12, n)), pa.int64()),  # sorted: the range's column
        "i": pa.array(rng.integers(0, 50, n), pa.int64(), mask=miss),
        "f": pa.array(rng.random(n), pa.float64()),
        "s": pa.array([None if m else f"v{k}" * int(k % 7) for k, m in zip(rng.integers(0, 40, n), miss)]),
        "u": pa.array([f"row {k} " + "x" * int(rng.integers(0, 30)) for k in range(n)]),
    })
    path = tmp_path / "p.parquet"
    codec = ["snappy", "snappy", "zstd", "none"][seed % 4]
    pq.write_table(t, path, compression=codec, use_dictionary=bool(seed % 2),
                   data_page_version="2.0" if seed % 3 == 0 else "1.0",
                   data_page_size=int(rng.integers(4000, 200_000)))
    for name, blob, ptype, codec_id, rows in chunks(path):
        want = values(pages.chunk_values(pages.split_chunk(blob, ptype, codec_id, 1, rows)), rows)
        a = int(rng.integers(0, n))
        for picks in (np.arange(0, int(rng.integers(1, 300))), np.arange(a, min(n, a + int(rng.integers(1, 500)))),
                      np.sort(rng.choice(n, int(rng.integers(1, 40)), replace=False)), np.array([n - 1]),
                      np.array([0])):
            picks = picks.astype(np.int64)
            sp = pages.split_chunk(blob, ptype, codec_id, 1, rows, int(picks[-1]) + 1)
            assert values(pages.chunk_values(sp, picks), len(picks)) == [want[k] for k in picks], (name, picks[:3])
        pages.split_chunk(blob, ptype, codec_id, 1, rows, 0)  # no row kept: nothing decoded, nothing fails


def test_only_the_prefix_is_decoded():
    n = 100_000
    # prices as TPC-H has them: Snappy elements of a few bytes (random bytes are one 64 KiB
    # literal each, decoded whole once a byte of it is asked for)
    t = pa.table({"x": pa.array(np.random.default_rng(1).integers(90_000, 10_000_000, n), pa.int64())})
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink, compression="snappy", use_dictionary=False, data_page_size=1 << 30)
    buf = sink.getvalue().to_pybytes()
    md = pq.ParquetFile(pa.BufferReader(buf)).metadata.row_group(0).column(0)
    blob = buf[md.data_page_offset:md.data_page_offset + md.total_compressed_size]
    sp = pages.split_chunk(blob, L.PT_INT64, L.CODEC_SNAPPY, 1, n, 1000)
    first, rest = sp.pages[0], sp.pages[1:]  # Arrow writes 20,000 rows a page at most
    assert rest and all(pg.lazy is not None and pg.lazy.op < pg.end // 10 for pg in sp.pages)  # levels only
    got = pages.chunk_values(sp, np.arange(990, 1000, dtype=np.int64))
    assert got.values.tolist() == t.column(0).to_pylist()[990:1000]
    assert first.lazy is not None and 8000 <= first.lazy.op < first.end // 10  # up to row 1000 only
    assert all(pg.lazy is not None and pg.lazy.op < pg.end // 10 for pg in rest)  # pages past it: never


def test_skewed_dictionary_runs_fall_back_to_the_whole_page():
    """Dense bit-packed indexes first, then one long RLE run: a pick past the middle of the rows
    needs nearly every byte, more than a share of the rows suggests; the read is still right."""
    rng = np.random.default_rng(3)
    n = 60_000
    head = rng.integers(0, 200, n // 2)
    t = pa.table({"x": pa.array(np.concatenate([head, np.full(n - n // 2, 7)]), pa.int64())})
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink, compression="snappy", use_dictionary=True, data_page_size=1 << 30)
    buf = sink.getvalue().to_pybytes()
    md = pq.ParquetFile(pa.BufferReader(buf)).metadata.row_group(0).column(0)
    blob = buf[md.dictionary_page_offset:md.dictionary_page_offset + md.total_compressed_size]
    for pick in (n // 2 - 1, n // 2 + 10, n - 1):
        sp = pages.split_chunk(blob, L.PT_INT64, L.CODEC_SNAPPY, 1, n, pick + 1)
        got = pages.chunk_values(sp, np.array([pick], np.int64))
        assert got.values.tolist() == [t.column(0)[pick].as_py()]


def _plain_blob(n=20_000):
    t = pa.table({"x": pa.array(np.arange(n) * 7919, pa.int64())})
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink, compression="snappy", use_dictionary=False, data_page_size=1 << 30)
    buf = sink.getvalue().to_pybytes()
    md = pq.ParquetFile(pa.BufferReader(buf)).metadata.row_group(0).column(0)
    return t, bytearray(buf[md.data_page_offset:md.data_page_offset + md.total_compressed_size])


def test_corrupt_bytes_inside_the_prefix_raise_past_it_are_never_read():
    t, blob = _plain_blob()
    n = t.num_rows
    for k in range(1, 40):  # a byte near the block's end that breaks it (which one depends on the data)
        late = bytearray(blob)
        late[-k] ^= 0xFF
        try:
            pages.chunk_values(pages.split_chunk(bytes(late), L.PT_INT64, L.CODEC_SNAPPY, 1, n), None)
        except ParquetFormatError as e:
            assert "snappy" in str(e)
            break
    else:
        raise AssertionError("no byte of the block's tail breaks it")
    sp = pages.split_chunk(bytes(late), L.PT_INT64, L.CODEC_SNAPPY, 1, n, 100)
    assert pages.chunk_values(sp, np.arange(100, dtype=np.int64)).values.tolist() == t.column(0).to_pylist()[:100]
    cut = bytes(blob[:len(blob) // 2])  # a chunk cut short: its page header claims more bytes than are left
    with pytest.raises(ParquetFormatError):
        pages.split_chunk(cut, L.PT_INT64, L.CODEC_SNAPPY, 1, n, 10)


@pytest.fixture(scope="module")
def sorted_root(tmp_path_factory):
    """A QuestDB-like partition: sorted timestamps, a symbol, wide text, in row groups of 20,000
    (the timestamps' chunks under a quarter of the others': direct.CHEAP_FILTER)."""
    rng = np.random.default_rng(5)
    n = 60_000
    base = tmp_path_factory.mktemp("sorted")
    d = base / "2024-01"
    d.mkdir()
    t = pa.table({
        "ts": pa.array(np.sort(rng.integers(1_704_067_200_000_000, 1_706_745_600_000_000, n)), pa.timestamp("us")),
        "sym": pa.array(np.array(["a", "b", "c", None], object)[rng.integers(0, 4, n)], pa.string()),
        "px": pa.array(rng.random(n) * 100, pa.float64()),
        "qty": pa.array(rng.integers(1, 1000, n), pa.int64()),
        "note": pa.array([f"order {k} " + rng.bytes(int(rng.integers(8, 40))).hex() for k in range(n)]),
        "venue": pa.array([rng.bytes(12).hex() for _ in range(n)]),
    })
    pq.write_table(t, d / "data.parquet", row_group_size=20_000, compression="snappy")
    qdbpm.generate(str(d / "data.parquet"))
    return str(base), t


@pytest.mark.parametrize("where", [
    "ts < TIMESTAMP '2024-01-02 00:00:00'",
    "ts BETWEEN TIMESTAMP '2024-01-10 00:00:00' AND TIMESTAMP '2024-01-10 06:00:00'",
    "ts >= TIMESTAMP '2024-01-31 12:00:00'",
    "ts > TIMESTAMP '2030-01-01 00:00:00'",
])
def test_a_time_range_of_sorted_data_reads_as_pyarrow(sorted_root, where, monkeypatch):
    root, t = sorted_root
    seen = []
    real = direct._splits

    def spy(pm, rgs, c, blobs, all_null, picks=None):
        seen.append(picks is not None)
        return real(pm, rgs, c, blobs, all_null, picks)

    monkeypatch.setattr(direct, "_splits", spy)
    got = read_table(root, None, where)
    monkeypatch.setattr(scan, "DIRECT", False)
    want = read_table(root, None, where)
    assert got.equals(want)
    assert got.num_rows == want.num_rows
    if got.num_rows:
        assert any(seen)  # the columns were split after the filter named the rows


def test_a_unit_nothing_runs_beside_splits_its_other_columns_up_to_the_last_kept_row(tmp_path, monkeypatch):
    """A unit under direct.PARALLEL_BYTES (no pool thread helps) with a filter that is not cheap
    (its column as large as the other): the other column is split once the filter has named the
    rows, only up to the last one kept, and the rows are pyarrow's."""
    n = 20_000
    d = tmp_path / "p"
    d.mkdir()
    rng = np.random.default_rng(11)
    t = pa.table({"x": pa.array(np.arange(n) * 7919, pa.int64()), "y": pa.array(rng.integers(0, 1 << 40, n))})
    pq.write_table(t, d / "data.parquet", compression="snappy", use_dictionary=False, data_page_size=1 << 30)
    qdbpm.generate(str(d / "data.parquet"))
    seen = []
    real = direct._splits

    def spy(pm, rgs, c, blobs, all_null, picks=None):
        seen.append((c, None if picks is None else [int(p[-1]) for p in picks if len(p)]))
        return real(pm, rgs, c, blobs, all_null, picks)

    monkeypatch.setattr(direct, "_splits", spy)
    where = f"x < {100 * 7919}"
    got = read_table(str(tmp_path), None, where)
    monkeypatch.setattr(scan, "DIRECT", False)
    assert got.equals(read_table(str(tmp_path), None, where))
    assert got.num_rows == 100
    assert (1, [99]) in seen and not any(c == 1 and p is None for c, p in seen)  # y: up to row 99
