"""Every check of docs/format.md#validation: build the bad file, check the class and the message."""

import os
import struct
import zlib

import pytest

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.errors import ChecksumError, CorruptFileError, SnapshotNotFoundError, UnsupportedFeatureError

from conftest import GOLDEN, golden, write_bytes
from support.fuzz import fix_crc
from support.golden_cases import EXAMPLE_A, EXAMPLE_B


def patch(data, offset, value: bytes, crc=True):
    out = bytearray(data)
    out[offset : offset + len(value)] = value
    return bytes(fix_crc(out)) if crc else bytes(out)  # with the CRC right, the structural check is what fails


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def expect(tmp_path, data, cls, *fragments, **kw):
    path = str(tmp_path / "_pm")
    write_bytes(path, data)
    with pytest.raises(cls) as info:
        qdbpm.open(path, **kw).close()
    msg = str(info.value)
    assert type(info.value) is cls, f"{type(info.value).__name__}: {msg}"
    assert path in msg
    for frag in fragments:
        assert frag in msg, msg
    return msg


A = EXAMPLE_A  # 1 column at 32, name at 64, block at 72, footer at 144, crc at 188


def test_file_shorter_than_header(tmp_path):
    expect(tmp_path, A[:20], CorruptFileError, "20 bytes", "32-byte header")


def test_committed_size_below_minimum(tmp_path):
    expect(tmp_path, patch(A, 0, u64(35), crc=False), CorruptFileError, "offset 0 = 35", "minimum 36")


def test_committed_size_beyond_file(tmp_path):
    expect(tmp_path, patch(A, 0, u64(10_000), crc=False), CorruptFileError, "offset 0 = 10000", "larger than the file (196 bytes)")


def test_truncated_file(tmp_path):
    expect(tmp_path, A[:150], CorruptFileError, "offset 0 = 196", "150 bytes")


def test_unknown_required_header_bit(tmp_path):
    msg = expect(tmp_path, patch(A, 8, u64(1 << 40)), UnsupportedFeatureError, "0x0000010000000000", "offset 8")
    assert "required" in msg


def test_unknown_optional_header_bit_is_tolerated(tmp_path):
    path = str(tmp_path / "_pm")
    write_bytes(path, patch(A, 8, u64(1 << 20)))
    with qdbpm.open(path) as pm:
        assert pm.feature_flags == 1 << 20 and pm.row_group_count == 1


def test_unknown_required_footer_bit(tmp_path):
    expect(tmp_path, patch(A, 144 + 32, u64(1 << 33)), UnsupportedFeatureError, "FOOTER_FEATURE_FLAGS", "0x0000000200000000")


def test_column_count_past_end(tmp_path):
    expect(tmp_path, patch(A, 24, u32(0xFFFFFFFF)), CorruptFileError, "COLUMN_COUNT at offset 24 = 4294967295", "past")


def test_sorting_count_past_end(tmp_path):
    expect(tmp_path, patch(A, 20, u32(1000)), CorruptFileError, "SORTING_COLUMN_COUNT at offset 20 = 1000")


def test_sorting_column_index_out_of_range(tmp_path):
    data = golden("ool_stats.pm")  # 4 columns, one sorting column at 32 + 128
    expect(tmp_path, patch(data, 160, u32(9)), CorruptFileError, "sorting column 0 at offset 160 = 9")


def test_external_bloom_bit_without_bloom_bit(tmp_path):
    expect(tmp_path, patch(A, 8, u64(L.FEATURE_BLOOM_FILTERS_EXTERNAL)), CorruptFileError, "bit 1", "without BLOOM_FILTERS")


def test_dts_asc_without_designated_timestamp(tmp_path):
    expect(tmp_path, patch(A, 8, u64(L.FEATURE_SORTING_IS_DTS_ASC)), CorruptFileError, "SORTING_IS_DTS_ASC", "no designated timestamp")


@pytest.mark.parametrize("dts", [1, 7, -2])
def test_designated_timestamp_out_of_range(tmp_path, dts):
    expect(tmp_path, patch(A, 16, struct.pack("<i", dts)), CorruptFileError, f"DESIGNATED_TIMESTAMP at offset 16 = {dts}", "[-1, 1)")


def test_name_pointer_inside_descriptors(tmp_path):
    expect(tmp_path, patch(A, 32, u64(40)), CorruptFileError, "NAME_OFFSET at offset 32 = 40", "inside the descriptors")


def test_name_past_end(tmp_path):
    expect(tmp_path, patch(A, 32, u64(193)), CorruptFileError, "name at 193", "past the committed size 196")
    expect(tmp_path, patch(A, 56, u32(1 << 30)), CorruptFileError, "NAME_LENGTH 1073741824")


