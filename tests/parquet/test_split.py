"""The chunk walk without the GIL (`parquet/_split.pyx`, assembled by `pages.assemble`) against its
reference, the Python walk (`pages.split_chunk`): over chunks from pyarrow (codecs, data pages v1
and v2, dictionaries, small pages, nulls), DuckDB and Polars it takes every chunk of data pages v1
with Snappy, LZ4_RAW (QuestDB's codec), ZSTD (Polars' default; zstandard's libzstd) or no codec
and gives the same Split; it leaves the rest to the Python walk; and over
chunks cut short and mutated, whatever it takes equals what the Python walk gives (it never gives
a different value), everything else being left to the Python walk's errors."""

import zlib

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import _split, pages
from qdbpm.pm import layout as L
from support.chunk_files import one_chunk

CODECS = {"SNAPPY": L.CODEC_SNAPPY, "UNCOMPRESSED": L.CODEC_UNCOMPRESSED, "ZSTD": L.CODEC_ZSTD,
          "GZIP": L.CODEC_GZIP, "LZ4_RAW": L.CODEC_LZ4_RAW,
          "LZ4": L.CODEC_LZ4_RAW}  # pyarrow names Parquet's LZ4_RAW "LZ4" (its framed LZ4 is LZ4_HADOOP)
PTYPES = {"INT32": L.PT_INT32, "INT64": L.PT_INT64, "FLOAT": L.PT_FLOAT, "DOUBLE": L.PT_DOUBLE,
          "BYTE_ARRAY": L.PT_BYTE_ARRAY, "BOOLEAN": L.PT_BOOLEAN, "FIXED_LEN_BYTE_ARRAY": L.PT_FIXED_LEN_BYTE_ARRAY}


def _source(seed, n=3000):
    rng = np.random.default_rng(seed)
    miss = rng.random(n) < 0.2
    return pa.table({
        "i": pa.array(rng.integers(-10**12, 10**12, n)),
        "small": pa.array(rng.integers(0, 40, n), mask=miss),
        "f": pa.array(rng.normal(size=n), mask=miss),
        "i32": pa.array(rng.integers(-1000, 1000, n).astype(np.int32)),
        "s": pa.array([f"w{x}" for x in rng.integers(0, 25, n)], mask=miss),
        "text": pa.array(["x" * int(k) for k in rng.integers(0, 30, n)]),
        "none": pa.nulls(n, pa.int64()),
    })


WRITERS = {
    "pyarrow-snappy": lambda t, p: pq.write_table(t, p, row_group_size=1000, compression="snappy"),
    "pyarrow-none-small-pages": lambda t, p: pq.write_table(t, p, row_group_size=1500, compression="none",
                                                            data_page_size=700, dictionary_pagesize_limit=300),
    "pyarrow-snappy-small-pages-index": lambda t, p: pq.write_table(t, p, compression="snappy", data_page_size=900,
                                                                    write_page_index=True),
    "pyarrow-snappy-v2": lambda t, p: pq.write_table(t, p, compression="snappy", data_page_version="2.0"),
    "pyarrow-zstd": lambda t, p: pq.write_table(t, p, compression="zstd"),
    "pyarrow-zstd-small-pages": lambda t, p: pq.write_table(t, p, row_group_size=1000, compression="zstd",
                                                            compression_level=19, data_page_size=600),
    "pyarrow-snappy-plain": lambda t, p: pq.write_table(t, p, compression="snappy", use_dictionary=False),
    "pyarrow-lz4-small-pages": lambda t, p: pq.write_table(t, p, row_group_size=1000, compression="lz4",
                                                           data_page_size=800),
    "duckdb": lambda t, p: _duck(t, p),
    "duckdb-lz4": lambda t, p: _duck(t, p, "lz4_raw"),
    "polars-snappy": lambda t, p: pl.from_arrow(t).write_parquet(p, compression="snappy", row_group_size=1200),
    "polars-zstd": lambda t, p: pl.from_arrow(t).write_parquet(p, row_group_size=1200),  # its default codec
    "duckdb-zstd": lambda t, p: _duck(t, p, "zstd"),
}


def _duck(t, p, codec="snappy"):
    con = duckdb.connect()
    con.register("t", t)
    con.execute(f"COPY (SELECT * FROM t) TO '{p}' (FORMAT parquet, ROW_GROUP_SIZE 1024, COMPRESSION {codec})")
    con.close()


def chunks(path):
    """(blob, ptype, codec, max_def, num_values) of every column chunk of the file."""
    with open(path, "rb") as fh:
        raw = fh.read()
    f = pq.ParquetFile(path)
    md, schema = f.metadata, f.metadata.schema
    for r in range(md.num_row_groups):
        for c in range(md.num_columns):
            ch = md.row_group(r).column(c)
            start = ch.dictionary_page_offset if ch.has_dictionary_page else ch.data_page_offset
            blob = raw[start:start + ch.total_compressed_size]
            yield (np.frombuffer(blob, np.uint8), PTYPES[ch.physical_type], CODECS.get(ch.compression, -1),
                   schema.column(c).max_definition_level, ch.num_values)


def _python(blob, ptype, codec, max_def, n):
    try:
        return pages.split_chunk(blob, ptype, codec, max_def, n)
    except (ParquetFormatError, pages.Unsupported):
        return None


