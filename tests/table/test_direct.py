"""The direct decoder (qdbpm/parquet/pages.py + _pages.pyx, qdbpm/table/direct.py) against
pyarrow: every read it answers must equal pyarrow's in values and types, over real writers
(pyarrow, DuckDB, Polars), codecs, page versions, dictionary and plain pages, nulls, NaN and the
types it takes; shapes it does not take go to pyarrow's reader; corrupt chunks end exactly as
they do without it (scan.DIRECT = False is the reference)."""

import decimal
import os

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.errors import ParquetFormatError, PmError
from qdbpm.parquet import _pages, pages
from qdbpm.pm import layout as L
from qdbpm.prune.arrow import to_arrow
from qdbpm.prune.filters import where_text
from qdbpm.table import direct, pool, scan
from qdbpm.table.kinds import kinds, taken_rows
from qdbpm.table.ranges import plan
from qdbpm.table.read import read_table
from support.chunk_files import one_chunk

N = 3000
WHERES = ["k < 700", "k IN (3, 999, 1000, 2999)", "i32 > 0 AND s = 'w07'", "f64 > 0.5 OR s IS NULL",
          "k > 100000", "d >= DATE '2024-01-20'", "s LIKE 'w1%'",
          "dec9 BETWEEN 10 AND 500000.255 OR dec < -1000.00005", "dec9 IN (0.5, 12.25) OR k = 1 AND dec > 0",
          "dec * 2 > 100 AND dec9 < 100000"]  # the last one a residual: dec stays decimal in the filter


def source(seed, nulls=True):
    rng = np.random.default_rng(seed)
    miss = (rng.random(N) < 0.15) if nulls else np.zeros(N, bool)
    words = np.array([f"w{i:02d}" for i in range(30)])
    f64 = rng.random(N)
    f64[rng.random(N) < 0.02] = np.nan
    ts = rng.integers(1_700_000_000_000_000, 1_800_000_000_000_000, N)
    cents = rng.integers(-10**9, 10**9, N)
    return pa.table({
        "k": pa.array(np.arange(N), pa.int64()),
        "i32": pa.array(rng.integers(-2**31, 2**31, N, dtype=np.int64).astype(np.int32), mask=miss),
        "u32": pa.array(rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)),
        "u64": pa.array(rng.integers(0, 2**64 - 1, N, dtype=np.uint64), mask=miss),
        "f32": pa.array(rng.random(N).astype(np.float32)),
        "f64": pa.array(f64, mask=miss),
        "d": pa.array((19_700 + rng.integers(0, 60, N)).astype(np.int32), pa.int32()).cast(pa.date32()),
        "ts_us": pa.array(ts, pa.timestamp("us")),
        "ts_ns": pa.array(ts * 1000, pa.timestamp("ns", tz="UTC"), mask=miss),
        "ts_ms": pa.array(ts // 1000, pa.timestamp("ms", tz="Europe/Paris")),
        "dec": pa.array([decimal.Decimal(int(c)).scaleb(-4) for c in cents], pa.decimal128(18, 4)),
        "dec9": pa.array([decimal.Decimal(int(c) % 10**8).scaleb(-2) for c in cents], pa.decimal128(9, 2), mask=miss),
        "s": pa.array(words[rng.integers(0, 30, N)], pa.string(), mask=miss),
        "ls": pa.array([f"row-{i}-" + "x" * int(rng.integers(0, 20)) for i in range(N)], pa.large_string()),
        "bin": pa.array([bytes(rng.integers(0, 256, int(rng.integers(0, 9)), dtype=np.uint8)) for _ in range(N)],
                        pa.binary(), mask=miss),
        "gone": pa.nulls(N, pa.string()),
    })


PYARROW_OPTIONS = {
    "snappy-v1-dict": dict(compression="snappy"),
    "zstd-v2-plain": dict(compression="zstd", data_page_version="2.0", use_dictionary=False),
    "none-v1-small-pages": dict(compression="none", data_page_size=2048, dictionary_pagesize_limit=512),
    "gzip-v2-dict": dict(compression="gzip", data_page_version="2.0"),
    "lz4-v1": dict(compression="lz4"),
    "brotli-v2-small-pages": dict(compression="brotli", data_page_version="2.0", data_page_size=1024),
}


def _write(base, name, write):
    d = base / name / "part=0"
    d.mkdir(parents=True)
    path = str(d / "data.parquet")
    write(path)
    qdbpm.generate(path)
    return str(base / name)


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp("direct")
    out = {}
    for name, opts in PYARROW_OPTIONS.items():
        out["pyarrow-" + name] = _write(base, "pyarrow-" + name, lambda p, o=opts: pq.write_table(
            source(len(out)), p, row_group_size=1100, store_decimal_as_integer=True, **o))
    t = source(7)

    def duck(p):
        con = duckdb.connect()
        con.register("t", t.drop_columns(["u64", "ts_ns", "ts_ms"]))  # DuckDB would retype these
        con.execute(f"COPY (SELECT * FROM t) TO '{p}' (FORMAT parquet, ROW_GROUP_SIZE 1024)")
    out["duckdb"] = _write(base, "duckdb", duck)
    out["polars"] = _write(base, "polars", lambda p: pl.from_arrow(source(8).drop_columns(["ls", "ts_ms"]))
                           .write_parquet(p, row_group_size=1000, statistics=True))
    return out


def _reference(root, columns=None, where=None):
    scan.DIRECT = False
    try:
        return read_table(root, columns, where)
    finally:
        scan.DIRECT = True


