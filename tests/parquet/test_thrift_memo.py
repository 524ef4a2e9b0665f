"""The footer kernel's row group memo: a value whose bytes repeat the same column's value in the
previous row group (encodings, encoding_stats, size_statistics, ...) is taken without a second
parse. Whatever the bytes, a row group must then parse exactly as it does with nothing before
it: each row group of a (mutated) footer is checked against a footer holding that row group
alone, where no memo exists."""

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import _thrift
from qdbpm.parquet import compact as T
from qdbpm.parquet.footer import parse_footer

from conftest import read_bytes as file_bytes
from support.parquet_oracle import compare_thrift, footer_of

def _pyarrow_file(tmp_path):
    n = 8 * 50
    rng = np.random.default_rng(5)
    table = pa.table({
        "i": np.arange(n, dtype=np.int64),
        "k": rng.integers(0, 4, n).astype(np.int32),
        "s": pa.array([f"name-{i % 37:04d}-{'x' * (i % 11)}" for i in range(n)]),
        "d": rng.random(n),
        "b": rng.random(n) < 0.5,
        "o": pa.array([None if i % 3 else i for i in range(n)], pa.int64()),
    })
    path = str(tmp_path / "pa.parquet")
    # Dictionary for some columns only: neighbouring columns list other encodings.
    pq.write_table(table, path, row_group_size=50, use_dictionary=["k", "s"], write_page_index=True)
    return path


def _duckdb_file(tmp_path):
    path = str(tmp_path / "duck.parquet")
    duckdb.connect().execute(
        f"COPY (SELECT range AS i, range % 5 AS k, 'v' || (range % 13) AS s FROM range(16384)) "
        f"TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 2048)")
    return path


class _Footers(list):
    def __repr__(self):  # hypothesis prints the fixture with a failing case
        return f"<{len(self)} footers>"


@pytest.fixture(scope="module")
def footers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("memo")
    out = _Footers()
    for make in (_pyarrow_file, _duckdb_file):
        _, meta = footer_of(file_bytes(make(tmp)))
        fmd, _ = T.decode_struct(meta)
        rgs = fmd.get(4).values
        assert len(rgs) >= 6
        first, last = rgs[0].span[0], rgs[-1].span[1]
        blobs = [meta[rg.span[0]:rg.span[1]] for rg in rgs]
        start4 = next(s for fid, _, s, _ in T.top_fields(meta) if fid == 4)
        out.append((meta[:start4], blobs, meta[last:]))
        assert meta[start4:first] == _list_header(len(blobs))
        # The writers repeat each column's encodings and encoding_stats row group after row
        # group (the memo's case), and neighbouring columns list other encodings.
        enc = parse_footer(meta).encodings_raw
        assert (enc == enc[0]).all() and len(set(enc[0].tolist())) > 1
    return out


def _list_header(n):
    """The header of a list of n structs (type 12), as a Thrift writer puts it."""
    e = T.Encoder()
    e.coll_header(n, 12)
    return bytes(e.out)


def _footer(head, blobs, tail):
    return head + _list_header(len(blobs)) + b"".join(blobs) + tail


def _row(out, r, base):
    """Row group r's per-chunk outputs, footer positions made relative to `base`."""
    C = out["C"]
    chunks = np.asarray(out["chunks"]).reshape(-1, 64)[r * C:(r + 1) * C]
    i64 = out["i64"][:, r].copy()
    k = list(_thrift.I64_FIELDS).index("statistics_offset")
    i64[k] = np.where(i64[k] >= 0, i64[k] - base, i64[k])
    spans = out["spans"][:, r].copy()
    spans[0] = np.where(spans[1] > 0, spans[0] - base, spans[0])
    return (chunks.tobytes(), i64.tolist(), spans.tolist(), out["encodings_raw"][r].tolist(),
            out["physical_types"][r].tolist(), out["rg"][:, r].tolist())


def _check_alone(meta, head, blobs, tail):
    """Every row group of `meta` (parsed whole) equals its parse with nothing before it."""
    whole = _thrift.parse_file_metadata(np.frombuffer(meta, np.uint8))
    for r, (s, e) in enumerate(whole["rg_spans"].tolist()):
        alone_meta = head + _list_header(1) + meta[s:e] + tail
        alone = _thrift.parse_file_metadata(np.frombuffer(alone_meta, np.uint8))
        s1 = int(alone["rg_spans"][0, 0])
        assert _row(whole, r, s) == _row(alone, 0, s1), f"row group {r}"
    return whole


