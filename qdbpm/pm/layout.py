"""The on-disk layout of `_pm`: the only module that knows offsets, sizes and flag bits.

Everything is little-endian. Dtypes carry explicit '<' so views are correct on any host.
Spec of record: docs/format.md (its tables mirror the dtypes below).
"""

import numpy as np


# --- fixed-size records --------------------------------------------------------------------

HEADER_DTYPE = np.dtype(
    [
        ("pm_size", "<u8"),
        ("feature_flags", "<u8"),
        ("designated_timestamp", "<i4"),
        ("sorting_column_count", "<u4"),
        ("column_count", "<u4"),
        ("reserved", "<u4"),
    ]
)

COLUMN_DTYPE = np.dtype(
    [
        ("name_offset", "<u8"),
        ("id", "<i4"),
        ("type", "<i4"),
        ("flags", "<i4"),
        ("fixed_byte_len", "<i4"),
        ("name_length", "<u4"),
        ("physical_type", "u1"),
        ("max_rep_level", "u1"),
        ("max_def_level", "u1"),
        ("reserved", "u1"),
    ]
)

CHUNK_DTYPE = np.dtype(
    [
        ("codec", "u1"),
        ("encodings", "u1"),
        ("stat_flags", "u1"),
        ("stat_sizes", "u1"),
        ("reserved", "<u4"),
        ("num_values", "<u8"),
        ("byte_range_start", "<u8"),
        ("total_compressed", "<u8"),
        ("null_count", "<u8"),
        ("distinct_count", "<u8"),
        ("min_stat", "<u8"),
        ("max_stat", "<u8"),
    ]
)

FOOTER_DTYPE = np.dtype(
    [
        ("parquet_footer_offset", "<u8"),
        ("parquet_footer_length", "<u4"),
        ("row_group_count", "<u4"),
        ("unused_bytes", "<u8"),
        ("prev_pm_size", "<u8"),
        ("footer_feature_flags", "<u8"),
    ]
)

HEADER_SIZE = HEADER_DTYPE.itemsize  # 32
COLUMN_SIZE = COLUMN_DTYPE.itemsize  # 32
CHUNK_SIZE = CHUNK_DTYPE.itemsize  # 64
FOOTER_FIXED_SIZE = FOOTER_DTYPE.itemsize  # 40
SORTING_COLUMN_SIZE = 4
ROW_GROUP_ENTRY_SIZE = 4
BLOCK_NUM_ROWS_SIZE = 8
CRC_SIZE = 4
TRAILER_SIZE = 4
BLOCK_ALIGN = 8
BLOCK_OFFSET_SHIFT = 3  # footer entries and inline bloom offsets store offset >> 3
BLOOM_INLINE_ENTRY_SIZE = 4  # u32 offset >> 3
BLOOM_EXTERNAL_ENTRY_SIZE = 16  # (u64 offset, u64 length) into the Parquet file
BLOOM_LENGTH_PREFIX = 4  # i32 LENGTH before an inline bitset
SBBF_BLOCK_BYTES = 32
# The probe kernels compute a block as ((h >> 32) * nblocks) >> 32, which needs nblocks <= 2**32.
SBBF_MAX_BLOCKS = 1 << 32
SBBF_MAX_BYTES = SBBF_BLOCK_BYTES * SBBF_MAX_BLOCKS  # the largest filter the kernels probe
OOL_LENGTH_BITS = 16  # OOL reference = (offset << 16) | length
OOL_MAX_LENGTH = (1 << OOL_LENGTH_BITS) - 1
PM_SIZE_OFFSET = 0
PM_SIZE_BYTES = 8
CRC_START = 8  # the CRC covers [8, crc_field): everything but the committed size
PARQUET_TAIL = 8  # u32 footer length + "PAR1" after the Parquet footer
MIN_COMMITTED_SIZE = HEADER_SIZE + TRAILER_SIZE  # 36
SCRATCHPAD_MAX_BYTES = 1 << 20

for _dt, _size in ((HEADER_DTYPE, 32), (COLUMN_DTYPE, 32), (CHUNK_DTYPE, 64), (FOOTER_DTYPE, 40)):
    assert _dt.itemsize == _size, _dt


def _field_offsets(dtype) -> dict:
    return {name: dtype.fields[name][1] for name in dtype.names}


# Byte offset of each field inside its record: where error messages point and raw reads go.
HEADER_AT = _field_offsets(HEADER_DTYPE)
COLUMN_AT = _field_offsets(COLUMN_DTYPE)
CHUNK_AT = _field_offsets(CHUNK_DTYPE)
FOOTER_AT = _field_offsets(FOOTER_DTYPE)

# Variable-length sections: u32 counts, u32 column indices, (u32 code, u32 length) entry heads.
BLOOM_COL_COUNT_SIZE = 4
BLOOM_COLUMN_SIZE = 4
SCRATCHPAD_COUNT_SIZE = 4
SCRATCHPAD_ENTRY_HEAD_SIZE = 8