def test_invalid_utf8_name(tmp_path):
    expect(tmp_path, patch(A, 64, b"\xff\xfe"), CorruptFileError, "column 0 name at offset 64", "invalid UTF-8")


def test_repetition_value_3(tmp_path):
    expect(tmp_path, patch(A, 48, struct.pack("<i", 3 << 2)), CorruptFileError, "FLAGS at offset 48 = 0xc", "repetition value 3")


def test_physical_type_out_of_range(tmp_path):
    expect(tmp_path, patch(A, 60, b"\x09"), CorruptFileError, "PHYSICAL_TYPE at offset 60 = 9")


@pytest.mark.parametrize("width", [0, -16])
def test_fixed_len_byte_array_without_a_width(tmp_path, width):
    # inline_bloom.pm column 1 is a UUID on FIXED_LEN_BYTE_ARRAY(16); pruning encodes literals at the width
    at = 32 + 32 * 1 + 20
    expect(tmp_path, patch(bloom_file(), at, struct.pack("<i", width)), CorruptFileError,
           f"column 1 FIXED_BYTE_LEN at offset {at} = {width}", "positive width")


BLOOM = None


def bloom_file():
    # inline_bloom.pm: 4 columns; names end at 187; bloom section [u32 2][2, 3] at 187..199
    return golden("inline_bloom.pm")


def test_bloom_column_count_zero_or_too_many(tmp_path):
    expect(tmp_path, patch(bloom_file(), 175, u32(0)), CorruptFileError, "BLOOM_COL_COUNT at offset 175 = 0", "1..4")
    expect(tmp_path, patch(bloom_file(), 175, u32(5)), CorruptFileError, "BLOOM_COL_COUNT at offset 175 = 5")


def test_bloom_column_index_out_of_range(tmp_path):
    expect(tmp_path, patch(bloom_file(), 183, u32(4)), CorruptFileError, "bloom column index 4", "not < 4")


def test_bloom_columns_not_ascending(tmp_path):
    expect(tmp_path, patch(bloom_file(), 179, u32(3)), CorruptFileError, "not strictly ascending", "[3, 3]")


def test_trailer_larger_than_file(tmp_path):
    expect(tmp_path, patch(A, 192, u32(500), crc=False), CorruptFileError, "FOOTER_LENGTH trailer at offset 192 = 500", "larger")


def test_footer_inside_header(tmp_path):
    expect(tmp_path, patch(A, 192, u32(170), crc=False), CorruptFileError, "footer offset 22", "inside the 32-byte header")


def test_footer_shorter_than_its_row_groups(tmp_path):
    # ROW_GROUP_COUNT 3 needs 40 + 12 + 4 = 56 bytes but the footer is 48.
    expect(tmp_path, patch(A, 144 + 12, u32(3)), CorruptFileError, "ROW_GROUP_COUNT at offset 156 = 3", "at least 56 bytes", "48")


def test_absurd_row_group_count_fails_fast(tmp_path):
    expect(tmp_path, patch(A, 144 + 12, u32(0xFFFFFFFF)), CorruptFileError, "ROW_GROUP_COUNT", "4294967295")


def _with_extra_footer_bytes(data, extra: bytes, footer_flags=None):
    """Insert bytes before the CRC of the latest footer and fix trailer, size and CRC."""
    size = int.from_bytes(data[:8], "little")
    flen = int.from_bytes(data[size - 4 : size], "little")
    start = size - 4 - flen
    body = bytearray(data[start : size - 8]) + extra
    if footer_flags is not None:
        body[32:40] = u64(footer_flags)
    out = bytearray(data[:start]) + body
    crc = zlib.crc32(bytes(out[8:]))
    out += u32(crc) + u32(len(body) + 4)
    out[0:8] = u64(len(out))
    return bytes(out)


def test_unexplained_footer_bytes(tmp_path):
    expect(tmp_path, _with_extra_footer_bytes(A, b"\0" * 8), CorruptFileError, "8 bytes between", "no feature flag explains them")


def test_footer_bytes_explained_by_unknown_optional_flag(tmp_path):
    path = str(tmp_path / "_pm")
    write_bytes(path, _with_extra_footer_bytes(A, b"\0" * 8, footer_flags=1 << 9))
    with qdbpm.open(path) as pm:
        assert pm.footer_feature_flags == 1 << 9