def same(a, b) -> bool:
    """Tables equal in schema and values, NaN equal to NaN (Arrow's equals says NaN != NaN)."""
    if not a.schema.equals(b.schema) or a.num_rows != b.num_rows:
        return False
    for x, y in zip(a.columns, b.columns):
        x, y = x.combine_chunks(), y.combine_chunks()
        if pa.types.is_floating(x.type):
            if not x.is_null().equals(y.is_null()):
                return False
            if not np.array_equal(x.fill_null(0).to_numpy(), y.fill_null(0).to_numpy(), equal_nan=True):
                return False
        elif not x.equals(y):
            return False
    return True


def _sorted(t):
    return t.sort_by([("k", "ascending")]) if "k" in t.column_names else t


@pytest.mark.parametrize("where", [None] + WHERES)
def test_direct_reads_equal_pyarrow(roots, where):
    for name, root in roots.items():
        path = os.path.join(root, "part=0", "data.parquet")
        if where is None:
            want = pq.read_table(path)
        else:
            dataset = ds.dataset(path)
            if any(c not in dataset.schema.names for c in ("s", "i32", "d", "f64", "dec", "dec9")):
                continue
            want = dataset.to_table(filter=to_arrow(where_text(where), dataset.schema))
        got = read_table(root, list(want.column_names), where)
        assert got.schema.equals(want.schema), (name, got.schema, want.schema)
        assert same(_sorted(got), _sorted(want)), (name, where)
        ref = _reference(root, list(want.column_names), where)
        assert same(got, ref), (name, where)
        with qdbpm.open_table(root) as t:
            assert t.scan(where).count() == want.num_rows, (name, where)


def test_direct_path_is_taken_for_the_shapes_it_reads(roots):
    for name, root in roots.items():
        with qdbpm.open_table(root) as t:
            pm = t.meta("part=0")
            schemas = t.column_schemas("part=0")
            cols = [c for c in range(pm.column_count)]
            fields = schemas.fields(pm, cols)
            got = kinds(pm, list(range(pm.row_group_count)), cols, schemas, fields)
        if "plain" in name or "duckdb" in name or "polars" in name or "dict" in name or "pages" in name \
                or name.endswith("lz4-v1"):
            assert got is not None, name


def _unsupported_root(base, table, **opts):
    base.mkdir()
    (base / "part=0").mkdir()
    path = str(base / "part=0" / "data.parquet")
    pq.write_table(table, path, **opts)
    qdbpm.generate(path)
    return str(base)


@pytest.mark.parametrize("case", ["bool", "int8", "float16", "dictionary_type", "flba_decimal", "delta",
                                  "string_view"])
def test_other_shapes_go_to_pyarrow_and_read_the_same(tmp_path, case):
    k = pa.array(np.arange(500), pa.int64())
    value = {
        "bool": pa.array(np.arange(500) % 3 == 0),
        "int8": pa.array((np.arange(500) % 100).astype(np.int8)),
        "float16": pa.array((np.arange(500) % 50).astype(np.float16), pa.float16()),
        "dictionary_type": pa.array([f"v{i % 7}" for i in range(500)]).dictionary_encode(),
        "flba_decimal": pa.array(np.arange(500), pa.int64()).cast(pa.decimal128(22, 2)),
        "delta": pa.array(np.arange(500) * 7, pa.int64()),
        "string_view": pa.array([f"v{i}" for i in range(500)], pa.string_view()),
    }[case]
    opts = {"column_encoding": {"k": "PLAIN", "v": "DELTA_BINARY_PACKED"}, "use_dictionary": False} \
        if case == "delta" else {}
    root = _unsupported_root(tmp_path / case, pa.table({"k": k, "v": value}), **opts)
    with qdbpm.open_table(root) as t:
        pm = t.meta("part=0")
        schemas = t.column_schemas("part=0")
        assert kinds(pm, [0], [0, 1], schemas, schemas.fields(pm, [0, 1])) is None
        assert kinds(pm, [0], [0], schemas, schemas.fields(pm, [0])) is not None
        # the planner's flag per unit (units.plan_units) is kinds' own chunk check
        for where in (None, "k < 10"):
            for u in t.scan(where, ["k", "v"])._units_for_read():
                own = bool(taken_rows(pm.chunks[np.ix_(u.row_groups, u.columns)]).all())
                assert u.direct is own and own is (case not in ("delta",)), (case, u)
    path = os.path.join(root, "part=0", "data.parquet")
    want = pq.read_table(path)
    assert read_table(root, ["k", "v"]).equals(want)
    got = read_table(root, ["k", "v"], where="k < 10")
    assert got.equals(want.slice(0, 10))


# --- kernels against slow references ----------------------------------------------------------


def rle_reference(buf, pos, end, bit_width, count):
    """The RLE / bit-packed hybrid as the Parquet spec words it, one bit at a time."""
    out = []
    width = (bit_width + 7) // 8
    while len(out) < count:
        header, shift = 0, 0
        while True:
            b = int(buf[pos])
            pos += 1
            header |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        if header & 1:
            n = (header >> 1) * 8
            bits = int.from_bytes(bytes(buf[pos:pos + (header >> 1) * bit_width]), "little")
            for i in range(n):
                out.append((bits >> (i * bit_width)) & ((1 << bit_width) - 1))
            pos += (header >> 1) * bit_width
        else:
            v = int.from_bytes(bytes(buf[pos:pos + width]), "little")
            pos += width
            out += [v] * (header >> 1)
    return out[:count]