# File names of a partition directory: the Parquet file and its `_pm` beside it.
PM_FILE_NAME = "_pm"
PARQUET_FILE_NAME = "data.parquet"


def column_field_offset(column: int, field: str) -> int:
    """Absolute offset of one field of a column descriptor."""
    return HEADER_SIZE + COLUMN_SIZE * column + COLUMN_AT[field]


def chunk_field_offset(block_offset: int, column: int, field: str) -> int:
    """Absolute offset of one field of a chunk record in the block at `block_offset`."""
    return block_offset + BLOCK_NUM_ROWS_SIZE + CHUNK_SIZE * column + CHUNK_AT[field]


def block_size(column_count: int) -> int:
    """Bytes of a row group block before its out-of-line region."""
    return BLOCK_NUM_ROWS_SIZE + CHUNK_SIZE * column_count


def min_footer_size(row_group_count: int) -> int:
    """Footer bytes through the CRC with no feature sections."""
    return FOOTER_FIXED_SIZE + ROW_GROUP_ENTRY_SIZE * row_group_count + CRC_SIZE


def align8(n: int) -> int:
    return (n + BLOCK_ALIGN - 1) & ~(BLOCK_ALIGN - 1)


def parquet_size(parquet_footer_offset: int, parquet_footer_length: int) -> int:
    """The snapshot token: the Parquet file size a footer describes."""
    return parquet_footer_offset + parquet_footer_length + PARQUET_TAIL


# --- header feature flags (file-wide) --------------------------------------------------------

FEATURE_BLOOM_FILTERS = 1 << 0
FEATURE_BLOOM_FILTERS_EXTERNAL = 1 << 1
FEATURE_SORTING_IS_DTS_ASC = 1 << 2
FEATURE_SQUASH_TRACKER = 1 << 3
KNOWN_HEADER_FEATURES = (
    FEATURE_BLOOM_FILTERS
    | FEATURE_BLOOM_FILTERS_EXTERNAL
    | FEATURE_SORTING_IS_DTS_ASC
    | FEATURE_SQUASH_TRACKER
)

# --- footer feature flags (per snapshot) ----------------------------------------------------

FOOTER_FEATURE_SEQ_TXN = 1 << 0
FOOTER_FEATURE_SCRATCHPAD = 1 << 1
KNOWN_FOOTER_FEATURES = FOOTER_FEATURE_SEQ_TXN | FOOTER_FEATURE_SCRATCHPAD

OPTIONAL_FEATURE_MASK = 0x0000_0000_FFFF_FFFF  # bits 0..31: unknown ones may be ignored
REQUIRED_FEATURE_MASK = 0xFFFF_FFFF_0000_0000  # bits 32..63: unknown ones reject

SQUASH_TRACKER_SIZE = 8  # i64
SEQ_TXN_SIZE = 8  # i64

# --- column flags ---------------------------------------------------------------------------

COLUMN_FLAG_LOCAL_KEY_IS_GLOBAL = 1 << 0
COLUMN_FLAG_IS_ASCII = 1 << 1
COLUMN_FLAG_REPETITION_SHIFT = 2
COLUMN_FLAG_REPETITION_MASK = 0b11 << COLUMN_FLAG_REPETITION_SHIFT
COLUMN_FLAG_DESCENDING = 1 << 4

REPETITION_REQUIRED = 0
REPETITION_OPTIONAL = 1
REPETITION_REPEATED = 2
REPETITION_NAMES = {0: "required", 1: "optional", 2: "repeated"}


def column_flags(*, repetition=REPETITION_OPTIONAL, descending=False, ascii=False, local_key_is_global=False):
    return (
        (COLUMN_FLAG_LOCAL_KEY_IS_GLOBAL if local_key_is_global else 0)
        | (COLUMN_FLAG_IS_ASCII if ascii else 0)
        | (repetition << COLUMN_FLAG_REPETITION_SHIFT)
        | (COLUMN_FLAG_DESCENDING if descending else 0)
    )


def flags_repetition(flags: int) -> int:
    return (flags & COLUMN_FLAG_REPETITION_MASK) >> COLUMN_FLAG_REPETITION_SHIFT


# --- chunk STAT_FLAGS -----------------------------------------------------------------------

STAT_MIN_PRESENT = 1 << 0
STAT_MIN_INLINED = 1 << 1
STAT_MIN_EXACT = 1 << 2
STAT_MAX_PRESENT = 1 << 3
STAT_MAX_INLINED = 1 << 4
STAT_MAX_EXACT = 1 << 5
STAT_DISTINCT_COUNT_PRESENT = 1 << 6
STAT_NULL_COUNT_PRESENT = 1 << 7
STAT_MIN_BITS = STAT_MIN_PRESENT | STAT_MIN_INLINED | STAT_MIN_EXACT
STAT_MAX_BITS = STAT_MAX_PRESENT | STAT_MAX_INLINED | STAT_MAX_EXACT
INLINE_STAT_MAX = 8  # payloads of 1..8 bytes live in the u64 slot