def _kernel(blob, ptype, codec, max_def, n):
    walked = _split.split_table(blob, n, codec)
    return None if walked is None else pages.assemble(ptype, max_def, walked[0], blob, walked[1])


def _page(pg):
    pages._avail(pg, -1)
    return (pg.n, pg.encoding, None if pg.levels is None else pg.levels.tolist(), bytes(pg.buf[pg.pos:pg.end]))


def same(a, b) -> bool:
    if (a.dictionary is None) != (b.dictionary is None) or a.ptype != b.ptype:
        return False
    if a.dictionary is not None and (bytes(a.dictionary[0]) != bytes(b.dictionary[0]) or a.dictionary[1] != b.dictionary[1]):
        return False
    return [_page(p) for p in a.pages] == [_page(p) for p in b.pages]


def _v2(blob):
    """Whether any page of the chunk is a data page v2 (the kernel leaves those)."""
    pos = 0
    while pos < len(blob):
        h = pages._thrift.page_header(blob, pos)
        if h[1] == pages.PAGE_DATA_V2:
            return True
        pos = h[0] + h[3]
    return False


def write_all(base, source, seed):
    """{writer: the path of `source(seed + k)` written by the k-th of WRITERS below `base`}."""
    out = {}
    for k, (name, write) in enumerate(WRITERS.items()):
        path = str(base / f"{name}.parquet")
        write(source(seed + k), path)
        out[name] = path
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_all(tmp_path_factory.mktemp("split"), _source, 60)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_the_kernel_takes_every_v1_snappy_lz4_zstd_or_plain_chunk_and_splits_it_as_the_python_walk(files, writer):
    taken = 0
    for blob, ptype, codec, max_def, n in chunks(files[writer]):
        ref, got = _python(blob, ptype, codec, max_def, n), _kernel(blob, ptype, codec, max_def, n)
        eligible = (codec in (L.CODEC_SNAPPY, L.CODEC_LZ4_RAW, L.CODEC_ZSTD, L.CODEC_UNCOMPRESSED)
                    and ptype in pages.SUPPORTED_TYPES
                    and max_def <= 1 and not _v2(blob))
        assert (got is not None) == eligible, (writer, ptype, codec, max_def)
        if got is not None:
            assert ref is not None and same(got, ref)
            taken += 1
    if writer != "pyarrow-snappy-v2":
        assert taken > 0


def _variants(blob, rng, k):
    for _ in range(k):
        b = bytearray(blob[:int(rng.integers(1, len(blob) + 1))] if rng.random() < 0.3 else blob)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
        yield np.frombuffer(bytes(b), np.uint8)


@pytest.mark.parametrize("writer", ["pyarrow-snappy", "pyarrow-none-small-pages", "duckdb", "polars-snappy",
                                    "pyarrow-lz4-small-pages", "duckdb-lz4", "pyarrow-zstd-small-pages",
                                    "polars-zstd", "duckdb-zstd"])
def test_what_the_kernel_takes_of_corrupt_chunks_equals_the_python_walk(files, writer):
    rng = np.random.default_rng(zlib.crc32(writer.encode()))  # str hash() differs per process
    checked = taken = 0
    for blob, ptype, codec, max_def, n in chunks(files[writer]):
        if not len(blob):
            continue
        for b in _variants(blob, rng, 12):
            got = _kernel(b, ptype, codec, max_def, n)
            checked += 1
            if got is not None:  # taken: the Python walk reads the same bytes the same way
                ref = _python(b, ptype, codec, max_def, n)
                assert ref is not None and same(got, ref)
                taken += 1
    assert checked > 100 and taken > 0  # flips inside values leave chunks readable


@pytest.mark.parametrize("compression, codec", [("snappy", L.CODEC_SNAPPY), ("lz4", L.CODEC_LZ4_RAW),
                                                ("zstd", L.CODEC_ZSTD)])
def test_a_page_claiming_more_than_its_codec_can_decode_is_not_allocated(compression, codec):
    # a dictionary-free INT64 chunk of one compressed page whose header claims 2 GB
    blob = one_chunk(np.arange(100, dtype=np.int64), compression=compression, use_dictionary=False)
    h = pages._thrift.page_header(np.frombuffer(blob, np.uint8), 0)
    assert _split.split_table(np.frombuffer(blob, np.uint8), 100, codec) is not None
    # uncompressed_page_size is field 2: rewrite its zigzag varint to claim 2**31 - 1 bytes
    usize = h[2]
    old = _zigzag(usize)
    at = blob.index(bytes([0x15]) + old)  # field 2, i32 (delta 1 from field 1)
    forged = blob[:at] + bytes([0x15]) + _zigzag(2**31 - 1) + blob[at + 1 + len(old):]
    assert _split.split_table(np.frombuffer(forged, np.uint8), 100, codec) is None
    if codec == L.CODEC_ZSTD:
        return  # a ZSTD frame may say that much: the Python walk decides (Arrow's codec, as pyarrow)
    with pytest.raises(ParquetFormatError):
        pages.split_chunk(np.frombuffer(forged, np.uint8), L.PT_INT64, codec, 0, 100)


def _zigzag(v):
    u, out = (v << 1) ^ (v >> 63), bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)
