"""Hostile `_pm` bytes: only PmError subclasses, never another exception, crash or hang; memory
stays proportional to the file whatever its counts claim."""

import glob
import os
import struct

import numpy as np
import pytest

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.errors import CorruptFileError, PredicateError
from support.fuzz import fix_crc, hostile_allocation_ok, run, with_footer
from qdbpm.pm.encoder import encode_file

from conftest import GOLDEN, read_bytes

SEEDS = [read_bytes(p) for p in sorted(glob.glob(os.path.join(GOLDEN, "*.pm")))]


# Fixed seeds and counts: the same mutants on every machine. Each run opens ~4,000 mutants, then
# uses every accessor and prunes every column (== and IN probe the bloom filters).
@pytest.mark.parametrize("verify,seed", [(True, 1), (False, 2)])
def test_mutated_pm_files_raise_only_pm_errors(verify, seed):
    tally = {}
    counts = run(SEEDS, 4000, seed=seed, verify=verify, tally=tally)  # a non-PmError propagates
    # The mutants reach past the CRC into the structural checks, some stay valid, and the valid
    # ones reach pruning and the bloom kernels.
    assert counts.get("ok", 0) > 200 and counts.get("CorruptFileError", 0) > 2000, counts
    assert (counts.get("ChecksumError", 0) > 300) == verify, counts
    assert tally["prunes"] > 5000 and tally["bloom_prunes"] > 200 and tally["bloom_indexes"] > 100, tally


@pytest.mark.parametrize("field_at,width", [(24, 4), (20, 4)])
def test_hostile_counts_do_not_allocate(tmp_path, field_at, width):
    """A header claiming 4 billion columns or sorting columns allocates nothing proportional."""
    data = bytearray(SEEDS[0])
    data[field_at : field_at + width] = b"\xff" * width
    peak = hostile_allocation_ok(bytes(fix_crc(data)), str(tmp_path / "_pm"))
    assert peak < 2 * 1024 * 1024


def test_hostile_row_group_count_does_not_allocate(tmp_path):
    data = bytearray(SEEDS[0])
    size = int.from_bytes(data[:8], "little")
    footer = size - 4 - int.from_bytes(data[size - 4 : size], "little")
    data[footer + 12 : footer + 16] = b"\xff\xff\xff\xff"
    peak = hostile_allocation_ok(bytes(fix_crc(data)), str(tmp_path / "_pm"))
    assert peak < 2 * 1024 * 1024


def _append_footer(data: bytes, block_entries) -> bytes:
    """`data` with a new latest footer whose row groups are `block_entries` (u32 offsets >> 3),
    the first footer's fixed fields otherwise: blocks placed by hand, past the writer's checks."""
    with qdbpm.ParquetMeta("<seed>", data=data) as pm:
        fixed = bytearray(pm._footer.fixed.tobytes())
    fixed[12:16] = struct.pack("<I", len(block_entries))
    return with_footer(data, bytes(fixed) + np.asarray(block_entries, "<u4").tobytes())


def test_shared_blocks_do_not_allocate(tmp_path):
    """2,048 row groups all naming one 256-column block: 34 MB of chunk records (and 270 MB of
    gather indexes) from a 40 KB file, unless the reader rejects blocks that share bytes."""
    cols = [qdbpm.Column(f"c{i}", type=L.QDB_LONG, id=i, physical_type=L.PT_INT64) for i in range(256)]
    d = qdbpm.Description.from_row_groups(cols, [{"num_rows": 1, "chunks": None}],
                                          parquet_footer_offset=4, parquet_footer_length=10)
    data = encode_file(d)
    with qdbpm.ParquetMeta("<seed>", data=data) as pm:
        block = int(pm.block_offsets[0]) >> L.BLOCK_OFFSET_SHIFT
    bomb = _append_footer(data, [block] * 2048)
    path = str(tmp_path / "_pm")
    peak = hostile_allocation_ok(bomb, path)
    assert peak < 2 * 1024 * 1024
    with pytest.raises(CorruptFileError, match="row groups 0 and 1 have overlapping blocks"):
        qdbpm.open(path, verify=False)


def test_retyped_designated_timestamp_is_a_predicate_error(tmp_path):
    """dts_asc.pm's designated timestamp retyped to VARCHAR on BYTE_ARRAY: a valid file whose
    timestamp bounds are byte strings, so a timestamp lookup has nothing to search."""
    data = bytearray(read_bytes(os.path.join(GOLDEN, "dts_asc.pm")))
    at = L.HEADER_SIZE  # column 0 is the designated timestamp
    data[at + 12 : at + 16] = struct.pack("<i", L.QDB_VARCHAR)
    data[at + 28] = L.PT_BYTE_ARRAY
    path = str(tmp_path / "_pm")
    with open(path, "wb") as f:
        f.write(fix_crc(data))
    with qdbpm.open(path) as pm:
        with pytest.raises(PredicateError, match="designated timestamp column 0 has bytes stats"):
            pm.timestamp_find(1_700_000_000_000_500)
        with pytest.raises(PredicateError, match="designated timestamp column 0"):
            pm.timestamp_range(0, 10)


def _external(tmp_path, entries, parquet_bytes, parquet_footer_offset=None):
    """external_bloom.pm with its bloom table set to `entries` ((offset, length) per row group
    for column 2; column 3 absent), beside a data.parquet of `parquet_bytes`."""
    data = bytearray(read_bytes(os.path.join(GOLDEN, "external_bloom.pm")))
    with qdbpm.ParquetMeta("<seed>", data=bytes(data)) as pm:
        ft = pm.footer_offset
        at = ft + 40 + 4 * pm.row_group_count
        assert pm.bloom_columns.tolist() == [2, 3] and pm.row_group_count == len(entries)
    for r, (off, ln) in enumerate(entries):
        data[at + 32 * r : at + 32 * r + 32] = struct.pack("<QQQQ", off, ln, 0, 0)
    if parquet_footer_offset is not None:
        data[ft : ft + 8] = struct.pack("<Q", parquet_footer_offset)
    (tmp_path / "data.parquet").write_bytes(parquet_bytes)
    (tmp_path / "_pm").write_bytes(fix_crc(data))
    return qdbpm.open(str(tmp_path / "_pm"))


def test_external_blooms_shared_and_overlapping_ranges(tmp_path):
    """Entries may share or overlap bytes: each filter still reads exactly its own range."""
    parquet = np.random.default_rng(3).integers(0, 256, 8192, np.uint8).tobytes()
    entries = [(5000, 64), (5000, 64), (5032, 96)]
    with _external(tmp_path, entries, parquet) as pm:
        data, offsets, lengths = pm.bloom_index(2)
        got = [bytes(data[o : o + n]) for o, n in zip(offsets.tolist(), lengths.tolist())]
        assert got == [parquet[o : o + n] for o, n in entries]
        assert len(data) == 5128 - 5000  # the union, read once
        assert pm.bloom_index(3) is None


def test_external_blooms_past_the_parquet_file_are_unused(tmp_path):
    """Entries (valid against PARQUET_FOOTER_OFFSET) beyond the data.parquet actually there: no
    bloom pruning, and no read of the claimed 64 GiB, nor a seek to an offset past 2**63."""
    for entries in ([(5000, 1 << 36), (0, 0), (5000, 32)], [(5000, 32), (0, 0), (1 << 63, 32)]):
        with _external(tmp_path, entries, bytes(6000), parquet_footer_offset=(1 << 64) - 1) as pm:
            assert pm.bloom_ref(0, 2) == entries[0]
            assert pm.bloom_index(2) is None
            assert pm.prune(qdbpm.col("sym") == "AAPL").all()