def test_section_past_crc(tmp_path):
    # SEQ_TXN flagged but no room for its i64
    expect(tmp_path, patch(A, 144 + 32, u64(L.FOOTER_FEATURE_SEQ_TXN)), CorruptFileError, "SEQ_TXN at offset 188", "past the CRC")
    # scratchpad whose entry length runs past the CRC
    bad = _with_extra_footer_bytes(A, u32(1) + u32(7) + u32(1000), footer_flags=L.FOOTER_FEATURE_SCRATCHPAD)
    expect(tmp_path, bad, CorruptFileError, "scratchpad entry 0", "length 1000")
    # bloom table past the CRC: the bloom file's latest footer claims more row groups than fit
    data = bloom_file()
    size = len(data)
    flen = int.from_bytes(data[size - 4 :], "little")
    start = size - 4 - flen
    rgc = int.from_bytes(data[start + 12 : start + 16], "little")
    expect(tmp_path, patch(data, start + 12, u32(rgc + 4)), CorruptFileError, "bloom table", "past the CRC")


def test_block_offset_outside_file(tmp_path):
    expect(tmp_path, patch(A, 184, u32(1000)), CorruptFileError, "row group 0 BLOCK_OFFSET at offset 184 -> 8000")
    # a block too short to hold 8 + 64 * ncols before the footer
    expect(tmp_path, patch(A, 184, u32(17)), CorruptFileError, "BLOCK_OFFSET", "-> 136", "72-byte block")
    # a block overlapping the header
    expect(tmp_path, patch(A, 184, u32(1)), CorruptFileError, "-> 8", "within [69, 144)")


def test_blocks_sharing_bytes(tmp_path):
    # ool_stats.pm: 3 row groups; row group 2's block moved onto row group 0's, then 8 bytes past it
    data = golden("ool_stats.pm")
    with qdbpm.open(os.path.join(GOLDEN, "ool_stats.pm")) as pm:
        entries_at, blocks = pm.footer_offset + 40, pm.block_offsets.tolist()
    for moved in (blocks[0], blocks[0] + 8):
        expect(tmp_path, patch(data, entries_at + 8, u32(moved >> 3)), CorruptFileError,
               "row groups 0 and 2 have overlapping blocks", f"offsets {blocks[0]} and {moved}", "264 bytes",
               verify=False)


def test_codec_out_of_range(tmp_path):
    expect(tmp_path, patch(A, 80, b"\x08"), CorruptFileError, "CODEC at offset 80 = 8", "0..7")


def test_ool_stat_reference_out_of_range(tmp_path):
    data = golden("ool_stats.pm")
    with qdbpm.open(os.path.join(GOLDEN, "ool_stats.pm")) as pm:
        chunk_at = int(pm.block_offsets[0]) + 8 + 64 * 1
    expect(tmp_path, patch(data, chunk_at + 48, u64((5000 << 16) | 16)), CorruptFileError,
           "row group 0 column 1", f"offset {chunk_at + 48}", "offset 5000, length 16")


def test_inline_stat_size_over_8(tmp_path):
    data = golden("ool_stats.pm")
    with qdbpm.open(os.path.join(GOLDEN, "ool_stats.pm")) as pm:
        chunk_at = int(pm.block_offsets[0]) + 8
    expect(tmp_path, patch(data, chunk_at + 3, b"\x9f"), CorruptFileError, "STAT_SIZES", "inline MIN of 15 bytes")


def test_inline_bloom_reference_out_of_range(tmp_path):
    data = bloom_file()
    with qdbpm.open(os.path.join(GOLDEN, "inline_bloom.pm")) as pm:
        table_at = pm.footer_offset + 40 + 4 * pm.row_group_count
    expect(tmp_path, patch(data, table_at, u32(10_000)), CorruptFileError, "row group 0 bloom column 2", "offset 80000")
    # LENGTH prefix that runs past the footer
    with qdbpm.open(os.path.join(GOLDEN, "inline_bloom.pm")) as pm:
        at = int(pm.bloom_table[0, 0]) << 3
    expect(tmp_path, patch(data, at, struct.pack("<i", 1 << 20)), CorruptFileError, "inline bitset", f"offset {at}")
    expect(tmp_path, patch(data, at, struct.pack("<i", -32)), CorruptFileError, "inline bitset")


def test_external_bloom_entry_out_of_range(tmp_path):
    data = golden("external_bloom.pm")
    with qdbpm.open(os.path.join(GOLDEN, "external_bloom.pm")) as pm:
        table_at = pm.footer_offset + 40 + 4 * pm.row_group_count
    expect(tmp_path, patch(data, table_at, u64(1 << 50)), CorruptFileError, "external bloom entry")
    expect(tmp_path, patch(data, table_at + 8, u64(0)), CorruptFileError, "external bloom entry", "length 0")


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("length", [33, 16, 48, 0x7FFFFFE0 + 1])
def test_inline_bloom_length_not_a_multiple_of_32(tmp_path, length, verify):
    # The SBBF kernels take whole 32-byte blocks: a LENGTH of 33 used to reach them and raise
    # a bare ValueError on prune, with or without the CRC check.
    with qdbpm.open(os.path.join(GOLDEN, "inline_bloom.pm")) as pm:
        at = int(pm.bloom_table[0, 0]) << 3
    expect(tmp_path, patch(bloom_file(), at, struct.pack("<i", length), crc=verify), CorruptFileError,
           "row group 0 bloom column 2", f"inline bitset at offset {at} has LENGTH {length}",
           "not a positive multiple of 32", verify=verify)


