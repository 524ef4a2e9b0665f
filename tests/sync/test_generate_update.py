"""qdbpm.update on external files (UNUSED_BYTES by hand, filters for new row groups) and the
streaming writer generate uses (byte-identical to encode_file)."""

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import col
from qdbpm.parquet import compact as T
from qdbpm.parquet.build import frame_footer
from qdbpm.parquet.splice import rebase_row_group
from qdbpm.bloom.sbbf import SplitBlockBloomFilter
from qdbpm.errors import PmError
from qdbpm.sync.generate import generate, update

from conftest import read_bytes as file_bytes
from support.generate_checks import check_pm
from support.parquet_oracle import footer_meta

# --- update: UNUSED_BYTES of external files, by hand -----------------------------------------------------


def grow(path, table, *, replace_last=False):
    """Append `table` as new row groups after the footer, with the thrift builders (independent of
    qdbpm.append); with replace_last, the file's last row group is rewritten there too and the new
    footer lists the copy in its place (QuestDB's O3 merge). Returns the dead bytes this adds."""
    data = file_bytes(path)
    f_off, f_len, meta = footer_meta(data)
    s, _ = T.decode_struct(meta)
    rgs = s.get(T.FMD_ROW_GROUPS).values
    out = bytearray(data)
    dead = f_len + 8
    if replace_last:
        last = rgs[-1]
        cols = last.get(T.RG_COLUMNS).values
        start = min(cc.get(T.CC_META_DATA).get(11) or cc.get(T.CC_META_DATA).get(9) for cc in cols)
        end = max((cc.get(T.CC_META_DATA).get(11) or cc.get(T.CC_META_DATA).get(9)) + cc.get(T.CC_META_DATA).get(7)
                  for cc in cols)
        copy, _ = T.decode_struct(T.encode_struct(last))
        rebase_row_group(copy, len(out) - start)
        out += data[start:end]
        rgs[-1] = copy
        dead += sum(cc.get(T.CC_META_DATA).get(7) for cc in cols)
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    new = buf.getvalue().to_pybytes()
    n_off, _, n_meta = footer_meta(new)
    n, _ = T.decode_struct(n_meta)
    delta = len(out) - 4
    for rg in n.get(T.FMD_ROW_GROUPS).values:
        rgs.append(rebase_row_group(rg, delta))
    out += new[4:n_off]
    s.set(T.FMD_NUM_ROWS, T.T.I64, sum(rg.get(T.RG_NUM_ROWS) for rg in rgs))
    with open(path, "wb") as f:
        f.write(bytes(out) + frame_footer(T.encode_struct(s)))
    return dead


def piece(lo, n):
    return pa.table({"a": np.arange(lo, lo + n, dtype=np.int64), "s": [f"v{i}" for i in range(lo, lo + n)]})


def test_update_unused_bytes_by_hand(tmp_path):
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(piece(0, 100), path, row_group_size=50)
    generate(path, pm)
    snaps = [os.path.getsize(path)]
    expect = 0
    with qdbpm.open(pm) as m:
        assert m.unused_bytes == 0
    for k, replace in enumerate([False, True, False, True]):
        old_size = os.path.getsize(path)
        old_footer_len = int.from_bytes(file_bytes(path)[-8:-4], "little")
        with qdbpm.open(pm) as m:
            last = m.chunks[m.row_group_count - 1]
            replaced = int(last["total_compressed"].sum()) if replace else 0
        dead = grow(path, piece(1000 * (k + 1), 30), replace_last=replace)
        # By hand: the old footer + its u32 length + PAR1, plus the replaced chunks.
        assert dead == old_footer_len + 8 + replaced
        expect += old_footer_len + 8 + replaced
        update(path, pm)
        snaps.append(os.path.getsize(path))
        with qdbpm.open(pm) as m:
            assert m.unused_bytes == expect
            assert m.snapshots() == snaps[::-1]
        check_pm(pm, path)
        assert old_size < os.path.getsize(path)
    # A second update without a change adds nothing.
    update(path, pm)
    with qdbpm.open(pm) as m:
        assert m.unused_bytes == expect
    for size in snaps:
        with qdbpm.open(pm, parquet_size=size):
            pass
        check_pm(pm, path, parquet_size=size)
    assert pq.read_table(path).num_rows == 100 + 4 * 30