STAT_SIZES_MAX_SHIFT = 4  # STAT_SIZES: low nibble the min's inline length, high nibble the max's


def stat_sizes(min_len: int, max_len: int) -> int:
    """STAT_SIZES byte: low nibble min inline length, high nibble max inline length."""
    return (min_len & 0xF) | ((max_len & 0xF) << STAT_SIZES_MAX_SHIFT)


# --- Parquet enums as stored in _pm ---------------------------------------------------------

CODEC_UNCOMPRESSED = 0
CODEC_SNAPPY = 1
CODEC_GZIP = 2
CODEC_LZO = 3
CODEC_BROTLI = 4
CODEC_LZ4 = 5
CODEC_ZSTD = 6
CODEC_LZ4_RAW = 7
CODEC_MAX = 7
CODEC_NAMES = ["UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"]

ENC_PLAIN = 1 << 0
ENC_RLE_DICTIONARY = 1 << 1
ENC_DELTA_BINARY_PACKED = 1 << 2
ENC_DELTA_LENGTH_BYTE_ARRAY = 1 << 3
ENC_DELTA_BYTE_ARRAY = 1 << 4
ENC_BYTE_STREAM_SPLIT = 1 << 5
ENCODING_BIT_NAMES = [
    "PLAIN",
    "RLE_DICTIONARY",
    "DELTA_BINARY_PACKED",
    "DELTA_LENGTH_BYTE_ARRAY",
    "DELTA_BYTE_ARRAY",
    "BYTE_STREAM_SPLIT",
]
PT_BOOLEAN = 0
PT_INT32 = 1
PT_INT64 = 2
PT_INT96 = 3
PT_FLOAT = 4
PT_DOUBLE = 5
PT_BYTE_ARRAY = 6
PT_FIXED_LEN_BYTE_ARRAY = 7
PHYSICAL_TYPE_NAMES = [
    "BOOLEAN",
    "INT32",
    "INT64",
    "INT96",
    "FLOAT",
    "DOUBLE",
    "BYTE_ARRAY",
    "FIXED_LEN_BYTE_ARRAY",
]
PHYSICAL_TYPE_MAX = 7
# Bytes of the PLAIN value of each fixed-width physical type (BOOLEAN stats are 1 byte).
PHYSICAL_WIDTH = {PT_BOOLEAN: 1, PT_INT32: 4, PT_INT64: 8, PT_INT96: 12, PT_FLOAT: 4, PT_DOUBLE: 8}

# --- QuestDB column types (TYPE & 0xFF) -----------------------------------------------------

QDB_BOOLEAN = 1
QDB_BYTE = 2
QDB_SHORT = 3
QDB_CHAR = 4
QDB_INT = 5
QDB_LONG = 6
QDB_DATE = 7
QDB_TIMESTAMP = 8
QDB_FLOAT = 9
QDB_DOUBLE = 10
QDB_STRING = 11
QDB_SYMBOL = 12
QDB_LONG256 = 13
QDB_GEOBYTE = 14
QDB_GEOSHORT = 15
QDB_GEOINT = 16
QDB_GEOLONG = 17
QDB_BINARY = 18
QDB_UUID = 19
QDB_LONG128 = 24
QDB_IPV4 = 25
QDB_VARCHAR = 26
QDB_ARRAY = 27
QDB_DECIMAL8 = 28
QDB_DECIMAL16 = 29
QDB_DECIMAL32 = 30
QDB_DECIMAL64 = 31
QDB_DECIMAL128 = 32
QDB_DECIMAL256 = 33

# Flag bits carried in the full 32-bit TYPE code.
QDB_TYPE_TAG_MASK = 0xFF
QDB_FLAG_DESIGNATED_TIMESTAMP = 1 << 17
QDB_FLAG_TIMESTAMP_NANOS = 1 << 18
QDB_FLAG_DESCENDING = 1 << 20
QDB_FLAG_GEOHASH = 1 << 16
QDB_GEOHASH_BITS_SHIFT = 8
QDB_DECIMAL_PRECISION_SHIFT = 8
QDB_DECIMAL_SCALE_SHIFT = 18
QDB_ARRAY_ELEMENT_SHIFT = 8
QDB_ARRAY_DIMS_SHIFT = 14
QDB_TIMESTAMP_NS = QDB_TIMESTAMP | QDB_FLAG_TIMESTAMP_NANOS  # 262152


def qdb_type_tag(type_code: int) -> int:
    """The type tag of a full TYPE code, -1 for "no QuestDB type" (names and meanings: qdb_types)."""
    return type_code & QDB_TYPE_TAG_MASK if type_code >= 0 else -1


# --- dtype views over raw bytes -------------------------------------------------------------

U32 = np.dtype("<u4")
U64 = np.dtype("<u8")
I32 = np.dtype("<i4")
I64 = np.dtype("<i8")
BLOOM_EXTERNAL_DTYPE = np.dtype([("offset", "<u8"), ("length", "<u8")])
assert BLOOM_EXTERNAL_DTYPE.itemsize == BLOOM_EXTERNAL_ENTRY_SIZE