@pytest.mark.parametrize("length", [33, 8, (1 << 37) + 32])
def test_external_bloom_length_not_a_kernel_size(tmp_path, length):
    # a multiple of 32, at most 2**32 blocks (the kernels' block index is 32-bit)
    data = golden("external_bloom.pm")
    with qdbpm.open(os.path.join(GOLDEN, "external_bloom.pm")) as pm:
        ft, table_at = pm.footer_offset, pm.footer_offset + 40 + 4 * pm.row_group_count
    bad = patch(patch(data, ft, u64(1 << 50)), table_at + 8, u64(length))  # room for any length
    expect(tmp_path, bad, CorruptFileError, "row group 0 bloom column 2", f"length {length})",
           "not a multiple of 32 up to 137438953472", verify=False)


def test_external_bloom_entry_end_past_2_63(tmp_path):
    # offset + length wraps a signed 64-bit sum negative: compared unsigned, it is past the footer
    data = golden("external_bloom.pm")
    with qdbpm.open(os.path.join(GOLDEN, "external_bloom.pm")) as pm:
        table_at = pm.footer_offset + 40 + 4 * pm.row_group_count
    off = (1 << 63) - 16
    expect(tmp_path, patch(data, table_at, u64(off)), CorruptFileError, f"(offset {off}, length 32)",
           "is not inside the Parquet data before its footer")


def test_checksum_mismatch_message(tmp_path):
    bad = patch(A, 100, b"\x01", crc=False)
    msg = expect(tmp_path, bad, ChecksumError, "checksum mismatch: stored 0x4d402cf8, computed 0x")
    assert issubclass(ChecksumError, CorruptFileError)
    assert msg.count("0x") >= 2


@pytest.mark.parametrize("name", ["example_a.pm", "example_b.pm", "inline_bloom.pm", "scratchpad.pm"])
def test_every_single_byte_flip_is_a_checksum_error(tmp_path, name):
    data = golden(name)
    path = str(tmp_path / "_pm")
    size = len(data)
    crc_at = size - 8
    for pos in range(8, crc_at):
        for flip in (0x01, 0x80):
            bad = bytearray(data)
            bad[pos] ^= flip
            write_bytes(path, bytes(bad))
            with pytest.raises(ChecksumError):
                qdbpm.open(path)


def test_verify_false_skips_only_the_crc(tmp_path):
    path = str(tmp_path / "_pm")
    write_bytes(path, patch(A, 100, b"\x01", crc=False))
    with qdbpm.open(path, verify=False) as pm:
        assert pm.row_group_count == 1
    write_bytes(path, patch(A, 80, b"\x08", crc=False))
    with pytest.raises(CorruptFileError, match="CODEC"):
        qdbpm.open(path, verify=False)


def test_prev_chain_loop_fails_fast(tmp_path):
    # B's latest footer PREV -> 196; make it point at itself (328) and beyond.
    for prev in (328, 400, 196 + 1000):
        bad = patch(EXAMPLE_B, 272 + 24, u64(prev))
        expect(tmp_path, bad, CorruptFileError, "PREV_PARQUET_META_FILE_SIZE", f"= {prev}", "loop", parquet_size=12345)


def test_prev_chain_pointing_into_garbage(tmp_path):
    bad = patch(EXAMPLE_B, 272 + 24, u64(100))
    expect(tmp_path, bad, CorruptFileError, "FOOTER_LENGTH trailer at offset 96", parquet_size=12345)


def test_snapshot_not_found(tmp_path):
    msg = expect(tmp_path, EXAMPLE_B, SnapshotNotFoundError, "no snapshot for Parquet size 77", "[288, 8]", parquet_size=77)
    assert issubclass(SnapshotNotFoundError, ValueError)


def test_error_classes_follow_the_contract():
    assert issubclass(qdbpm.PmError, ValueError)
    for cls in (CorruptFileError, UnsupportedFeatureError, SnapshotNotFoundError, qdbpm.ParquetFormatError):
        assert issubclass(cls, qdbpm.PmError)
    assert issubclass(qdbpm.StorageError, OSError)


def test_missing_file_is_an_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        qdbpm.open(str(tmp_path / "nope"))