def _uleb(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def random_runs(rng, bit_width, count):
    buf = bytearray()
    made = 0
    while made < count:
        if rng.random() < 0.5:
            n = int(rng.integers(1, 300))
            v = int(rng.integers(0, 1 << bit_width)) if bit_width else 0
            buf += _uleb(n << 1) + v.to_bytes((bit_width + 7) // 8, "little")
            made += n
        else:
            groups = int(rng.integers(1, 20))
            vals = [int(rng.integers(0, 1 << bit_width)) if bit_width else 0 for _ in range(groups * 8)]
            bits = sum(v << (i * bit_width) for i, v in enumerate(vals))
            buf += _uleb(groups << 1 | 1) + bits.to_bytes(groups * bit_width, "little")
            made += groups * 8
    return np.frombuffer(bytes(buf), np.uint8), made


@pytest.mark.parametrize("seed", range(40))
def test_rle_hybrid_equals_the_reference(seed):
    rng = np.random.default_rng(seed)
    bw = int(rng.integers(0, 33))
    buf, made = random_runs(rng, bw, int(rng.integers(1, 2000)))
    count = int(rng.integers(0, made + 1))
    out = np.empty(count, np.int32)
    _pages.rle_hybrid(buf, 0, len(buf), bw, count, out, 1 << 33)
    assert out.view(np.uint32).tolist() == rle_reference(buf, 0, len(buf), bw, count)
    if count:  # every truncation: the same values or a clear error, never a read past the end
        cut = int(rng.integers(0, len(buf)))
        try:
            _pages.rle_hybrid(buf[:cut].copy(), 0, cut, bw, count, out, 1 << 33)
        except ParquetFormatError:
            pass
        else:
            assert out.view(np.uint32).tolist() == rle_reference(buf, 0, len(buf), bw, count)


@pytest.mark.parametrize("seed", range(40))
def test_rle_pick_equals_the_reference_at_the_picks(seed):
    """Only the values picked (ascending; a contiguous window, scattered ones, none, the last):
    the reference's values there; a truncated stream gives the same or a clear error; picks out
    of order, repeated, negative or past `count`, and an output too short, are refused."""
    rng = np.random.default_rng(3000 + seed)
    bw = int(rng.integers(0, 33))
    buf, made = random_runs(rng, bw, int(rng.integers(1, 2000)))
    count = int(rng.integers(1, made + 1))
    ref = rle_reference(buf, 0, len(buf), bw, count)
    a = int(rng.integers(0, count))
    for picks in (np.arange(a, min(count, a + int(rng.integers(1, 300))), dtype=np.int64),
                  np.sort(rng.choice(count, int(rng.integers(0, min(count, 60) + 1)), replace=False)).astype(np.int64),
                  np.array([count - 1], np.int64)):
        out = np.full(len(picks), -7, np.int32)
        _pages.rle_pick(buf, 0, len(buf), bw, count, picks, out, 1 << 33)
        assert out.view(np.uint32).tolist() == [ref[i] for i in picks]
        if len(picks):
            cut = int(rng.integers(0, len(buf)))
            try:
                _pages.rle_pick(buf[:cut].copy(), 0, cut, bw, count, picks, out, 1 << 33)
            except ParquetFormatError:
                pass
            else:
                assert out.view(np.uint32).tolist() == [ref[i] for i in picks]
    out = np.empty(3, np.int32)
    for bad in ([2, 1], [1, 1], [-1], [count]):
        with pytest.raises(ParquetFormatError, match="picks"):
            _pages.rle_pick(buf, 0, len(buf), bw, count, np.array(bad, np.int64), out, 1 << 33)
    with pytest.raises(ParquetFormatError, match="bounds outside"):
        _pages.rle_pick(buf, 0, len(buf), bw, count, np.zeros(4, np.int64), out, 1 << 33)


def level_runs(rng, count, zero_chance):
    """Definition levels as writers lay them out (RLE runs of 1, bit-packed groups), a 0 in a
    group or a run of 0 now and then."""
    buf, made = bytearray(), 0
    while made < count:
        if rng.random() < 0.5:
            n = int(rng.integers(1, 300))
            buf += _uleb(n << 1) + bytes([0 if rng.random() < zero_chance else 1])
            made += n
        else:
            groups = int(rng.integers(1, 20))
            bits = [0 if rng.random() < zero_chance / 8 else 1 for _ in range(groups * 8)]
            buf += _uleb(groups << 1 | 1) + int("".join(map(str, reversed(bits))), 2).to_bytes(groups, "little")
            made += groups * 8
    return np.frombuffer(bytes(buf), np.uint8), made


@pytest.mark.parametrize("seed", range(60))
def test_rle_all_says_what_the_decoded_values_say(seed):
    """`rle_all` is True exactly when `rle_hybrid` decodes the runs without an error and every
    value is the one asked: levels of pages with and without nulls, other widths, every cut."""
    rng = np.random.default_rng(5000 + seed)
    if seed % 3:
        buf, made = level_runs(rng, int(rng.integers(1, 3000)), [0.0, 0.02, 0.3][seed % 3])
        bw, value = 1, 1
    else:
        bw = int(rng.integers(0, 9))
        buf, made = random_runs(rng, bw, int(rng.integers(1, 500)))
        value = int(rng.integers(0, 1 << bw)) if bw else 0
    count = int(rng.integers(0, made + 1))
    for b in (buf, buf[:int(rng.integers(0, len(buf) + 1))].copy()):
        out = np.empty(count, np.int32)
        try:
            _pages.rle_hybrid(b, 0, len(b), bw, count, out, 1 << 33)
            want = bool((out.view(np.uint32) == value).all())
        except ParquetFormatError:
            want = False
        assert _pages.rle_all(b, 0, len(b), bw, count, value) == want
    assert not _pages.rle_all(buf, 0, len(buf) + 1, bw, count, value)  # bounds: refused, not read
    assert not _pages.rle_all(buf, 0, len(buf), 33, count, value)


def test_rle_pick_checks_each_value_read_against_the_limit():
    vals = [1] * 16
    vals[13] = 6
    bits = sum(v << (3 * i) for i, v in enumerate(vals))
    packed = np.frombuffer(_uleb(2 << 1 | 1) + bits.to_bytes(6, "little"), np.uint8)
    out = np.empty(2, np.int32)
    _pages.rle_pick(packed, 0, len(packed), 3, 16, np.array([0, 12], np.int64), out, 5)  # 6 not read
    assert out.tolist() == [1, 1]
    with pytest.raises(ParquetFormatError, match="value 6 is not below 5"):
        _pages.rle_pick(packed, 0, len(packed), 3, 16, np.array([0, 13], np.int64), out, 5)
    rle = np.frombuffer(_uleb(10 << 1) + bytes([5]), np.uint8)
    with pytest.raises(ParquetFormatError, match="not below 5"):  # an RLE run's value: checked as a run
        _pages.rle_pick(rle, 0, len(rle), 3, 10, np.array([2], np.int64), out, 5)


@pytest.mark.parametrize("seed", range(12))
def test_a_gather_of_a_window_equals_the_whole_pages_taken(seed, tmp_path):
    """chunk_values at sorted rows (a contiguous window, as a sorted column's filter keeps, or
    scattered; nulls at the edges and inside) equals every value decoded and then taken, for
    dictionary pages (only the picked indexes read, rle_pick) and PLAIN ones (byte arrays
    indexed up to the last pick), v1 and v2 pages."""
    rng = np.random.default_rng(4000 + seed)
    n = 3000
    ints = pa.array(rng.integers(0, 40, n), pa.int64(), mask=rng.random(n) < 0.2)
    strs = pa.array([None if m else f"s{v}" * int(v % 5) for v, m in zip(rng.integers(0, 30, n), rng.random(n) < 0.2)])
    dense = pa.array(rng.integers(0, 1 << 40, n), pa.int64())
    t = pa.table({"i": ints, "s": strs, "d": dense})
    path = tmp_path / "w.parquet"
    pq.write_table(t, path, use_dictionary=bool(seed % 2), data_page_version="2.0" if seed % 3 == 0 else "1.0",
                   data_page_size=int(rng.integers(2000, 20000)), compression="snappy")
    raw = path.read_bytes()
    md = pq.ParquetFile(path).metadata.row_group(0)
    for c in range(3):
        ch = md.column(c)
        start = ch.dictionary_page_offset if ch.has_dictionary_page else ch.data_page_offset
        blob = raw[start:start + ch.total_compressed_size]
        ptype = {"INT64": L.PT_INT64, "BYTE_ARRAY": L.PT_BYTE_ARRAY}[ch.physical_type]
        sp = pages.split_chunk(blob, ptype, L.CODEC_SNAPPY, 1, n)
        whole = pages.chunk_values(sp)
        a = int(rng.integers(0, n))
        for rows in (np.arange(a, min(n, a + int(rng.integers(1, 400))), dtype=np.int64),
                     np.sort(rng.choice(n, int(rng.integers(1, 50)), replace=False)).astype(np.int64),
                     np.array([n - 1], np.int64)):
            got = pages.chunk_values(sp, rows)
            col = t.column(c).take(pa.array(rows))
            if ptype == L.PT_BYTE_ARRAY:
                vals = [None if not v else bytes(got.data[got.offsets[k]:got.offsets[k + 1]])
                        for k, v in enumerate(np.ones(len(rows), bool) if got.valid is None else got.valid)]
                assert vals == [None if x is None else x.encode() for x in col.to_pylist()]
            else:
                valid = np.ones(len(rows), bool) if got.valid is None else got.valid
                assert [int(v) if ok else None for v, ok in zip(got.values, valid)] == col.to_pylist()
        assert (len(whole.offsets) - 1 if ptype == L.PT_BYTE_ARRAY else len(whole.values)) == n


@pytest.mark.parametrize("seed", range(40))
def test_rle_lookup_and_equals_the_reference(seed):
    """out &= lut[v] in one pass equals the reference's values looked up; a truncated stream gives
    the same or a clear error, never a read past the end."""
    rng = np.random.default_rng(2000 + seed)
    bw = int(rng.integers(0, 11))
    buf, made = random_runs(rng, bw, int(rng.integers(1, 2000)))
    count = int(rng.integers(0, made + 1))
    size = 1 << bw
    lut = (rng.random(size) < 0.5).astype(np.uint8)
    start = (rng.random(count) < 0.8).astype(np.uint8)
    want = start & lut[np.array(rle_reference(buf, 0, len(buf), bw, count), np.int64)] if count else start
    out = start.copy()
    _pages.rle_lookup_and(buf, 0, len(buf), bw, count, lut, out, size)
    assert out.tolist() == want.tolist()
    if count:
        cut = int(rng.integers(0, len(buf)))
        out = start.copy()
        try:
            _pages.rle_lookup_and(buf[:cut].copy(), 0, cut, bw, count, lut, out, size)
        except ParquetFormatError:
            pass
        else:
            assert out.tolist() == want.tolist()


@pytest.mark.parametrize("bw", range(1, 9))
def test_rle_lookup_and_packed_groups_per_width(bw):
    """The bit-packed body, specialised per width 1-8, against one value at a time: any LUT byte
    (ANDed as it is), a limit below 1 << bw, and a value at or over it named wherever it lies."""
    rng = np.random.default_rng(300 + bw)
    for trial in range(12):
        n = 8 * int(rng.integers(1, 40))
        limit = int(rng.integers(1, (1 << bw) + 1))
        vals = rng.integers(0, limit, n)
        bits = sum(int(v) << (bw * i) for i, v in enumerate(vals))
        packed = np.frombuffer(_uleb((n // 8) << 1 | 1) + bits.to_bytes(n * bw // 8, "little"), np.uint8)
        lut = rng.integers(0, 256, limit).astype(np.uint8)
        start = rng.integers(0, 256, n).astype(np.uint8)
        out = start.copy()
        _pages.rle_lookup_and(packed, 0, len(packed), bw, n, lut, out, limit)
        assert out.tolist() == (start & lut[vals]).tolist()
        if limit < 1 << bw:
            at = int(rng.integers(0, n))
            bad = vals.copy()
            bad[at] = int(rng.integers(limit, 1 << bw))
            bits = sum(int(v) << (bw * i) for i, v in enumerate(bad))
            packed = np.frombuffer(_uleb((n // 8) << 1 | 1) + bits.to_bytes(n * bw // 8, "little"), np.uint8)
            with pytest.raises(ParquetFormatError, match=f"value {bad[at]} is not below {limit}"):
                _pages.rle_lookup_and(packed, 0, len(packed), bw, n, lut, start.copy(), limit)


@pytest.mark.parametrize("bw", range(1, 7))
def test_rle_lookup_and_pairs_per_width(bw):
    """Widths 1-6 over enough values take two values per lookup (qdbpm_lut_pairs): several
    bit-packed runs and an RLE run between them against one value at a time, and a value at or
    over the limit named wherever it lies."""
    rng = np.random.default_rng(350 + bw)
    for trial in range(4):
        limit = int(rng.integers(1, (1 << bw) + 1))
        sizes = [8 * int(rng.integers(1, 800)) for _ in range(3)]
        sizes[0] = max(sizes[0], 8 * ((2 << (2 * bw)) // 8 + 1))  # the first run alone passes the threshold
        runs = [rng.integers(0, limit, n) for n in sizes]
        rle_value, rle_count = int(rng.integers(0, limit)), int(rng.integers(1, 100))

        def encode(runs):
            body = b""
            for i, vals in enumerate(runs):
                bits = sum(int(v) << (bw * j) for j, v in enumerate(vals))
                body += _uleb((len(vals) // 8) << 1 | 1) + bits.to_bytes(len(vals) * bw // 8, "little")
                if i == 0:
                    body += _uleb(rle_count << 1) + rle_value.to_bytes((bw + 7) // 8, "little")
            return np.frombuffer(body, np.uint8)

        vals = np.concatenate([runs[0], np.full(rle_count, rle_value), *runs[1:]])
        n = len(vals)
        # 0 / 1, as a filter's answers are (an RLE run only clears or keeps its rows)
        lut = rng.integers(0, 2, limit).astype(np.uint8)
        start = rng.integers(0, 2, n).astype(np.uint8)
        out = start.copy()
        packed = encode(runs)
        _pages.rle_lookup_and(packed, 0, len(packed), bw, n, lut, out, limit)
        assert out.tolist() == (start & lut[vals]).tolist()
        if limit < 1 << bw:
            r = int(rng.integers(0, 3))
            at = int(rng.integers(0, len(runs[r])))
            bad = [v.copy() for v in runs]
            bad[r][at] = int(rng.integers(limit, 1 << bw))
            packed = encode(bad)
            with pytest.raises(ParquetFormatError, match=f"value {bad[r][at]} is not below {limit}"):
                _pages.rle_lookup_and(packed, 0, len(packed), bw, n, lut, start.copy(), limit)


def test_rle_lookup_and_checks_every_value_and_its_bounds():
    # a long bit-packed run: a value over the limit is named wherever it lies (8-byte loads in
    # the run's body, shorter ones at its end), and the values under it are looked up
    for at in (0, 20, 63):
        vals = [1] * 64
        vals[at] = 6
        bits = sum(v << (3 * i) for i, v in enumerate(vals))
        packed = np.frombuffer(_uleb(8 << 1 | 1) + bits.to_bytes(24, "little"), np.uint8)
        with pytest.raises(ParquetFormatError, match="value 6 is not below 5"):
            _pages.rle_lookup_and(packed, 0, len(packed), 3, 64, np.ones(8, np.uint8), np.ones(64, np.uint8), 5)
        out = np.ones(64, np.uint8)
        lut = np.array([1, 0, 1, 1, 1, 1, 0, 1], np.uint8)
        _pages.rle_lookup_and(packed, 0, len(packed), 3, 64, lut, out, 7)
        assert out.tolist() == [int(lut[v]) for v in vals]
    vals = [1] * 16
    vals[13] = 6
    bits = sum(v << (3 * i) for i, v in enumerate(vals))
    packed = np.frombuffer(_uleb(2 << 1 | 1) + bits.to_bytes(6, "little"), np.uint8)
    lut = np.ones(8, np.uint8)
    with pytest.raises(ParquetFormatError, match="value 6 is not below 5"):
        _pages.rle_lookup_and(packed, 0, len(packed), 3, 16, lut, np.ones(16, np.uint8), 5)
    rle = np.frombuffer(_uleb(10 << 1) + bytes([5]), np.uint8)
    with pytest.raises(ParquetFormatError, match="not below 5"):
        _pages.rle_lookup_and(rle, 0, len(rle), 3, 10, lut, np.ones(10, np.uint8), 5)
    with pytest.raises(ParquetFormatError, match="bounds outside"):  # a limit past the table
        _pages.rle_lookup_and(rle, 0, len(rle), 3, 10, lut[:4], np.ones(10, np.uint8), 5)
    with pytest.raises(ParquetFormatError, match="bounds outside"):  # more values than out holds
        _pages.rle_lookup_and(rle, 0, len(rle), 3, 10, lut, np.ones(9, np.uint8), 8)
    with pytest.raises(ParquetFormatError, match="bit width 33"):
        _pages.rle_lookup_and(rle, 0, len(rle), 33, 10, lut, np.ones(10, np.uint8), 8)


def test_rle_hybrid_refuses_values_over_the_limit_and_bad_widths():
    buf = np.frombuffer(_uleb(10 << 1) + bytes([5]), np.uint8)
    out = np.empty(10, np.int32)
    with pytest.raises(ParquetFormatError, match="not below 5"):
        _pages.rle_hybrid(buf, 0, len(buf), 3, 10, out, 5)
    # bit-packed: the first value over the limit is named, wherever it lies in the run (the
    # kernel checks a run's largest value once), also in the tail the 8-byte loads cannot reach
    for at in (0, 7, 13, 15):
        vals = [1] * 16
        vals[at] = 6
        bits = sum(v << (3 * i) for i, v in enumerate(vals))
        packed = np.frombuffer(_uleb(2 << 1 | 1) + bits.to_bytes(6, "little"), np.uint8)
        with pytest.raises(ParquetFormatError, match="value 6 is not below 5"):
            _pages.rle_hybrid(packed, 0, len(packed), 3, 16, np.empty(16, np.int32), 5)
        _pages.rle_hybrid(packed, 0, len(packed), 3, 16, out16 := np.empty(16, np.int32), 7)
        assert out16.tolist() == vals
    with pytest.raises(ParquetFormatError, match="bit width 33"):
        _pages.rle_hybrid(buf, 0, len(buf), 33, 10, out, 5)
    with pytest.raises(ParquetFormatError):
        _pages.rle_hybrid(buf, 0, len(buf) + 1, 3, 10, out, 5)


def test_byte_array_index_and_take_check_every_span():
    values = [b"", b"a", b"hello", b"\x00\xff"]
    raw = b"".join(len(v).to_bytes(4, "little") + v for v in values)
    buf = np.frombuffer(raw, np.uint8)
    starts, lens = np.empty(4, np.int64), np.empty(4, np.int32)
    assert _pages.byte_array_index(buf, 0, len(buf), 4, starts, lens) == len(buf)
    offsets, data = _pages.take_bytes(buf, starts, lens, np.array([2, -1, 3, 2], np.int64))
    assert offsets.tolist() == [0, 5, 5, 7, 12] and data.tobytes() == b"hello\x00\xffhello"
    for cut in range(len(raw)):
        with pytest.raises(ParquetFormatError):
            _pages.byte_array_index(buf[:cut].copy(), 0, cut, 4, starts, lens)
    with pytest.raises(ParquetFormatError, match="outside"):
        _pages.take_bytes(buf, starts, lens, np.array([4], np.int64))
    lens[1] = 10**6
    with pytest.raises(ParquetFormatError, match="spans outside"):
        _pages.take_bytes(buf, starts, lens, None)


# --- corrupt chunks end as they do without the direct path --------------------------------------


def _outcome(root, where):
    try:
        return read_table(root, where=where)
    except PmError as e:
        return type(e)


@pytest.mark.parametrize("codec, seed", [("none", s) for s in range(12)] + [("zstd", s) for s in range(8)])
def test_corrupt_chunks_end_as_pyarrow_ends_them(tmp_path, codec, seed):
    # zstd: small pages, so a mutated frame meets zstandard first (codecs._zstd_small), then Arrow
    rng = np.random.default_rng(seed)
    t = source(seed).select(["k", "i32", "f64", "s", "ls", "dec"])
    root = tmp_path / "t"
    (root / "part=0").mkdir(parents=True)
    path = root / "part=0" / "data.parquet"
    pq.write_table(t, path, compression=codec, row_group_size=1500, store_decimal_as_integer=True,
                   data_page_version=("1.0", "2.0")[seed % 2], data_page_size=4096 if codec == "zstd" else None)
    qdbpm.generate(str(path))
    raw = bytearray(path.read_bytes())
    footer_start = len(raw) - 8 - int.from_bytes(raw[-8:-4], "little")
    for _ in range(int(rng.integers(1, 4))):  # chunk bytes only: the footer and _pm stay valid
        raw[int(rng.integers(4, footer_start))] = int(rng.integers(0, 256))
    path.write_bytes(bytes(raw))
    for where in (None, "k < 2000 AND s = 'w03'"):
        got, want = _outcome(str(root), where), _outcome(str(root), where) if False else None
        scan.DIRECT = False
        try:
            want = _outcome(str(root), where)
        finally:
            scan.DIRECT = True
        if isinstance(want, type):
            assert isinstance(got, type), (seed, where)  # pyarrow refuses: so does the read
        else:
            assert isinstance(got, pa.Table) and same(got, want), (seed, where)


def test_read_chunk_never_reads_past_a_truncated_or_mutated_chunk():
    t = source(3).select(["i32", "s", "ls", "f64"])
    buf = pa.BufferOutputStream()
    pq.write_table(t, buf, compression="none", row_group_size=N)
    raw = buf.getvalue().to_pybytes()
    md = pq.ParquetFile(pa.py_buffer(raw)).metadata
    rng = np.random.default_rng(0)
    for i in range(md.num_columns):
        c = md.row_group(0).column(i)
        off = c.dictionary_page_offset or c.data_page_offset
        blob = raw[off:off + c.total_compressed_size]
        ptype = {"INT32": 1, "DOUBLE": 5, "BYTE_ARRAY": 6}[c.physical_type]
        for trial in range(150):
            b = bytearray(blob)
            if trial % 3 == 0:
                b = b[:int(rng.integers(0, len(b)))]
            else:
                for _ in range(int(rng.integers(1, 5))):
                    b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
            rows = np.sort(rng.choice(N, 50, replace=False)).astype(np.int64) if trial % 2 else None
            try:
                pages.read_chunk(bytes(b), ptype, 0, 1, N, rows)
            except (ParquetFormatError, pages.Unsupported):
                pass


@pytest.mark.parametrize("where", [None, WHERES[0], WHERES[7]])
def test_every_unit_of_the_supported_files_is_decoded_directly(roots, monkeypatch, where):
    """The equality tests above would pass if every unit fell back to pyarrow: here none does."""
    results = []
    real = scan.Scan._decode_direct

    def spy(self, *a, **k):
        out = real(self, *a, **k)
        results.append(out is not None)
        return out

    monkeypatch.setattr(scan.Scan, "_decode_direct", spy)
    for name, root in roots.items():
        results.clear()
        read_table(root, ["k", "i32", "f64", "d", "s", "dec", "dec9", "bin"], where)
        assert results and all(results), (name, where, results)


def test_strings_that_are_not_utf8_read_as_pyarrow_reads_them(tmp_path):
    """pyarrow's reader returns a string column's bytes as stored, valid UTF-8 or not: so must we."""
    raw = pa.array([b"ok", b"\xff\xfe bad", None, b"fine"] * 50, pa.binary())
    s = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers(), raw.null_count)
    root = _unsupported_root(tmp_path / "utf8", pa.table({"k": np.arange(len(raw)), "s": s}))
    want = pq.read_table(os.path.join(root, "part=0", "data.parquet"))
    for where in (None, "k < 7"):
        got = read_table(root, ["k", "s"], where)
        assert got.column("s").type == pa.string()
        assert [x.as_buffer().to_pybytes() if x.is_valid else None for x in got.column("s")] == \
            [x.as_buffer().to_pybytes() if x.is_valid else None for x in want.column("s")][:got.num_rows]


def test_spark_written_files_read_directly_and_equal_pyarrow(spark, tmp_path):
    """Spark (parquet-mr) writes DECIMAL(<=18) as INT32 / INT64, dictionary pages with fallback,
    OPTIONAL columns with definition levels: the direct path reads them as pyarrow does."""
    from pyspark.sql import functions as F

    df = spark.range(0, 5000, numPartitions=1).select(
        F.col("id").alias("k"),
        (F.col("id") % 97).cast("int").alias("i"),
        F.when(F.col("id") % 11 == 0, None).otherwise(F.col("id") * 3).alias("l"),
        (F.col("id") / 7).alias("f"),
        (F.col("id") % 1000 / 8).cast("decimal(9,2)").alias("d9"),
        F.when(F.col("id") % 13 == 0, None).otherwise((F.col("id") * 1.0001).cast("decimal(18,4)")).alias("d18"),
        F.date_add(F.lit("2024-01-01").cast("date"), (F.col("id") % 300).cast("int")).alias("day"),
        F.when(F.col("id") % 5 == 0, None).otherwise(F.concat(F.lit("s"), (F.col("id") % 40).cast("string"))).alias("s"),
        F.concat(F.lit("unique-"), F.col("id").cast("string")).alias("u"),
    )
    out = str(tmp_path / "spark")
    df.coalesce(1).write.option("parquet.block.size", 64 * 1024).parquet(out)
    path = next(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".parquet"))
    root = tmp_path / "t" / "part=0"
    root.mkdir(parents=True)
    os.rename(path, root / "data.parquet")
    qdbpm.generate(str(root / "data.parquet"))
    want = pq.read_table(root / "data.parquet")
    for where in (None, "k < 1200 AND s = 's7'", "d9 > 50.5 OR d18 < 100", "day = DATE '2024-03-01'"):
        dataset = ds.dataset(str(root / "data.parquet"))
        expect = want if where is None else dataset.to_table(filter=to_arrow(where_text(where), dataset.schema))
        got = read_table(str(tmp_path / "t"), want.column_names, where)
        assert same(_sorted(got), _sorted(expect)), where
    with qdbpm.open_table(str(tmp_path / "t")) as t:
        pm = t.meta("part=0")
        assert pm.row_group_count > 1
        schemas = t.column_schemas("part=0")
        cols = list(range(pm.column_count))
        assert kinds(pm, list(range(pm.row_group_count)), cols, schemas, schemas.fields(pm, cols)) is not None


def test_a_forked_child_decodes_with_its_own_pool(roots, monkeypatch):
    """The shared decode pool is per process: a child forked after the parent used it would
    otherwise queue work on threads that do not exist in it, and hang."""
    import multiprocessing as mp

    monkeypatch.setattr(direct, "PARALLEL_BYTES", 0)  # every unit in lanes, the pool in use
    monkeypatch.setattr(direct, "LANES", 2)
    root = roots["pyarrow-snappy-v1-dict"]
    want = read_table(root, None, "k < 2000")  # the parent's pool is up (lanes run on it)
    assert pool._pool is not None
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as procs:
        rows = procs.apply_async(_child_rows, (root,)).get(timeout=60)
    assert rows == want.num_rows


def _child_rows(root):
    return read_table(root, None, "k < 2000").num_rows


@pytest.mark.parametrize("columns", [["k"], ["s"], ["f64", "s"], None])
def test_filtered_reads_in_lanes_equal_pyarrow(roots, monkeypatch, columns):
    """With every unit in lanes (the pool in use), a filtered read gathers its other columns
    on the pool while this thread filters; one other column goes to the pool alone. The rows
    are pyarrow's either way."""
    monkeypatch.setattr(direct, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(direct, "LANES", 2)
    submitted = []
    real = pool.executor

    class Spy:
        def submit(self, fn, *args):
            deal = getattr(fn, "__self__", None)  # a pool.Deal's helper, or a pool.Split's call
            submitted.append(deal.items if isinstance(deal, pool.Deal) else None)
            return real().submit(fn, *args)

    monkeypatch.setattr(pool, "executor", lambda: Spy())
    root = roots["pyarrow-snappy-v1-dict"]
    where = "i32 > 0 AND d >= DATE '2024-01-20'"
    path = os.path.join(root, "part=0", "data.parquet")
    dataset = ds.dataset(path)
    columns = columns or dataset.schema.names  # every file column (the hive key left out)
    want = dataset.to_table(columns=columns, filter=to_arrow(where_text(where), dataset.schema))
    got = read_table(root, columns, where)
    assert same(_sorted(got), _sorted(want))
    if len(columns) == 1:
        assert submitted == [[0]]  # the one other column, offered to the pool during the filter pass


def test_each_thread_decompresses_with_its_own_codec_objects():
    """Arrow's codecs may keep stream state in the object (zlib's: two threads sharing one gzip
    codec failed with "invalid distances set" or crashed, as lanes did on gzip pages, now read as
    streams): the codec objects left, ZSTD's for pages past zstandard's, are one per thread."""
    import threading

    from qdbpm.parquet import codecs
    from qdbpm.pm import layout as L

    data = bytes(range(256)) * 512
    assert len(data) >= codecs.ZSTD_SMALL
    payload = pa.Codec("zstd").compress(data, asbytes=True)
    seen = []

    def run():
        assert codecs.decompress(L.CODEC_ZSTD, payload, len(data)).tobytes() == data
        seen.append(codecs._codecs_here.objects["zstd"])

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run()
    assert len(seen) == 3 and len({id(c) for c in seen}) == 3


@pytest.mark.parametrize("where", [None, "k < 2000", "f64 > 0.5 OR s IS NULL"])
def test_every_writer_and_codec_reads_the_same_in_lanes(roots, monkeypatch, where):
    """Every unit in lanes (this thread and the pool decompressing at once), every codec: the
    rows are pyarrow's."""
    monkeypatch.setattr(direct, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(direct, "LANES", 2)
    for root in roots.values():
        assert same(_sorted(read_table(root, None, where)), _sorted(_reference(root, None, where))), root


def test_counts_a_page_cannot_hold_are_refused_before_anything_is_allocated():
    """A header's value count is checked against what the chunk and the bytes can hold before
    an index or level array of that many entries is made (a hostile count would otherwise ask
    for gigabytes first)."""
    with pytest.raises(ParquetFormatError, match="cannot fit in 8 bytes"):
        pages._byte_index(np.zeros(8, np.uint8), 0, 8, 2**31 - 1)
    blob = one_chunk(np.arange(100, dtype=np.int32), compression="none", use_dictionary=False)
    assert pages.read_chunk(blob, 1, 0, 1, 100).values.tolist() == list(range(100))
    with pytest.raises(ParquetFormatError, match="holds 100 values, its chunk 60 more"):
        pages.read_chunk(blob, 1, 0, 1, 60)


def test_a_gather_over_row_groups_builds_one_array_equal_to_each_row_groups(roots):
    """Kept rows of several row groups (one of them keeping none) are joined and built once;
    the values equal each row group's own build, for every column kind of every writer."""
    for name, root in roots.items():
        with qdbpm.open_table(root) as t:
            pm = t.meta(t.partitions[0])
            fields = t.column_schemas(t.partitions[0]).fields(pm, list(range(pm.column_count)))
            rgs = list(range(pm.row_group_count))
            assert len(rgs) >= 2, name
            cols = list(range(pm.column_count))
            ks = kinds(pm, rgs, cols, t.column_schemas(t.partitions[0]), fields)
            assert ks is not None, name
            blobs = {}
            for r in rgs:
                for c in cols:
                    ch = pm.chunks[r, c]
                    with open(os.path.join(root, t.partitions[0], "data.parquet"), "rb") as f:
                        f.seek(int(ch["byte_range_start"]))
                        blobs[(r, c)] = f.read(int(ch["total_compressed"]))
            rng = np.random.default_rng(3)
            picks = [np.flatnonzero(rng.random(int(pm.num_rows[r])) < 0.1).astype(np.int64) for r in rgs]
            picks[-1] = np.zeros(0, np.int64)
            all_null = set(plan(pm, rgs, cols).all_null)
            for c, f, k in zip(cols, fields, ks):
                splits = direct._splits(pm, rgs, c, blobs, all_null)
                got = direct._column(pm, rgs, c, f, k, splits, picks)
                each = [direct._column(pm, [r], c, f, k, [s], [p]) for r, s, p in zip(rgs, splits, picks)]
                want = pa.chunked_array([x for e in each for x in e.chunks], f.type)
                if None not in splits:
                    assert got.num_chunks == 1, (name, f.name)
                assert same(pa.table({"x": got}), pa.table({"x": want})), (name, f.name)