def test_update_copies_and_builds_filters_for_new_row_groups(tmp_path):
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(piece(0, 100), path, row_group_size=50, bloom_filter_options={"a": True})
    generate(path, pm, bloom_columns=["s"])
    grow(path, piece(500, 40))  # written without filters
    update(path, pm)
    with qdbpm.open(pm) as m:
        assert m.row_group_count == 3
        assert [m.column_names[int(b)] for b in m.bloom_columns] == ["a", "s"]
        # The file has no filter for 'a' in the new row group: qdbpm builds one; 's' too.
        for name, values in (("a", np.arange(500, 540)), ("s", [f"v{i}" for i in range(500, 540)])):
            assert SplitBlockBloomFilter.from_bytes(m.bloom_filter(2, name)).contains(values).all()
        assert not m.prune(col("a") == 520).tolist()[:2] == [True, True]
        assert m.prune(col("a") == 520)[2]


def test_update_refuses_fewer_row_groups(tmp_path):
    path, pm = str(tmp_path / "data.parquet"), str(tmp_path / "_pm")
    pq.write_table(piece(0, 100), path, row_group_size=50)
    generate(path, pm)
    pq.write_table(piece(0, 100), path, row_group_size=100)
    with pytest.raises(PmError, match="fewer"):
        update(path, pm)


# --- the streaming writer ----------------------------------------------------------------------------


def test_streamed_pm_is_byte_identical_to_encode_file(tmp_path, monkeypatch):
    """write_new streams a large file piece by piece (writeback started per piece), dense or
    with out-of-line stats and filters: the same bytes as encode_file; a small one in one write."""
    from qdbpm.pm import encoder, fileops, writer

    class Counting(fileops.FileOps):
        def __init__(self):
            self.calls = []

        def pwrite(self, fd, data, offset):
            self.calls.append(("pwrite", offset, len(data)))
            super().pwrite(fd, data, offset)

        def start_writeback(self, fd, offset, length):
            self.calls.append(("writeback", offset, length))
            super().start_writeback(fd, offset, length)

    monkeypatch.setattr(writer, "STREAM_PIECE_BYTES", 4096)
    n = 400
    short = pa.table({"a": np.arange(n), "ts": pa.array(np.arange(n) * 1000, pa.timestamp("us")),
                      "s": [f"v{i % 9}" for i in range(n)]})
    long = short.append_column("long", pa.array([f"a long string value {i}" for i in range(n)]))
    for name, table, kw, streamed in (("short", short, {}, True), ("long", long, {}, True),
                                      ("bloom", short, {"bloom_filter_options": {"a": {"ndv": 10}}}, True),
                                      ("small", short.slice(0, 20), {}, False),
                                      ("small long", long.slice(0, 20), {}, False)):
        path, pm = str(tmp_path / f"{name}.parquet"), str(tmp_path / f"_pm.{name}")
        pq.write_table(table, path, row_group_size=1, **kw)
        ops = Counting()
        size = generate(path, pm, ops=ops)
        want = encoder.encode_file(generate_description(path))
        assert file_bytes(pm) == want and size == len(want), name
        kinds = [c[0] for c in ops.calls]
        assert (kinds.count("writeback") >= 3) == streamed and (kinds.count("pwrite") > 3) == streamed, name
        # The pieces tile the file: every byte written exactly once.
        writes = sorted((o, o + k) for kind, o, k in ops.calls if kind == "pwrite")
        assert writes[0][0] == 0 and writes[-1][1] == len(want)
        assert all(a[1] == b[0] for a, b in zip(writes, writes[1:]))
        check_pm(pm, path)


def generate_description(path):
    """The Description generate() writes for `path` (bloom="inline"), rebuilt independently."""
    import dataclasses

    from qdbpm.sync.generate import describe_footer, parquet_blooms
    from qdbpm.parquet.footer import read_footer

    with open(path, "rb") as f:
        footer = read_footer(f)
        d = describe_footer(footer)
        blooms = parquet_blooms(f, footer, range(footer.row_group_count), range(footer.column_count), False)
    if blooms is not None:
        have = sorted(np.nonzero((blooms.length >= 0).any(axis=0))[0].tolist())
        d = dataclasses.replace(d, blooms=blooms, bloom_columns=have)
    return d