def test_unmutated_footers_match_the_generic_decoder_and_their_row_groups_alone(footers):
    for head, blobs, tail in footers:
        meta = _footer(head, blobs, tail)
        compare_thrift(parse_footer(meta))
        _check_alone(meta, head, blobs, tail)


def _check_row(meta, head, tail, r):
    """Row group r of `meta`, when the whole footer parses, equals its parse alone."""
    try:
        whole = _thrift.parse_file_metadata(np.frombuffer(meta, np.uint8))
    except ParquetFormatError:
        return False
    s, e = whole["rg_spans"][r].tolist()
    alone = _thrift.parse_file_metadata(np.frombuffer(head + _list_header(1) + meta[s:e] + tail, np.uint8))
    assert _row(whole, r, s) == _row(alone, 0, int(alone["rg_spans"][0, 0])), f"row group {r}"
    return True


def test_a_field_of_another_wire_type_is_not_taken_from_the_memo(footers):
    """Row group 1 repeats row group 0 byte for byte but for one field header's type nibble: the
    value bytes after it match the memo, yet they mean something else under another type."""
    for head, blobs, tail in footers:
        b0, b1 = blobs[0], blobs[1]
        parsed = 0
        for j in range(len(b1)):
            if not b1[j] >> 4 or not 1 <= b1[j] & 0x0F <= 12:
                continue  # not a short field header
            for t in range(1, 13):
                b = bytearray(b1)
                b[j] = b1[j] & 0xF0 | t
                # The rest of row group 1 as row group 0 has it from here on, where they align.
                tail1 = b0[j + 1:] if len(b0) > j and b0[:j] == b1[:j] else b1[j + 1:]
                parsed += _check_row(_footer(head, [b0, bytes(b[:j + 1]) + tail1] + blobs[2:], tail), head, tail, 1)
        assert parsed > 100  # enough of the changes parse for the comparison to mean something


@settings(max_examples=300)
@given(st.data())
def test_mutated_row_groups_parse_as_they_do_alone(footers, data):
    which = data.draw(st.integers(0, len(footers) - 1))
    head, blobs, tail = footers[which]
    blobs = list(blobs)
    r = data.draw(st.integers(1, len(blobs) - 1))
    for _ in range(data.draw(st.integers(1, 4))):
        t = data.draw(st.sampled_from([r, r, r - 1]))
        b = bytearray(blobs[t])
        i = data.draw(st.integers(0, len(b) - 1))
        b[i] = data.draw(st.sampled_from([b[i] ^ 1, b[i] ^ 0x80, 0x00, 0x15, 0x19, 0x2C, 0xFF,
                                          data.draw(st.integers(0, 255))]))
        blobs[t] = bytes(b)
    if data.draw(st.booleans()):  # or row group r repeats r - 1 up to a point, then differs
        k = data.draw(st.integers(0, min(len(blobs[r]), len(blobs[r - 1]))))
        blobs[r] = blobs[r - 1][:k] + blobs[r][k:]
    meta = _footer(head, blobs, tail)
    try:
        _check_alone(meta, head, blobs, tail)
    except ParquetFormatError:
        pass


@settings(max_examples=150)
@given(st.data())
def test_value_mutations_agree_with_the_generic_decoder(footers, data):
    """Mutations that keep every varint one byte long keep the structure, so the generic decoder
    reads the same fields: every chunk field must agree with it, memo hit or not."""
    head, blobs, tail = footers[data.draw(st.integers(0, len(footers) - 1))]
    blobs = list(blobs)
    for _ in range(data.draw(st.integers(1, 6))):
        r = data.draw(st.integers(0, len(blobs) - 1))
        b = bytearray(blobs[r])
        # A one-byte varint after a short i32 field header or an i32 list header (0x?5).
        spots = [j + 1 for j in range(len(b) - 1) if b[j] & 0x0F == 5 and b[j] >> 4 and b[j + 1] < 0x40]
        if not spots:
            continue
        j = data.draw(st.sampled_from(spots))
        b[j] = 2 * data.draw(st.integers(0, 31))  # zigzag: 0..31, never a negative encoding
        blobs[r] = bytes(b)
    meta = _footer(head, blobs, tail)
    try:
        f = parse_footer(meta)
    except ParquetFormatError:
        return
    compare_thrift(f)
