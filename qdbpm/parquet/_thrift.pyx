# cython: language_level=3
"""Kernel: Parquet FileMetaData (Thrift compact protocol) straight into columnar arrays.

One pass over the footer bytes and no Python object per column chunk: chunks land as `_pm` chunk
records (layout.CHUNK_DTYPE) plus int64 / uint8 arrays of shape (R, C), and min/max statistics
stay where they are, as (start, length) spans into the footer. Every read is checked against the
end of the buffer, varints stop at 10 bytes, nesting stops at MAX_DEPTH and no list may claim
more elements than there are bytes left, so no input can read out of bounds, allocate absurdly
or recurse without limit. Errors raise ParquetFormatError naming the problem and the footer byte
(and the file offset, when known).

Per chunk the kernel also checks what it alone sees cheaply: types and paths repeat row group 0's,
offsets and sizes are not negative, the codec is known, and (footer offset given) every range lies
in the data region. A column's value that repeats the previous row group's bytes exactly
(encodings, encoding_stats, size_statistics) is taken from a memo instead of parsed again
(`same_as`). The row group loop runs without the GIL: its primitives are plain C that
record the first error and return -1, raised once back with the GIL. The arrays are allocated
here, in one block, because their sizes are only known mid-stream (R from the row group list
header, C from the first row group's column list). The schema tree and its cross checks are
qdbpm.parquet's job.
"""

cimport cython
from cpython.mem cimport PyMem_RawFree, PyMem_RawRealloc
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memset

import numpy as np

from ..errors import ParquetFormatError

cdef enum:
    MAX_DEPTH = 64

# Compact protocol type nibbles.
cdef enum:
    CT_STOP = 0
    CT_TRUE = 1
    CT_FALSE = 2
    CT_BYTE = 3
    CT_I16 = 4
    CT_I32 = 5
    CT_I64 = 6
    CT_DOUBLE = 7
    CT_BINARY = 8
    CT_LIST = 9
    CT_SET = 10
    CT_MAP = 11
    CT_STRUCT = 12

_TYPE_NAMES = ("stop", "bool", "bool", "byte", "i16", "i32", "i64", "double", "binary", "list",
               "set", "map", "struct")

# The wire type each struct expects per field id (parquet.thrift), as a mask over type nibbles:
# as in Apache Thrift, a known id carrying another type is skipped like an unknown id and then
# counts as absent (older writers used ids the spec later gave another meaning). One table per
# struct, so the check costs one compare per field; ids past a table (or W_ANY) are not checked.
cdef enum:
    W_BOOL = (1 << CT_TRUE) | (1 << CT_FALSE)  # a bool's value is its nibble: both mean "bool"
    W_BYTE = 1 << CT_BYTE
    W_I16 = 1 << CT_I16
    W_I32 = 1 << CT_I32
    W_I64 = 1 << CT_I64
    W_BIN = 1 << CT_BINARY
    W_LIST = 1 << CT_LIST
    W_STRUCT = 1 << CT_STRUCT
    W_ANY = 0xFFFF
cdef uint16_t FMD_W[10]   # FileMetaData; 8/9 (encryption) are checked so a mistyped one is absent
FMD_W[:] = [W_ANY, W_I32, W_LIST, W_I64, W_LIST, W_LIST, W_BIN, W_LIST, W_STRUCT, W_BIN]
cdef uint16_t RG_W[8]     # RowGroup
RG_W[:] = [W_ANY, W_LIST, W_I64, W_I64, W_LIST, W_I64, W_I64, W_I16]
cdef uint16_t CC_W[10]    # ColumnChunk
CC_W[:] = [W_ANY, W_BIN, W_I64, W_STRUCT, W_I64, W_I32, W_I64, W_I32, W_STRUCT, W_BIN]
cdef uint16_t CMD_W[16]   # ColumnMetaData
CMD_W[:] = [W_ANY, W_I32, W_LIST, W_LIST, W_I32, W_I64, W_I64, W_I64, W_LIST, W_I64, W_I64, W_I64,
            W_STRUCT, W_LIST, W_I64, W_I32]
cdef uint16_t ST_W[10]    # Statistics
ST_W[:] = [W_ANY, W_BIN, W_BIN, W_I64, W_I64, W_BIN, W_BIN, W_BOOL, W_BOOL, W_I64]
cdef uint16_t SE_W[11]    # SchemaElement
SE_W[:] = [W_ANY, W_I32, W_I32, W_I32, W_BIN, W_I32, W_I32, W_I32, W_I32, W_I32, W_STRUCT]
cdef uint16_t KV_W[3]     # KeyValue
KV_W[:] = [W_ANY, W_BIN, W_BIN]
cdef uint16_t SC_W[4]     # SortingColumn
SC_W[:] = [W_ANY, W_I32, W_BOOL, W_BOOL]
# Logical type members, by union id: DecimalType (5), TimeType (7), TimestampType (8), IntType
# (10), VariantType (16), GeometryType (17), GeographyType (18); fields 1 and 2 of each.
cdef uint16_t LT_W[19][3]
LT_W[5][:] = [W_ANY, W_I32, W_I32]
LT_W[7][:] = [W_ANY, W_BOOL, W_STRUCT]
LT_W[8][:] = [W_ANY, W_BOOL, W_STRUCT]
LT_W[10][:] = [W_ANY, W_BYTE, W_BOOL]
LT_W[16][:] = [W_ANY, W_BYTE, W_ANY]
LT_W[17][:] = [W_ANY, W_BIN, W_ANY]
LT_W[18][:] = [W_ANY, W_BIN, W_I32]


cdef enum:
    LIST_OF_STRUCT = CT_LIST | CT_STRUCT << 4  # E_MISSING's expected type: nibble | element << 4


cdef inline bint mistyped(const uint16_t* want, int n, int64_t fid, int ttype) noexcept nogil:
    """A known field id whose wire type is not the one its struct declares."""
    return <uint64_t>fid < <uint64_t>n and not (want[fid] >> ttype) & 1

# The `_pm` chunk record (layout.CHUNK_DTYPE), written in place: one cache line per chunk.
# Fields are native-endian; qdbpm.parquet checks the layout against CHUNK_DTYPE at import and
# byte-swaps on a big-endian host.
cdef struct ChunkRec:
    uint8_t codec
    uint8_t encodings
    uint8_t stat_flags
    uint8_t stat_sizes
    uint32_t reserved
    uint64_t num_values
    uint64_t byte_range_start
    uint64_t total_compressed
    uint64_t null_count
    uint64_t distinct_count
    uint64_t min_stat
    uint64_t max_stat

CHUNK_LAYOUT = (
    ("codec", 0, 1), ("encodings", 1, 1), ("stat_flags", 2, 1), ("stat_sizes", 3, 1),
    ("reserved", 4, 4), ("num_values", 8, 8), ("byte_range_start", 16, 8),
    ("total_compressed", 24, 8), ("null_count", 32, 8), ("distinct_count", 40, 8),
    ("min_stat", 48, 8), ("max_stat", 56, 8),
)
assert sizeof(ChunkRec) == 64

# Other int64 per-chunk fields: the (N_I64, R, C) block; -1 = absent.
I64_FIELDS = (
    "total_uncompressed", "data_page_offset", "dictionary_page_offset", "index_page_offset",
    "nan_count", "bloom_offset", "bloom_length", "column_index_offset", "column_index_length",
    "offset_index_offset", "offset_index_length", "statistics_offset",
)
cdef enum:
    F_TOTAL_UNCOMPRESSED = 0
    F_DATA_PAGE = 1
    F_DICT_PAGE = 2
    F_INDEX_PAGE = 3
    F_NAN_COUNT = 4
    F_BLOOM_OFFSET = 5
    F_BLOOM_LENGTH = 6
    F_CI_OFFSET = 7
    F_CI_LENGTH = 8
    F_OI_OFFSET = 9
    F_OI_LENGTH = 10
    F_STATS_POS = 11      # footer position of the Statistics struct (legacy min/max are read lazily)
    N_I64 = 12

# Stat spans, (2, R, C, 2): start and length of (min_value, max_value); a length of -1 = absent.
cdef enum:
    S_START = 0
    S_LEN = 1

# Row group scalars: (N_RG, R); -1 = absent.
RG_FIELDS = ("num_rows", "total_byte_size", "file_offset", "total_compressed_size", "ordinal")
cdef enum:
    G_NUM_ROWS = 0
    G_TOTAL_BYTE_SIZE = 1
    G_FILE_OFFSET = 2
    G_TOTAL_COMPRESSED = 3
    G_ORDINAL = 4
    N_RG = 5

# layout.STAT_* bits, as compile-time constants (a test checks they agree with layout.py).
cdef enum:
    STAT_MIN_PRESENT = 1
    STAT_MIN_EXACT = 4
    STAT_MAX_PRESENT = 8
    STAT_MAX_EXACT = 32
    STAT_DISTINCT_COUNT_PRESENT = 64
    STAT_NULL_COUNT_PRESENT = 128
STAT_BITS = {
    "STAT_MIN_PRESENT": STAT_MIN_PRESENT, "STAT_MIN_EXACT": STAT_MIN_EXACT,
    "STAT_MAX_PRESENT": STAT_MAX_PRESENT, "STAT_MAX_EXACT": STAT_MAX_EXACT,
    "STAT_DISTINCT_COUNT_PRESENT": STAT_DISTINCT_COUNT_PRESENT,
    "STAT_NULL_COUNT_PRESENT": STAT_NULL_COUNT_PRESENT,
}

# Parquet Encoding enum -> _pm ENCODINGS bit (footer.PARQUET_ENCODING_TO_BIT; RLE, BIT_PACKED: 0).
cdef int V2_SLOT[7]  # data_page_header_v2 field id -> page_header's slot (1 and 7 are read apart)
V2_SLOT[:] = [0, 0, 7, 8, 5, 9, 10]

cdef uint8_t ENC_BIT[10]
ENC_BIT[:] = [1, 0, 2, 0, 0, 4, 8, 16, 2, 32]
ENCODING_BITS = tuple(ENC_BIT[i] for i in range(10))

# Per column, the spans of the previous row group's ColumnMetaData that a later one may repeat
# byte for byte (`_Parser.same_as`): the encodings list and what it decoded to, then up to
# MEMO_SKIPS skipped fields (key field id * 256 + wire type, start, length) in wire order.
cdef enum:
    MEMO_SKIPS = 4
    MEMO_ENC = 0              # start, length, encoding bits | _pm encodings byte << 32
    MEMO_SKIP = 3             # (key, start, length) x MEMO_SKIPS
    MEMO_W = 3 + 3 * MEMO_SKIPS

cdef enum:
    MAX_CODEC = 7
    MAX_PHYSICAL_TYPE = 7

# Error codes: `err` turns them into messages (with the GIL) so the hot path holds no objects.
cdef enum:
    E_TRUNCATED = 1       # a = bytes needed, b = bytes left
    E_VARINT_LONG
    E_VARINT_OVERFLOW
    E_NO_STOP
    E_BAD_TYPE            # a = type nibble
    E_FIELD_ID            # a = id
    E_ELEM_TYPE           # a = element type nibble
    E_LIST_SIZE           # a = size, b = bytes left
    E_MAP_SIZE            # a = size, b = bytes left
    E_MAP_TYPES           # a = key type, b = value type
    E_DEPTH
    E_WRONG_TYPE          # name, a = type nibble, what = expected
    E_RANGE               # name, a = value, b = bits
    E_NEGATIVE            # name, a = value
    E_BINARY_LEN          # name, a = length, b = bytes left
    E_MISSING             # name (struct), what (field), a = field id
    E_PHYSICAL_TYPE       # a
    E_CODEC               # a
    E_COLUMN_COUNT        # a = count, b = row group 0's count
    E_TOO_MANY_CHUNKS     # a = R, b = C
    E_FILE_PATH           # a = length of the path starting at `at`
    E_ENCRYPTED           # what = which field
    E_DUPLICATE           # name
    E_SORT_INDEX
    E_NOMEM
    E_TYPE_CHANGE         # a = type, b = row group 0's
    E_RANGE_OUT           # name, a = start, b = length (data region [4, base))

_PHYS_NAMES = ("BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
               "FIXED_LEN_BYTE_ARRAY")
_LOGICAL_EMPTY = {1: "STRING", 2: "MAP", 3: "LIST", 4: "ENUM", 6: "DATE", 11: "UNKNOWN",
                  12: "JSON", 13: "BSON", 14: "UUID", 15: "FLOAT16", 19: "VECTOR"}
_TIME_UNITS = {1: "MILLIS", 2: "MICROS", 3: "NANOS"}
# LogicalType members with fields: union id -> (struct name, [(field name, wire type) of its
# required fields 1, 2]); their other fields are optional.
_LOGICAL_REQUIRED = {
    5: (b"DecimalType", [(b"scale", CT_I32), (b"precision", CT_I32)]),
    7: (b"TimeType", [(b"isAdjustedToUTC", CT_TRUE), (b"unit", CT_STRUCT)]),
    8: (b"TimestampType", [(b"isAdjustedToUTC", CT_TRUE), (b"unit", CT_STRUCT)]),
    10: (b"IntType", [(b"bitWidth", CT_BYTE), (b"isSigned", CT_TRUE)]),
    16: (b"VariantType", []),
    17: (b"GeometryType", []),
    18: (b"GeographyType", []),
}

# The C constants above as Python values, for tests/parquet/test_thrift_constants.py to check
# against their Python homes (qdbpm.parquet.constants / compact, pm.layout). Field ids are
# literals in the parse functions below; the per-struct wire type masks say which ids are known.
CONSTANTS = {
    "wire_types": {"STOP": CT_STOP, "BOOL": CT_TRUE, "BOOL_FALSE": CT_FALSE, "BYTE": CT_BYTE, "I16": CT_I16,
                   "I32": CT_I32, "I64": CT_I64, "DOUBLE": CT_DOUBLE, "BINARY": CT_BINARY, "LIST": CT_LIST,
                   "SET": CT_SET, "MAP": CT_MAP, "STRUCT": CT_STRUCT},
    "type_names": _TYPE_NAMES,
    "MAX_DEPTH": MAX_DEPTH,
    "MAX_CODEC": MAX_CODEC,
    "MAX_PHYSICAL_TYPE": MAX_PHYSICAL_TYPE,
    "physical_type_names": _PHYS_NAMES,
    "logical_empty": _LOGICAL_EMPTY,
    "logical_with_fields": {k: v[0].decode() for k, v in _LOGICAL_REQUIRED.items()},
    "time_units": _TIME_UNITS,
    "encoding_bits": ENCODING_BITS,
    "stat_bits": STAT_BITS,
    "wire_masks": {
        "FileMetaData": [FMD_W[i] for i in range(10)], "RowGroup": [RG_W[i] for i in range(8)],
        "ColumnChunk": [CC_W[i] for i in range(10)], "ColumnMetaData": [CMD_W[i] for i in range(16)],
        "Statistics": [ST_W[i] for i in range(10)], "SchemaElement": [SE_W[i] for i in range(11)],
        "KeyValue": [KV_W[i] for i in range(3)], "SortingColumn": [SC_W[i] for i in range(4)],
        "DecimalType": [LT_W[5][i] for i in range(3)], "TimeType": [LT_W[7][i] for i in range(3)],
        "TimestampType": [LT_W[8][i] for i in range(3)], "IntType": [LT_W[10][i] for i in range(3)],
        "VariantType": [LT_W[16][i] for i in range(3)], "GeometryType": [LT_W[17][i] for i in range(3)],
        "GeographyType": [LT_W[18][i] for i in range(3)],
    },
}


@cython.final
cdef class _Parser:
    """Footer bytes + outputs + the first error.

    Cursor-passing style: a primitive takes the read position by value and returns the new one,
    or -1 after recording the first error with `err` (the hot path holds no Python object and no
    exception is in flight: `error()` builds the ParquetFormatError once back with the GIL).
    Keeping the position in a local, never in memory, lets the compiler hold it in a register
    across the many stores into the output arrays."""

    cdef const uint8_t* p
    cdef Py_ssize_t end
    cdef int64_t base             # file offset of the footer (= end of the data region), 0 unknown
    cdef Py_ssize_t r, c          # row group / column being parsed, -1 outside (for messages)
    cdef Py_ssize_t R, C, RC
    cdef ChunkRec* K              # (R, C) chunk records
    cdef int64_t* I               # (N_I64, R, C)
    cdef int64_t* S               # (2, R, C, 2)
    cdef uint8_t* PT              # (R, C) ColumnMetaData.type
    cdef uint32_t* E              # (R, C): bit e set when Parquet Encoding e is listed
    cdef int64_t* G               # (N_RG, R)
    cdef int64_t* RS              # (R, 2): byte span of each RowGroup struct
    cdef int64_t* sort_off        # (R + 1,): sorting columns of row group r are [off[r], off[r+1])
    cdef int64_t* P               # (C, 2): (start, length) of row group 0's path_in_schema per column
    cdef int64_t* M               # (C, MEMO_W): the previous row group's spans, see `same_as`
    # Growable C buffers (raw allocator: usable without the GIL).
    cdef int32_t* sort_idx
    cdef uint8_t* sort_flags      # bit 0 descending, bit 1 nulls_first
    cdef Py_ssize_t nsort, sort_cap
    cdef int64_t* mism            # (r, c, start, end) of paths differing from row group 0's bytes
    cdef Py_ssize_t nmism, mism_cap
    # The first error.
    cdef int ecode
    cdef Py_ssize_t eat, er, ec
    cdef const char* ename
    cdef const char* ewhat
    cdef int64_t ea, eb
    cdef public dict out
    cdef object keep              # objects whose memory the pointers above point into

    def __cinit__(self):
        self.r = -1
        self.c = -1
        self.R = -1
        self.C = -1
        self.keep = []

    def __dealloc__(self):
        PyMem_RawFree(self.sort_idx)
        PyMem_RawFree(self.sort_flags)
        PyMem_RawFree(self.mism)

    # --- a page header (pages.py's chunk walk, and `_split` without the GIL) ---------------------

    cdef Py_ssize_t page_header_into(self, Py_ssize_t pos, int64_t* h) noexcept nogil:
        """The PageHeader at `pos` into h[:12] (page_header's tuple); the position after it, or -1
        with the error recorded."""
        cdef int ft = 0
        cdef int64_t fid = 0, v = 0
        cdef Py_ssize_t i
        for i in range(12):
            h[i] = -1
        h[11] = 1
        while True:
            pos = self.field(pos, &ft, &fid)
            if pos < 0 or ft == CT_STOP:
                break
            if 1 <= fid <= 3 and ft == CT_I32:
                pos = self.read_int(pos, ft, 32, &v, b"PageHeader field")
                h[fid] = v
            elif (fid == 5 or fid == 7 or fid == 8) and ft == CT_STRUCT:
                pos = self.page_header_part(pos, fid, h)
            else:
                pos = self.skip(pos, ft, 1, False)
            if pos < 0:
                return -1
        h[0] = pos
        return pos

    cdef Py_ssize_t page_header_part(self, Py_ssize_t pos, int64_t fid, int64_t* h) noexcept nogil:
        """The data_page_header (5), dictionary_page_header (7) or data_page_header_v2 (8) struct
        at `pos` into h; the position after it, or -1."""
        cdef int ft = 0
        cdef int64_t fid2 = 0, v = 0
        cdef bint flag = True
        while True:
            pos = self.field(pos, &ft, &fid2)
            if pos < 0 or ft == CT_STOP:
                return pos
            if fid == 8 and fid2 == 7 and (ft == CT_TRUE or ft == CT_FALSE):
                self.read_bool(pos, ft, &flag, b"is_compressed")
                h[11] = 1 if flag else 0
            elif ft == CT_I32 and 1 <= fid2 <= 6 and not (fid == 7 and fid2 > 2):
                pos = self.read_int(pos, ft, 32, &v, b"page header field")
                if fid2 == 1:
                    h[4] = v          # num_values
                elif fid == 8:        # v2: num_nulls, num_rows, encoding, def / rep lengths
                    h[V2_SLOT[fid2]] = v
                elif fid2 == 2:
                    h[5] = v          # encoding
                elif fid == 5 and fid2 == 3:
                    h[6] = v          # definition_level_encoding
            else:
                pos = self.skip(pos, ft, 2, False)
            if pos < 0:
                return -1

    # --- errors (cold) ------------------------------------------------------------------------

    cdef Py_ssize_t err(self, int code, Py_ssize_t at, const char* name, const char* what, int64_t a,
                        int64_t b) noexcept nogil:
        if self.ecode == 0:
            self.ecode = code
            self.eat = at
            self.er = self.r
            self.ec = self.c
            self.ename = name
            self.ewhat = what
            self.ea = a
            self.eb = b
        return -1

    cdef Py_ssize_t check(self, Py_ssize_t pos) except -1:
        """Raise the recorded error when `pos` says there was one (for code holding the GIL)."""
        if pos < 0:
            raise self.error()
        return pos

    cdef object error(self):
        cdef int code = self.ecode
        cdef int64_t a = self.ea, b = self.eb
        name = self.ename.decode() if self.ename != NULL else ""
        what = self.ewhat.decode() if self.ewhat != NULL else ""
        corrupt = True
        tn = lambda t: _TYPE_NAMES[t] if 0 <= t < len(_TYPE_NAMES) else str(t)
        if code == E_TRUNCATED:
            msg = f"truncated: {a} bytes needed, {b} left"
        elif code == E_VARINT_LONG:
            msg = "varint longer than 10 bytes"
        elif code == E_VARINT_OVERFLOW:
            msg = "varint overflows 64 bits"
        elif code == E_NO_STOP:
            msg = "truncated: struct not terminated by a STOP byte"
        elif code == E_BAD_TYPE:
            msg = f"invalid Thrift compact type {a} in field header"
        elif code == E_FIELD_ID:
            msg = f"field id {a} does not fit i16"
        elif code == E_ELEM_TYPE:
            msg = f"invalid element type {a} in collection header"
        elif code == E_LIST_SIZE:
            msg = f"{name or 'list'} of {a} elements exceeds the {b} bytes left"
        elif code == E_MAP_SIZE:
            msg = f"map of {a} entries exceeds the {b} bytes left"
        elif code == E_MAP_TYPES:
            msg = f"invalid map key/value types {a}/{b}"
        elif code == E_DEPTH:
            msg = f"nesting deeper than {MAX_DEPTH}"
        elif code == E_WRONG_TYPE:
            msg = f"{name} has Thrift type {tn(a)}, expected {what}"
        elif code == E_RANGE:
            msg = f"{name} = {a} does not fit i{b}"
        elif code == E_NEGATIVE:
            msg = f"negative {name} ({a})"
        elif code == E_BINARY_LEN:
            msg = f"{name} of {a} bytes runs past the end of the footer ({b} bytes left)"
        elif code == E_MISSING:
            msg = f"{name} has no {what} (field {a})" + self.mistyped_note(name, what, a, b)
        elif code == E_PHYSICAL_TYPE:
            msg = f"invalid physical type {a}"
        elif code == E_CODEC:
            msg, corrupt = f"unsupported compression codec {a} (known: 0..{MAX_CODEC})", False
        elif code == E_COLUMN_COUNT:
            msg = f"{a} column chunks, row group 0 has {b}"
        elif code == E_TOO_MANY_CHUNKS:
            msg = f"{a} row groups of {b} column chunks cannot fit in the {self.end - self.eat} bytes left"
        elif code == E_FILE_PATH:
            path = (<const char*>self.p)[self.eat:self.eat + a].decode("utf-8", "replace")
            msg = f"has file_path {path!r}: external column chunks are not supported"
            corrupt = False
        elif code == E_ENCRYPTED:
            msg, corrupt = f"encrypted Parquet file ({what} is set): encryption is not supported", False
        elif code == E_DUPLICATE:
            msg = f"{name} appears twice"
        elif code == E_SORT_INDEX:
            msg = "SortingColumn without a valid column_idx"
        elif code == E_TYPE_CHANGE:
            msg = (f"ColumnMetaData.type {_PHYS_NAMES[a]} differs from row group 0's "
                   f"{_PHYS_NAMES[b]} for the same column")
        elif code == E_RANGE_OUT:
            msg = f"{name} [{a}, {a + b}) is outside the data region [4, {self.base})"
        elif code == E_NOMEM:
            return MemoryError(f"cannot allocate arrays for {a} x {b} column chunks")
        else:
            msg = f"error {code}"
        where = f"footer byte {self.eat}"
        if self.base > 0:
            where += f" (file offset {self.base + self.eat})"
        ctx = ""
        if self.er >= 0:
            ctx = f"row group {self.er}" + (f", column chunk {self.ec}" if self.ec >= 0 else "") + ": "
        prefix = "corrupt Parquet footer: " if corrupt else ""
        return ParquetFormatError(f"{prefix}{ctx}{msg} at {where}")

    cdef str mistyped_note(self, str name, str what, int64_t fid, int64_t want):
        """Why a required field that is in the struct at `eat` counts as absent: its wire type
        (`want`: the expected nibble, plus the element type << 4 for a list). Cold path: walks
        the struct again (the error is recorded already, so a walk error changes nothing)."""
        cdef int ft = 0, et = 0
        cdef int64_t f = 0
        cdef Py_ssize_t pos = self.eat, size = 0
        found = None
        while pos >= 0:
            pos = self.field(pos, &ft, &f)
            if pos < 0 or ft == CT_STOP:
                break
            if f == fid:
                found = (ft, pos)
            pos = self.skip(pos, ft, 1, False)
        if found is None:
            return ""
        tn = lambda t: _TYPE_NAMES[t] if 0 <= t < len(_TYPE_NAMES) else str(t)
        ft, pos = found
        if ft == (want & 15) and ft == CT_LIST and self.coll_header(pos, &et, &size, NULL) >= 0:
            return f": {name}.{what} is a list of {tn(et)}, expected a list of {tn(want >> 4)}, and is skipped"
        return f": {name}.{what} has Thrift type {tn(ft)}, expected {tn(want & 15)}, and is skipped"

    # --- primitives: (position in) -> position out, or -1 ---------------------------------------

    cdef inline Py_ssize_t varint(self, Py_ssize_t pos, uint64_t* out) noexcept nogil:
        cdef const uint8_t* p = self.p
        cdef Py_ssize_t start = pos, stop
        cdef uint64_t result, b
        if pos < self.end and p[pos] < 0x80:  # most varints in a footer are one byte
            out[0] = p[pos]
            return pos + 1
        stop = pos + 10 if self.end - pos > 10 else self.end
        result = 0
        while pos < stop:
            b = p[pos]
            result |= (b & 0x7F) << (7 * (pos - start))
            pos += 1
            if b < 0x80:
                if pos - start == 10 and b > 1:
                    return self.err(E_VARINT_OVERFLOW, start, NULL, NULL, 0, 0)
                out[0] = result
                return pos
        if pos - start == 10:
            return self.err(E_VARINT_LONG, start, NULL, NULL, 0, 0)
        return self.err(E_TRUNCATED, start, NULL, NULL, pos - start + 1, pos - start)

    cdef inline Py_ssize_t read_int(self, Py_ssize_t pos, int ttype, int bits, int64_t* out,
                                    const char* name) noexcept nogil:
        """An integer in any Thrift integer encoding, range-checked to `bits`."""
        cdef uint64_t u = 0
        cdef int64_t v
        cdef Py_ssize_t at = pos
        if ttype == CT_I32 or ttype == CT_I64 or ttype == CT_I16:
            pos = self.varint(pos, &u)
            if pos < 0:
                return -1
            v = <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))
        elif ttype == CT_BYTE:
            if pos >= self.end:
                return self.err(E_TRUNCATED, pos, NULL, NULL, 1, 0)
            v = <int64_t>(<signed char>self.p[pos])
            pos += 1
        else:
            return self.err(E_WRONG_TYPE, at, name, b"an integer", ttype, 0)
        if bits < 64 and (v < -(<int64_t>1 << (bits - 1)) or v >= (<int64_t>1 << (bits - 1))):
            return self.err(E_RANGE, at, name, NULL, v, bits)
        out[0] = v
        return pos

    cdef inline Py_ssize_t read_nonneg(self, Py_ssize_t pos, int ttype, int bits, int64_t* out,
                                       const char* name) noexcept nogil:
        """A non-negative integer. Fast path: an i32 / i64 varint with 10 bytes of buffer left
        (no per-byte bounds check); anything else goes through `read_int`."""
        cdef const uint8_t* p = self.p
        cdef Py_ssize_t k = pos
        cdef uint64_t u = 0, b
        cdef int64_t v
        if (ttype == CT_I64 or ttype == CT_I32) and self.end - pos >= 10:
            while k - pos < 9:
                b = p[k]
                u |= (b & 0x7F) << (7 * (k - pos))
                k += 1
                if b < 0x80:
                    v = <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))
                    if v >= 0 and (bits == 64 or v < (<int64_t>1 << (bits - 1))):
                        out[0] = v
                        return k
                    break
        k = self.read_int(pos, ttype, bits, out, name)
        if k >= 0 and out[0] < 0:
            return self.err(E_NEGATIVE, pos, name, NULL, out[0], 0)
        return k

    cdef inline int read_bool(self, Py_ssize_t pos, int ttype, bint* out, const char* name) noexcept nogil:
        """A bool struct field: its value is the type nibble. Returns 0 or -1."""
        if ttype == CT_TRUE:
            out[0] = True
        elif ttype == CT_FALSE:
            out[0] = False
        else:
            return <int>self.err(E_WRONG_TYPE, pos, name, b"bool", ttype, 0)
        return 0

    cdef inline Py_ssize_t binary(self, Py_ssize_t pos, int ttype, Py_ssize_t* start, Py_ssize_t* n,
                                  const char* name) noexcept nogil:
        cdef uint64_t u = 0
        cdef Py_ssize_t at = pos
        if ttype != CT_BINARY:
            return self.err(E_WRONG_TYPE, at, name, b"binary", ttype, 0)
        pos = self.varint(pos, &u)
        if pos < 0:
            return -1
        if u > <uint64_t>(self.end - pos):
            return self.err(E_BINARY_LEN, at, name, NULL, <int64_t>u, self.end - pos)
        start[0] = pos
        n[0] = <Py_ssize_t>u
        return pos + <Py_ssize_t>u

    cdef inline Py_ssize_t field(self, Py_ssize_t pos, int* ttype, int64_t* fid) noexcept nogil:
        """The next field header of a struct: ttype CT_STOP at the end; fid holds the previous
        id on entry (short headers carry a delta), the new one on return."""
        cdef uint8_t b
        cdef uint64_t u = 0
        cdef int64_t v
        cdef Py_ssize_t at = pos
        if pos >= self.end:
            return self.err(E_NO_STOP, at, NULL, NULL, 0, 0)
        b = self.p[pos]
        ttype[0] = b & 0x0F
        if b >> 4:
            fid[0] += b >> 4
            if ttype[0] == 0 or ttype[0] > CT_STRUCT:
                return self.err(E_BAD_TYPE, at, NULL, NULL, ttype[0], 0)
            return pos + 1
        if b == 0:
            return pos + 1
        if ttype[0] > CT_STRUCT:
            return self.err(E_BAD_TYPE, at, NULL, NULL, ttype[0], 0)
        pos = self.varint(pos + 1, &u)  # long form: a zigzag i16 field id follows
        if pos < 0:
            return -1
        v = <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))
        if v < -32768 or v > 32767:
            return self.err(E_FIELD_ID, at, NULL, NULL, v, 0)
        fid[0] = v
        return pos

    cdef inline Py_ssize_t coll_header(self, Py_ssize_t pos, int* etype, Py_ssize_t* size,
                                       const char* name) noexcept nogil:
        """A list/set header. Every element takes at least one byte, so a size beyond the bytes
        left is rejected here, before anyone allocates for it."""
        cdef uint8_t b
        cdef uint64_t n
        cdef Py_ssize_t at = pos
        if pos >= self.end:
            return self.err(E_TRUNCATED, pos, NULL, NULL, 1, 0)
        b = self.p[pos]
        pos += 1
        etype[0] = b & 0x0F
        n = b >> 4
        if n == 15:
            pos = self.varint(pos, &n)
            if pos < 0:
                return -1
        if n and (etype[0] == 0 or etype[0] > CT_STRUCT):
            return self.err(E_ELEM_TYPE, at, NULL, NULL, etype[0], 0)
        if n > <uint64_t>(self.end - pos):
            return self.err(E_LIST_SIZE, at, name, NULL, <int64_t>n, self.end - pos)
        size[0] = <Py_ssize_t>n
        return pos

    cdef inline Py_ssize_t list_of(self, Py_ssize_t pos, int ttype, int want, Py_ssize_t* size,
                                   int* etype, const char* name, int depth) noexcept nogil:
        """The header of a list field (its wire type already checked) whose elements must be
        `want`. Elements of another type make the whole list mistyped: it is skipped and
        `size` is -1 (absent), as for a field of the wrong type."""
        cdef Py_ssize_t k = self.coll_header(pos, etype, size, name)
        if k >= 0 and size[0] and etype[0] != want:
            size[0] = -1
            return self.skip(pos, ttype, depth, False)
        return k

    cdef inline Py_ssize_t skip_scalar(self, Py_ssize_t pos, int ttype, bint in_coll) noexcept nogil:
        """Skip a value of a non-container type (1..8)."""
        cdef uint64_t u = 0
        cdef Py_ssize_t n
        if ttype >= CT_I16 and ttype <= CT_I64:
            return self.varint(pos, &u)
        if ttype == CT_BINARY:
            return self.binary(pos, ttype, &n, &n, b"binary")
        n = 8 if ttype == CT_DOUBLE else 1 if (ttype == CT_BYTE or in_coll) else 0
        if n > self.end - pos:  # a bool takes a byte only inside a collection
            return self.err(E_TRUNCATED, pos, NULL, NULL, n, self.end - pos)
        return pos + n

    cdef Py_ssize_t skip_struct(self, Py_ssize_t pos, int depth) noexcept nogil:
        """Skip the fields of a struct through its STOP byte (`depth` is the struct's own).

        Fast path for the common shape (short-form headers, scalar fields) while at least 11
        bytes remain, so a header plus a whole varint needs no bounds check; field ids do not
        matter for skipping. Anything else (long-form header, container, malformed varint, the
        last bytes) resumes at that header on the checked slow path."""
        cdef const uint8_t* p = self.p
        cdef Py_ssize_t k
        cdef uint64_t u
        cdef uint8_t b
        cdef int t = 0
        cdef int64_t fid = 0
        while True:
            while pos + 11 <= self.end:
                b = p[pos]
                if b == 0:
                    return pos + 1
                t = b & 0x0F
                if (b >> 4) and (t == CT_LIST or t == CT_SET) and depth + 1 < MAX_DEPTH:
                    # A short list of varints (SizeStatistics' level histograms): skipped here
                    # when all its bytes surely fit; anything else takes the checked path.
                    k = self.skip_varint_list(pos + 1)
                    if k < 0:
                        break
                    pos = k
                    continue
                if (b >> 4) == 0 or t == 0 or t > CT_BINARY:
                    break
                if t == CT_TRUE or t == CT_FALSE:
                    pos += 1
                elif t == CT_BYTE:
                    pos += 2
                elif t == CT_DOUBLE:
                    pos += 9
                else:  # i16 / i32 / i64 varint, or the length of a binary
                    k = pos + 1
                    u = p[k] & 0x7F
                    while p[k] & 0x80 and k - pos < 10:
                        k += 1
                        u |= (<uint64_t>(p[k] & 0x7F)) << (7 * (k - pos - 1))
                    if p[k] & 0x80 or (k - pos == 10 and p[k] > 1):
                        break  # let the checked path report it
                    if t == CT_BINARY:
                        if u > <uint64_t>(self.end - k - 1):
                            break
                        k += <Py_ssize_t>u
                    pos = k + 1
            # Slow path: one field, fully checked.
            pos = self.field(pos, &t, &fid)
            if pos < 0 or t == CT_STOP:
                return pos
            pos = self.skip(pos, t, depth + 1, False)
            if pos < 0:
                return -1

    cdef inline Py_ssize_t skip_varint_list(self, Py_ssize_t pos) noexcept nogil:
        """The end of the list whose header byte is at `pos` when it holds fewer than 15 i16 / i32 /
        i64 varints, well formed, with 10 bytes per element left in the buffer; else -1 (not an
        error: the caller's checked path decides)."""
        cdef const uint8_t* p = self.p
        cdef int et = p[pos] & 0x0F
        cdef Py_ssize_t n = p[pos] >> 4, e, k = pos + 1, k0
        if n == 15 or et < CT_I16 or et > CT_I64 or k + 10 * n > self.end:
            return -1
        for e in range(n):
            k0 = k
            while p[k] & 0x80 and k - k0 < 9:
                k += 1
            if p[k] & 0x80 or (k - k0 == 9 and p[k] > 1):
                return -1
            k += 1
        return k

    cdef inline bint same_as(self, Py_ssize_t pos, int64_t start, int64_t n) noexcept nogil:
        """Whether the n bytes at `pos` repeat the n at `start`, a value parsed before in the same
        context: the same field and wire type at the same depth (the memo is per column only to
        find repeats). Decoding reads a value's bytes and nothing else, and a list's size is
        bounded by bytes its elements take, so identical bytes decode to the identical value,
        end and checks, and the value at `pos` needs no second parse. Most writers repeat a
        column's encodings, encoding_stats and size_statistics row group after row group."""
        if n <= 0 or n > self.end - pos:
            return False
        return memcmp(self.p + pos, self.p + start, n) == 0

    cdef Py_ssize_t skip(self, Py_ssize_t pos, int ttype, int depth, bint in_coll) noexcept nogil:
        """Skip one value of any type. A bool takes no bytes as a struct field (its value is the
        type nibble) and one byte inside a collection. `depth` counts enclosing containers."""
        cdef uint64_t u = 0
        cdef Py_ssize_t size = 0, i
        cdef int etype = 0, kt, vt
        cdef Py_ssize_t at = pos
        if ttype <= CT_BINARY:
            return self.skip_scalar(pos, ttype, in_coll)
        if depth >= MAX_DEPTH:
            return self.err(E_DEPTH, at, NULL, NULL, 0, 0)
        if ttype == CT_STRUCT:
            return self.skip_struct(pos, depth)
        if ttype == CT_LIST or ttype == CT_SET:
            pos = self.coll_header(pos, &etype, &size, NULL)
            if pos < 0:
                return -1
            if etype == CT_TRUE or etype == CT_FALSE or etype == CT_BYTE or etype == CT_DOUBLE:
                size *= 8 if etype == CT_DOUBLE else 1  # size <= bytes left: no overflow
                if size > self.end - pos:
                    return self.err(E_TRUNCATED, pos, NULL, NULL, size, self.end - pos)
                return pos + size
            if etype == CT_STRUCT and size:  # PageEncodingStats and the like: straight to the struct skip
                if depth + 1 >= MAX_DEPTH:
                    return self.err(E_DEPTH, pos, NULL, NULL, 0, 0)
                for i in range(size):
                    pos = self.skip_struct(pos, depth + 1)
                    if pos < 0:
                        return -1
                return pos
            for i in range(size):
                if etype <= CT_BINARY:
                    pos = self.skip_scalar(pos, etype, True)
                else:
                    pos = self.skip(pos, etype, depth + 1, True)
                if pos < 0:
                    return -1
            return pos
        if ttype == CT_MAP:
            pos = self.varint(pos, &u)
            if pos <= 0 or u == 0:
                return pos
            if u > <uint64_t>(self.end - pos) // 2:
                return self.err(E_MAP_SIZE, at, NULL, NULL, <int64_t>u, self.end - pos)
            kt = self.p[pos] >> 4
            vt = self.p[pos] & 0x0F
            if kt == 0 or kt > CT_STRUCT or vt == 0 or vt > CT_STRUCT:
                return self.err(E_MAP_TYPES, pos, NULL, NULL, kt, vt)
            pos += 1
            for i in range(<Py_ssize_t>u):
                pos = self.skip(pos, kt, depth + 1, True)
                if pos >= 0:
                    pos = self.skip(pos, vt, depth + 1, True)
                if pos < 0:
                    return -1
            return pos
        return self.err(E_BAD_TYPE, at, NULL, NULL, ttype, 0)

    # --- FileMetaData, schema, key/values (with the GIL: a few Python objects) ------------------

    cdef bytes read_bytes(self, Py_ssize_t* pos, int ttype, const char* name):
        cdef Py_ssize_t s = 0, n = 0
        pos[0] = self.check(self.binary(pos[0], ttype, &s, &n, name))
        return (<const char*>self.p)[s:s + n]

    cdef int parse_file_metadata(self, Py_ssize_t pos) except -1:
        cdef int ttype = 0
        cdef int64_t fid = 0, v = 0
        cdef Py_ssize_t start, hdr = 0, s0 = pos
        cdef list fields = []
        out = self.out
        while True:
            hdr = pos
            pos = self.check(self.field(pos, &ttype, &fid))
            if ttype == CT_STOP:
                break
            start = pos
            if mistyped(FMD_W, 10, fid, ttype):
                pos = self.check(self.skip(pos, ttype, 1, False))
            elif fid == 1:
                pos = self.check(self.read_int(pos, ttype, 32, &v, b"FileMetaData.version"))
                out["version"] = v
            elif fid == 2:
                pos = self.parse_schema(pos, ttype, 1)
            elif fid == 3:
                pos = self.check(self.read_int(pos, ttype, 64, &v, b"FileMetaData.num_rows"))
                out["num_rows"] = v
            elif fid == 4:
                pos = self.parse_row_groups(pos, ttype, 1)
            elif fid == 5:
                kvs = self.parse_key_values(&pos, ttype, 1)
                if kvs is not None:
                    out["key_value_metadata"] = kvs
            elif fid == 6:
                out["created_by"] = self.read_bytes(&pos, ttype, b"FileMetaData.created_by")
            elif fid == 7:
                orders = self.parse_column_orders(&pos, ttype, 1)
                if orders is not None:
                    out["column_orders"] = orders
            elif fid == 8:
                self.check(self.err(E_ENCRYPTED, hdr, NULL, b"FileMetaData.encryption_algorithm", 0, 0))
            elif fid == 9:
                self.check(self.err(E_ENCRYPTED, hdr, NULL, b"FileMetaData.footer_signing_key_metadata", 0, 0))
            else:
                pos = self.check(self.skip(pos, ttype, 1, False))
            fields.append((fid, ttype, start, pos))
        # Present = read: a mistyped field (or list of mistyped elements) was skipped.
        for fid, key, name, want in ((1, "version", b"version", CT_I32), (2, "schema", b"schema", LIST_OF_STRUCT),
                                     (3, "num_rows", b"num_rows", CT_I64), (4, "rg", b"row_groups", LIST_OF_STRUCT)):
            if key not in out:
                self.check(self.err(E_MISSING, s0, b"FileMetaData", name, fid, want))
        out["fields"] = fields
        out["end"] = pos
        return 0

    cdef list parse_key_values(self, Py_ssize_t* cur, int ttype, int depth):
        """[(key, value | None)], or None for a list of mistyped elements (absent)."""
        cdef Py_ssize_t size = 0, i, at, pos = cur[0]
        cdef int ft = 0
        cdef int64_t fid
        cdef list kvs = []
        pos = self.check(self.list_of(pos, ttype, CT_STRUCT, &size, &ft, b"FileMetaData.key_value_metadata",
                                      depth))
        cur[0] = pos
        if size < 0:
            return None
        for i in range(size):
            key = value = None
            fid = 0
            at = pos
            while True:
                pos = self.check(self.field(pos, &ft, &fid))
                if ft == CT_STOP:
                    break
                if mistyped(KV_W, 3, fid, ft):
                    pos = self.check(self.skip(pos, ft, depth + 1, False))
                elif fid == 1:
                    key = self.read_bytes(&pos, ft, b"KeyValue.key")
                elif fid == 2:
                    value = self.read_bytes(&pos, ft, b"KeyValue.value")
                else:
                    pos = self.check(self.skip(pos, ft, depth + 1, False))
            if key is None:
                self.check(self.err(E_MISSING, at, b"KeyValue", b"key", 1, CT_BINARY))
            kvs.append((key, value))
        cur[0] = pos
        return kvs

    cdef list parse_column_orders(self, Py_ssize_t* cur, int ttype, int depth):
        """The ColumnOrder union id per element (0: none set), or None for a list of mistyped
        elements (absent). Its known member, TYPE_ORDER (1), is a struct: another type is skipped."""
        cdef Py_ssize_t size = 0, i, pos = cur[0]
        cdef int ft = 0
        cdef int64_t fid, kind
        cdef list orders = []
        pos = self.check(self.list_of(pos, ttype, CT_STRUCT, &size, &ft, b"FileMetaData.column_orders", depth))
        cur[0] = pos
        if size < 0:
            return None
        for i in range(size):
            kind = 0  # an empty union
            fid = 0
            while True:
                pos = self.check(self.field(pos, &ft, &fid))
                if ft == CT_STOP:
                    break
                if fid != 1 or ft == CT_STRUCT:
                    kind = fid
                pos = self.check(self.skip(pos, ft, depth + 1, False))
            orders.append(kind)
        cur[0] = pos
        return orders

    cdef Py_ssize_t parse_schema(self, Py_ssize_t pos, int ttype, int depth) except -1:
        cdef Py_ssize_t size = 0, i, start
        cdef int et = 0
        cdef list elements = [], spans = []
        cdef Py_ssize_t at = pos
        pos = self.check(self.list_of(pos, ttype, CT_STRUCT, &size, &et, b"FileMetaData.schema", depth))
        if size < 0:
            return pos
        if "schema" in self.out:
            self.check(self.err(E_DUPLICATE, at, b"FileMetaData.schema", NULL, 0, 0))
        for i in range(size):
            start = pos
            elements.append(self.parse_schema_element(&pos, depth + 1))
            spans.append((start, pos))
        self.out["schema"] = elements
        self.out["schema_spans"] = spans
        return pos

    cdef tuple parse_schema_element(self, Py_ssize_t* cur, int depth):
        cdef int ft = 0
        cdef int64_t fid = 0, v = 0
        cdef Py_ssize_t pos = cur[0], at = cur[0]
        # type, type_length, repetition_type, name, num_children, converted_type, scale,
        # precision, field_id, logical_type
        vals = [None] * 10
        while True:
            pos = self.check(self.field(pos, &ft, &fid))
            if ft == CT_STOP:
                break
            if mistyped(SE_W, 11, fid, ft):
                pos = self.check(self.skip(pos, ft, depth, False))
            elif 1 <= fid <= 9 and fid != 4:
                pos = self.check(self.read_int(pos, ft, 32, &v, b"SchemaElement field"))
                vals[fid - 1] = v
            elif fid == 4:
                vals[3] = self.read_bytes(&pos, ft, b"SchemaElement.name")
            elif fid == 10:
                vals[9] = self.parse_logical_type(&pos, depth + 1)
            else:
                pos = self.check(self.skip(pos, ft, depth, False))
        if vals[3] is None:
            self.check(self.err(E_MISSING, at, b"SchemaElement", b"name", 4, CT_BINARY))
        cur[0] = pos
        return tuple(vals)

    cdef object parse_logical_type(self, Py_ssize_t* cur, int depth):
        """The LogicalType union -> a small tuple (see qdbpm.thrift.SchemaElement); None when no
        member is set. Every member is a struct: a known id of another wire type is skipped
        (absent), an unknown id gives ("OTHER", id). As in Thrift, a member struct without one
        of its required fields (or with it mistyped, hence skipped) is an error."""
        cdef int ft = 0, ft2 = 0
        cdef int64_t fid = 0, fid2, v = 0
        cdef bint b = False
        cdef Py_ssize_t pos = cur[0], at
        cdef uint32_t seen
        result = None
        if depth >= MAX_DEPTH:
            self.check(self.err(E_DEPTH, pos, NULL, NULL, 0, 0))
        while True:
            pos = self.check(self.field(pos, &ft, &fid))
            if ft == CT_STOP:
                break
            if not (fid in _LOGICAL_EMPTY or fid in _LOGICAL_REQUIRED):
                pos = self.check(self.skip(pos, ft, depth + 1, False))
                result = ("OTHER", fid)
                continue
            if ft != CT_STRUCT:
                pos = self.check(self.skip(pos, ft, depth + 1, False))
                continue
            if fid in _LOGICAL_EMPTY:
                pos = self.check(self.skip(pos, ft, depth + 1, False))
                result = (_LOGICAL_EMPTY[fid],)
                continue
            x = y = None
            fid2 = 0
            seen = 0
            at = pos
            while True:
                pos = self.check(self.field(pos, &ft2, &fid2))
                if ft2 == CT_STOP:
                    break
                if mistyped(LT_W[fid], 3, fid2, ft2) or not (fid2 == 1 or fid2 == 2):
                    pos = self.check(self.skip(pos, ft2, depth + 1, False))
                    continue
                seen |= (<uint32_t>1) << fid2
                if fid == 5:  # DecimalType scale, precision
                    pos = self.check(self.read_int(pos, ft2, 32, &v, b"DecimalType field"))
                    if fid2 == 1:
                        x = v
                    else:
                        y = v
                elif (fid == 7 or fid == 8) and fid2 == 1:
                    self.check(self.read_bool(pos, ft2, &b, b"isAdjustedToUTC"))
                    y = bool(b)
                elif fid == 7 or fid == 8:
                    x = self.parse_time_unit(&pos, depth + 1)
                elif fid == 10 and fid2 == 1:
                    pos = self.check(self.read_int(pos, ft2, 8, &v, b"IntType.bitWidth"))
                    x = v
                elif fid == 10:
                    self.check(self.read_bool(pos, ft2, &b, b"IntType.isSigned"))
                    y = bool(b)
                elif fid == 16 and fid2 == 1:
                    pos = self.check(self.read_int(pos, ft2, 8, &v, b"VariantType.specification_version"))
                    x = v
                elif (fid == 17 or fid == 18) and fid2 == 1:
                    x = self.read_bytes(&pos, ft2, b"crs").decode("utf-8", "surrogateescape")
                elif fid == 18:
                    pos = self.check(self.read_int(pos, ft2, 32, &v, b"GeographyType.algorithm"))
                    y = v
                else:
                    pos = self.check(self.skip(pos, ft2, depth + 1, False))
            name, required = _LOGICAL_REQUIRED[fid]
            for fid2, (what, want) in enumerate(required, 1):
                if not seen & ((<uint32_t>1) << fid2):
                    self.check(self.err(E_MISSING, at, name, what, fid2, want))
            if fid == 5:
                result = ("DECIMAL", x, y)
            elif fid == 7:
                result = ("TIME", x, y)
            elif fid == 8:
                result = ("TIMESTAMP", x, y)
            elif fid == 10:
                result = ("INTEGER", x, y)
            elif fid == 16:
                result = ("VARIANT", x)
            elif fid == 17:
                result = ("GEOMETRY", x)
            else:
                result = ("GEOGRAPHY", x, y)
        cur[0] = pos
        return result

    cdef object parse_time_unit(self, Py_ssize_t* cur, int depth):
        """The TimeUnit union: MILLIS (1), MICROS (2), NANOS (3), all structs (a known id of
        another wire type is skipped); None when none is set."""
        cdef int ft = 0
        cdef int64_t fid = 0
        cdef Py_ssize_t pos = cur[0]
        unit = None
        if depth >= MAX_DEPTH:
            self.check(self.err(E_DEPTH, pos, NULL, NULL, 0, 0))
        while True:
            pos = self.check(self.field(pos, &ft, &fid))
            if ft == CT_STOP:
                break
            if ft == CT_STRUCT or fid not in _TIME_UNITS:
                unit = _TIME_UNITS.get(fid, f"UNIT{fid}")
            pos = self.check(self.skip(pos, ft, depth + 1, False))
        cur[0] = pos
        return unit

    # --- row groups (GIL released) -------------------------------------------------------------

    cdef Py_ssize_t parse_row_groups(self, Py_ssize_t pos, int ttype, int depth) except -1:
        cdef Py_ssize_t size = 0, r
        cdef int et = 0
        cdef int64_t[:, ::1] g
        cdef int64_t[:, ::1] rs
        cdef int64_t[::1] so
        cdef Py_ssize_t at = pos
        pos = self.check(self.list_of(pos, ttype, CT_STRUCT, &size, &et, b"FileMetaData.row_groups", depth))
        if size < 0:
            return pos
        if self.R >= 0:
            self.check(self.err(E_DUPLICATE, at, b"FileMetaData.row_groups", NULL, 0, 0))
        self.R = size
        a_g = np.full((N_RG, size), -1, np.int64)
        a_rs = np.zeros((size, 2), np.int64)
        a_so = np.zeros(size + 1, np.int64)
        self.out.update(rg=a_g, rg_spans=a_rs, sort_offsets=a_so)
        so = a_so
        self.sort_off = &so[0]
        if size:
            g = a_g
            rs = a_rs
            self.G = &g[0, 0]
            self.RS = &rs[0, 0]
        with nogil:
            for r in range(size):
                self.r = r
                self.RS[2 * r] = pos
                pos = self.parse_row_group(pos, r, depth + 1)
                if pos < 0:
                    break
                self.RS[2 * r + 1] = pos
                self.sort_off[r + 1] = self.nsort
        self.check(pos)
        self.r = -1
        return pos

    cdef int alloc_chunks(self, Py_ssize_t C, Py_ssize_t at) noexcept:
        """Chunk arrays for R row groups of C columns, carved from ONE allocation (fresh memory
        costs page faults per allocation; one large block gets huge pages). Every ColumnChunk
        takes bytes, so R * C is bounded by the bytes left: a lying header cannot make us
        allocate gigabytes."""
        cdef uint8_t[::1] mem
        cdef int64_t[:, ::1] p0
        cdef Py_ssize_t RC, o_spans, o_rec, o_enc, o_pt, total
        if C and self.R > (self.end - at) // C:
            return <int>self.err(E_TOO_MANY_CHUNKS, at, NULL, NULL, self.R, C)
        RC = self.R * C
        o_spans = N_I64 * 8 * RC                 # int64 block first: everything stays aligned
        o_rec = o_spans + 32 * RC
        o_enc = o_rec + <Py_ssize_t>sizeof(ChunkRec) * RC
        o_pt = o_enc + 4 * RC
        total = o_pt + RC
        try:
            block = np.empty(total, np.uint8)
            a_p0 = np.full((C, 2), -1, np.int64)
            a_memo = np.zeros((C, MEMO_W), np.int64)
        except MemoryError:
            return <int>self.err(E_NOMEM, at, NULL, NULL, self.R, C)
        self.C = C
        self.RC = RC
        self.out.update(
            i64=block[:o_spans].view(np.int64).reshape(N_I64, self.R, C),
            spans=block[o_spans:o_rec].view(np.int64).reshape(2, self.R, C, 2),
            chunks=block[o_rec:o_enc],
            encodings_raw=block[o_enc:o_pt].view(np.uint32).reshape(self.R, C),
            physical_types=block[o_pt:total].reshape(self.R, C),
            path_spans=a_p0,
        )
        if RC:
            mem = block
            p0 = a_p0
            self.I = <int64_t*>&mem[0]
            self.S = <int64_t*>&mem[o_spans]
            self.K = <ChunkRec*>&mem[o_rec]
            self.E = <uint32_t*>&mem[o_enc]
            self.PT = &mem[o_pt]
            self.P = &p0[0, 0]
            p0 = a_memo
            self.M = &p0[0, 0]
            self.keep.append(a_memo)
        return 0

    cdef Py_ssize_t parse_row_group(self, Py_ssize_t pos, Py_ssize_t r, int depth) noexcept nogil:
        cdef int ft = 0, et = 0, rc
        cdef int64_t fid = 0, v = 0
        cdef Py_ssize_t size = 0, c, hdr = pos, k0
        cdef uint32_t seen = 0
        cdef int64_t* g = self.G
        cdef Py_ssize_t R = self.R
        while True:
            pos = self.field(pos, &ft, &fid)
            if pos < 0:
                return -1
            if ft == CT_STOP:
                break
            if mistyped(RG_W, 8, fid, ft):
                pos = self.skip(pos, ft, depth, False)
                if pos < 0:
                    return -1
                continue
            if fid == 1:
                pos = self.list_of(pos, ft, CT_STRUCT, &size, &et, b"RowGroup.columns", depth)
                if pos < 0:
                    return -1
                if size < 0:
                    continue
                if self.C < 0:
                    with gil:
                        rc = self.alloc_chunks(size, hdr)
                    if rc:
                        return -1
                elif size != self.C:
                    return self.err(E_COLUMN_COUNT, hdr, NULL, NULL, size, self.C)
                k0 = r * self.C
                for c in range(size):
                    self.c = c
                    pos = self.parse_column_chunk(pos, k0 + c, depth + 2)
                    if pos < 0:
                        return -1
                self.c = -1
            elif fid == 2:
                pos = self.read_nonneg(pos, ft, 64, &v, b"RowGroup.total_byte_size")
                g[G_TOTAL_BYTE_SIZE * R + r] = v
            elif fid == 3:
                pos = self.read_nonneg(pos, ft, 64, &v, b"RowGroup.num_rows")
                g[G_NUM_ROWS * R + r] = v
            elif fid == 4:
                pos = self.parse_sorting_columns(pos, ft, depth + 1)
            elif fid == 5:
                pos = self.read_nonneg(pos, ft, 64, &v, b"RowGroup.file_offset")
                g[G_FILE_OFFSET * R + r] = v
            elif fid == 6:
                pos = self.read_nonneg(pos, ft, 64, &v, b"RowGroup.total_compressed_size")
                g[G_TOTAL_COMPRESSED * R + r] = v
            elif fid == 7:
                pos = self.read_int(pos, ft, 16, &v, b"RowGroup.ordinal")  # i16: wraps past 32767
                g[G_ORDINAL * R + r] = v
            else:
                pos = self.skip(pos, ft, depth, False)
            if pos < 0:
                return -1
            if 0 < fid < 32:
                seen |= (<uint32_t>1) << fid
        if not seen & ((<uint32_t>1) << 1):
            return self.err(E_MISSING, hdr, b"RowGroup", b"columns", 1, LIST_OF_STRUCT)
        if not seen & ((<uint32_t>1) << 3):
            return self.err(E_MISSING, hdr, b"RowGroup", b"num_rows", 3, CT_I64)
        return pos

    cdef Py_ssize_t parse_sorting_columns(self, Py_ssize_t pos, int ttype, int depth) noexcept nogil:
        cdef Py_ssize_t size = 0, i, at
        cdef int ft = 0
        cdef int64_t fid, v = 0
        cdef bint b = False
        cdef int32_t idx
        cdef bint has_idx
        cdef uint8_t flags
        pos = self.list_of(pos, ttype, CT_STRUCT, &size, &ft, b"RowGroup.sorting_columns", depth)
        if pos < 0 or size < 0:
            return pos
        if self.reserve_sort(size):
            return -1
        for i in range(size):
            fid = 0
            idx = -1
            has_idx = False
            flags = 0
            at = pos
            while True:
                pos = self.field(pos, &ft, &fid)
                if pos < 0:
                    return -1
                if ft == CT_STOP:
                    break
                if mistyped(SC_W, 4, fid, ft):
                    pos = self.skip(pos, ft, depth + 1, False)
                elif fid == 1:
                    pos = self.read_int(pos, ft, 32, &v, b"SortingColumn.column_idx")
                    idx = <int32_t>v
                    has_idx = True
                elif fid == 2:
                    if self.read_bool(pos, ft, &b, b"SortingColumn.descending"):
                        return -1
                    flags = (flags & 2) | (1 if b else 0)
                elif fid == 3:
                    if self.read_bool(pos, ft, &b, b"SortingColumn.nulls_first"):
                        return -1
                    flags = (flags & 1) | (2 if b else 0)
                else:
                    pos = self.skip(pos, ft, depth + 1, False)
                if pos < 0:
                    return -1
            if not has_idx:
                return self.err(E_MISSING, at, b"SortingColumn", b"column_idx", 1, CT_I32)
            if idx < 0:
                return self.err(E_SORT_INDEX, at, NULL, NULL, 0, 0)
            self.sort_idx[self.nsort] = idx
            self.sort_flags[self.nsort] = flags
            self.nsort += 1
        return pos

    cdef int reserve_sort(self, Py_ssize_t extra) noexcept nogil:
        cdef Py_ssize_t cap = self.sort_cap
        cdef void* a
        if self.nsort + extra <= cap:
            return 0
        while cap < self.nsort + extra:
            cap = cap * 2 if cap else 64
        a = PyMem_RawRealloc(self.sort_idx, cap * sizeof(int32_t))
        if a == NULL:
            return <int>self.err(E_NOMEM, 0, NULL, NULL, cap, 1)
        self.sort_idx = <int32_t*>a
        a = PyMem_RawRealloc(self.sort_flags, cap * sizeof(uint8_t))
        if a == NULL:
            return <int>self.err(E_NOMEM, 0, NULL, NULL, cap, 1)
        self.sort_flags = <uint8_t*>a
        self.sort_cap = cap
        return 0

    cdef Py_ssize_t parse_column_chunk(self, Py_ssize_t pos, Py_ssize_t k, int depth) noexcept nogil:
        cdef int ft = 0
        cdef int64_t fid = 0, v = 0
        cdef Py_ssize_t hdr = pos, s = 0, n = 0
        cdef bint has_meta = False
        cdef Py_ssize_t RC = self.RC
        cdef int j
        cdef int64_t* I = self.I
        cdef int64_t* S = self.S
        cdef ChunkRec* rec = self.K + k
        memset(rec, 0, sizeof(ChunkRec))
        for j in range(N_I64):
            I[j * RC + k] = -1
        for j in range(2):
            S[(S_START * RC + k) * 2 + j] = 0
            S[(S_LEN * RC + k) * 2 + j] = -1
        self.E[k] = 0
        while True:
            pos = self.field(pos, &ft, &fid)
            if pos < 0:
                return -1
            if ft == CT_STOP:
                break
            if mistyped(CC_W, 10, fid, ft):
                pos = self.skip(pos, ft, depth, False)
            elif fid == 3:
                pos = self.parse_column_meta(pos, k, depth + 1)
                has_meta = True
            elif fid == 1:
                pos = self.binary(pos, ft, &s, &n, b"ColumnChunk.file_path")
                if pos >= 0:
                    return self.err(E_FILE_PATH, s, NULL, NULL, n, 0)
            elif fid == 4:
                pos = self.read_nonneg(pos, ft, 64, &v, b"ColumnChunk.offset_index_offset")
                I[F_OI_OFFSET * RC + k] = v
            elif fid == 5:
                pos = self.read_nonneg(pos, ft, 32, &v, b"ColumnChunk.offset_index_length")
                I[F_OI_LENGTH * RC + k] = v
            elif fid == 6:
                pos = self.read_nonneg(pos, ft, 64, &v, b"ColumnChunk.column_index_offset")
                I[F_CI_OFFSET * RC + k] = v
            elif fid == 7:
                pos = self.read_nonneg(pos, ft, 32, &v, b"ColumnChunk.column_index_length")
                I[F_CI_LENGTH * RC + k] = v
            elif fid == 8:
                return self.err(E_ENCRYPTED, hdr, NULL, b"ColumnChunk.crypto_metadata", 0, 0)
            elif fid == 9:
                return self.err(E_ENCRYPTED, hdr, NULL, b"ColumnChunk.encrypted_column_metadata", 0, 0)
            else:
                pos = self.skip(pos, ft, depth, False)
            if pos < 0:
                return -1
        if not has_meta:
            return self.err(E_MISSING, hdr, b"ColumnChunk", b"meta_data", 3, CT_STRUCT)
        # BYTE_RANGE_START: the dictionary page when the footer has one, else the first data page.
        v = I[F_DICT_PAGE * RC + k]
        rec.byte_range_start = <uint64_t>(v if v >= 0 else I[F_DATA_PAGE * RC + k])
        if self.r > 0 and self.PT[k] != self.PT[self.c]:
            return self.err(E_TYPE_CHANGE, hdr, NULL, NULL, self.PT[k], self.PT[self.c])
        if self.base > 0 and self.check_ranges(k, hdr):
            return -1
        return pos

    cdef int check_ranges(self, Py_ssize_t k, Py_ssize_t hdr) noexcept nogil:
        """With the footer's file offset known (it is where the data region ends), every range
        the chunk points at must lie in [4, footer offset). Offsets of 0 mean "not written", and
        an empty chunk may point anywhere (parquet-cpp writes offset 0, size 0 for 0 rows)."""
        cdef int64_t lo = 4, hi = self.base, s, n
        cdef Py_ssize_t RC = self.RC
        cdef int64_t* I = self.I
        cdef int j
        cdef int64_t what[3]
        # Both are non-negative int64: compare n with hi - s, never compute s + n (it may overflow).
        s = <int64_t>self.K[k].byte_range_start
        n = <int64_t>self.K[k].total_compressed
        if n > 0 and (s < lo or s > hi or n > hi - s):
            return <int>self.err(E_RANGE_OUT, hdr, b"column chunk byte range", NULL, s, n)
        what[0] = F_BLOOM_OFFSET
        what[1] = F_CI_OFFSET
        what[2] = F_OI_OFFSET
        for j in range(3):
            s = I[what[j] * RC + k]
            if s > 0:
                n = I[(what[j] + 1) * RC + k]
                n = n if n > 0 else 0
                if s < lo or s > hi or n > hi - s:
                    return <int>self.err(E_RANGE_OUT, hdr, RANGE_NAMES[j], NULL, s, n)
        return 0

    cdef Py_ssize_t parse_column_meta(self, Py_ssize_t pos, Py_ssize_t k, int depth) noexcept nogil:
        cdef int ft = 0, et = 0
        cdef int64_t fid = 0, v = 0
        cdef Py_ssize_t hdr = pos, at, size = 0, i
        cdef uint32_t seen = 0, enc = 0
        cdef uint8_t enc_bits = 0
        cdef Py_ssize_t RC = self.RC
        cdef int64_t* I = self.I
        cdef ChunkRec* rec = self.K + k
        cdef int64_t* memo = self.M + MEMO_W * self.c
        cdef int64_t* sk = memo + MEMO_SKIP
        cdef int nskip = 0
        while True:
            pos = self.field(pos, &ft, &fid)
            if pos < 0:
                return -1
            if ft == CT_STOP:
                break
            at = pos
            if mistyped(CMD_W, 16, fid, ft):
                pos = self.skip(pos, ft, depth, False)
                if pos < 0:
                    return -1
                continue
            if fid == 1:
                pos = self.read_int(pos, ft, 32, &v, b"ColumnMetaData.type")
                if pos >= 0 and (v < 0 or v > MAX_PHYSICAL_TYPE):
                    return self.err(E_PHYSICAL_TYPE, at, NULL, NULL, v, 0)
                self.PT[k] = <uint8_t>v
            elif fid == 2:
                if self.same_as(pos, memo[MEMO_ENC], memo[MEMO_ENC + 1]):
                    pos += memo[MEMO_ENC + 1]
                    rec.encodings = <uint8_t>(memo[MEMO_ENC + 2] >> 32)
                    self.E[k] = <uint32_t>memo[MEMO_ENC + 2]
                    seen |= (<uint32_t>1) << 2
                    continue
                memo[MEMO_ENC + 1] = 0
                pos = self.list_of(pos, ft, CT_I32, &size, &et, b"ColumnMetaData.encodings", depth)
                if pos >= 0 and size < 0:
                    continue
                for i in range(size if pos >= 0 else 0):
                    pos = self.read_int(pos, et, 32, &v, b"ColumnMetaData.encodings")
                    if pos < 0:
                        break
                    if <uint64_t>v < 10:
                        enc_bits |= ENC_BIT[<uint64_t>v]
                    if <uint64_t>v < 32:
                        enc |= (<uint32_t>1) << v
                rec.encodings = enc_bits
                self.E[k] = enc
                if pos >= 0:
                    memo[MEMO_ENC] = at
                    memo[MEMO_ENC + 1] = pos - at
                    memo[MEMO_ENC + 2] = (<int64_t>enc_bits << 32) | enc
            elif fid == 3:
                size = 0
                pos = self.parse_path(pos, ft, depth, &size)
                if pos >= 0 and size < 0:  # elements of another type: absent
                    continue
            elif fid == 4:
                pos = self.read_int(pos, ft, 32, &v, b"ColumnMetaData.codec")
                if pos >= 0 and (v < 0 or v > MAX_CODEC):
                    return self.err(E_CODEC, at, NULL, NULL, v, 0)
                rec.codec = <uint8_t>v
            elif fid == 5:
                pos = self.read_nonneg(pos, ft, 64, &v, b"ColumnMetaData.num_values")
                rec.num_values = <uint64_t>v
            elif fid == 6:
                pos = self.read_nonneg(pos, ft, 64, &v, b"ColumnMetaData.total_uncompressed_size")
                I[F_TOTAL_UNCOMPRESSED * RC + k] = v
            elif fid == 7:
                pos = self.read_nonneg(pos, ft, 64, &v, b"ColumnMetaData.total_compressed_size")
                rec.total_compressed = <uint64_t>v
            elif fid == 9:
                pos = self.read_nonneg(pos, ft, 64, &v, b"ColumnMetaData.data_page_offset")
                I[F_DATA_PAGE * RC + k] = v
            elif fid == 10:
                pos = self.read_nonneg(pos, ft, 64, &v, b"ColumnMetaData.index_page_offset")
                I[F_INDEX_PAGE * RC + k] = v
            elif fid == 11:
                pos = self.read_nonneg(pos, ft, 64, &v, b"ColumnMetaData.dictionary_page_offset")
                I[F_DICT_PAGE * RC + k] = v
            elif fid == 12:
                I[F_STATS_POS * RC + k] = pos
                pos = self.parse_statistics(pos, k, depth + 1)
            elif fid == 14:
                pos = self.read_nonneg(pos, ft, 64, &v, b"ColumnMetaData.bloom_filter_offset")
                I[F_BLOOM_OFFSET * RC + k] = v
            elif fid == 15:
                pos = self.read_nonneg(pos, ft, 32, &v, b"ColumnMetaData.bloom_filter_length")
                I[F_BLOOM_LENGTH * RC + k] = v
            elif nskip < MEMO_SKIPS:  # encoding_stats, size_statistics, ...: often repeated
                if sk[0] == fid * 256 + ft and self.same_as(pos, sk[1], sk[2]):
                    pos += sk[2]
                else:
                    pos = self.skip(pos, ft, depth, False)
                    sk[0] = fid * 256 + ft
                    sk[1] = at
                    sk[2] = pos - at
                sk += 3
                nskip += 1
            else:
                pos = self.skip(pos, ft, depth, False)
            if pos < 0:
                return -1
            if 0 < fid < 32:
                seen |= (<uint32_t>1) << fid
        if (seen & 0x2FE) != 0x2FE:  # fields 1..7 and 9 are required
            for fid in range(1, 10):
                if fid != 8 and not seen & ((<uint32_t>1) << fid):
                    return self.err(E_MISSING, hdr, b"ColumnMetaData", META_REQUIRED[fid], fid, META_WANT[fid])
        return pos

    cdef Py_ssize_t parse_path(self, Py_ssize_t pos, int ttype, int depth, Py_ssize_t* size) noexcept nogil:
        """path_in_schema: only validated and located here. Row group 0's spans are kept; a later
        row group whose path bytes equal row group 0's is skipped with one compare (identical
        bytes decode identically); any other is recorded in `mism` for the wrapper to judge.
        `size` is -1 for a list of non-binary elements (skipped: the field is absent)."""
        cdef Py_ssize_t start = pos, i, s = 0, n = 0
        cdef Py_ssize_t c = self.c
        cdef int64_t ps, pl
        cdef int et = 0
        if self.r > 0:
            ps = self.P[2 * c]
            pl = self.P[2 * c + 1]
            if ttype == CT_LIST and self.same_as(start, ps, pl):
                return pos + pl
        pos = self.list_of(pos, ttype, CT_BINARY, size, &et, b"ColumnMetaData.path_in_schema", depth)
        if pos < 0 or size[0] < 0:
            return pos
        for i in range(size[0]):
            if pos < 0:
                return -1
            pos = self.binary(pos, CT_BINARY, &s, &n, b"path_in_schema element")
        if pos < 0:
            return -1
        if self.r == 0:
            self.P[2 * c] = start
            self.P[2 * c + 1] = pos - start
            return pos
        if self.add_mismatch(start, pos):
            return -1
        return pos

    cdef int add_mismatch(self, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
        cdef void* a
        if self.nmism == self.mism_cap:
            self.mism_cap = self.mism_cap * 2 if self.mism_cap else 16
            a = PyMem_RawRealloc(self.mism, self.mism_cap * 4 * sizeof(int64_t))
            if a == NULL:
                return <int>self.err(E_NOMEM, start, NULL, NULL, self.mism_cap, 4)
            self.mism = <int64_t*>a
        self.mism[4 * self.nmism] = self.r
        self.mism[4 * self.nmism + 1] = self.c
        self.mism[4 * self.nmism + 2] = start
        self.mism[4 * self.nmism + 3] = end
        self.nmism += 1
        return 0

    cdef Py_ssize_t parse_statistics(self, Py_ssize_t pos, Py_ssize_t k, int depth) noexcept nogil:
        cdef int ft = 0
        cdef int64_t fid = 0, v = 0
        cdef Py_ssize_t s = 0, n = 0, j
        cdef bint b = False
        cdef bint min_exact = True
        cdef bint max_exact = True
        cdef Py_ssize_t RC = self.RC
        cdef int64_t* span = self.S + 2 * k
        cdef ChunkRec* rec = self.K + k
        cdef uint8_t flags = 0
        while True:
            pos = self.field(pos, &ft, &fid)
            if pos < 0:
                return -1
            if ft == CT_STOP:
                break
            if mistyped(ST_W, 10, fid, ft):
                pos = self.skip(pos, ft, depth, False)
            elif fid == 5 or fid == 6:  # max_value, min_value
                pos = self.binary(pos, ft, &s, &n, b"Statistics.min_value/max_value")
                j = 1 if fid == 5 else 0
                span[S_START * 2 * RC + j] = s
                span[S_LEN * 2 * RC + j] = n
            elif fid == 3:  # counts: present only when >= 0 (a negative count is no count)
                pos = self.read_int(pos, ft, 64, &v, b"Statistics.null_count")
                flags = (flags | STAT_NULL_COUNT_PRESENT) if v >= 0 else (flags & ~STAT_NULL_COUNT_PRESENT)
                rec.null_count = <uint64_t>v if v >= 0 else 0
            elif fid == 4:
                pos = self.read_int(pos, ft, 64, &v, b"Statistics.distinct_count")
                flags = (flags | STAT_DISTINCT_COUNT_PRESENT) if v >= 0 else (flags & ~STAT_DISTINCT_COUNT_PRESENT)
                rec.distinct_count = <uint64_t>v if v >= 0 else 0
            elif fid == 9:
                pos = self.read_int(pos, ft, 64, &v, b"Statistics.nan_count")
                self.I[F_NAN_COUNT * RC + k] = v if v >= 0 else -1
            elif fid == 7:
                if self.read_bool(pos, ft, &b, b"Statistics.is_max_value_exact"):
                    return -1
                max_exact = b
            elif fid == 8:
                if self.read_bool(pos, ft, &b, b"Statistics.is_min_value_exact"):
                    return -1
                min_exact = b
            else:  # 1 / 2 (deprecated max / min) are read lazily from statistics_offset
                pos = self.skip(pos, ft, depth, False)
            if pos < 0:
                return -1
        # An empty min/max counts as absent (docs/format.md#statistics).
        for j in range(2):
            if span[S_LEN * 2 * RC + j] > 0:
                if j == 0:
                    flags |= STAT_MIN_PRESENT | (STAT_MIN_EXACT if min_exact else 0)
                else:
                    flags |= STAT_MAX_PRESENT | (STAT_MAX_EXACT if max_exact else 0)
            else:
                span[S_LEN * 2 * RC + j] = -1
                span[S_START * 2 * RC + j] = 0
        rec.stat_flags = flags
        return pos


cdef const char* RANGE_NAMES[3]
RANGE_NAMES[:] = [b"bloom filter", b"column index", b"offset index"]

cdef const char* META_REQUIRED[10]
META_REQUIRED[:] = [NULL, b"type", b"encodings", b"path_in_schema", b"codec", b"num_values",
                    b"total_uncompressed_size", b"total_compressed_size", NULL, b"data_page_offset"]
cdef int META_WANT[10]
META_WANT[:] = [0, CT_I32, CT_LIST | CT_I32 << 4, CT_LIST | CT_BINARY << 4, CT_I32, CT_I64, CT_I64, CT_I64, 0,
                CT_I64]


cdef _Parser _new_parser(const uint8_t[::1] buf, int64_t base_offset):
    cdef _Parser p = _Parser()
    p.keep.append(buf)
    p.p = &buf[0] if buf.shape[0] else NULL
    p.end = buf.shape[0]
    p.base = base_offset
    p.out = {}
    return p


def parse_file_metadata(const uint8_t[::1] buf, int64_t base_offset=0):
    """Parse FileMetaData from `buf` (the Thrift bytes of a footer). `base_offset` is where `buf`
    starts in the file, 0 when unknown; when known, messages give file offsets and every chunk,
    bloom filter and page index range must lie in the data region [4, base_offset).

    Returns a dict: version, num_rows, created_by (bytes | None), key_value_metadata
    [(bytes, bytes | None)], column_orders [int] | None, schema [10-tuples], schema_spans,
    fields [(field id, type, value start, value end)], end; R, C (C is -1 with no row group);
    rg (N_RG, R) int64, rg_spans (R, 2), sort_offsets (R + 1,), sort_idx int32, sort_flags uint8;
    once a row group was seen: chunks (R * C * 64,) uint8 holding ChunkRec records, i64
    (N_I64, R, C), spans (2, R, C, 2), physical_types (R, C) uint8, encodings_raw (R, C) uint32,
    path_spans (C, 2) (start, length) of row group 0's paths, and path_mismatch (n, 4) int64 rows
    (r, c, start, end) of later paths whose bytes differ from row group 0's.
    """
    cdef _Parser p = _new_parser(buf, base_offset)
    cdef Py_ssize_t i
    cdef int32_t[::1] si
    cdef uint8_t[::1] sf
    cdef int64_t[:, ::1] mm
    p.out.update(created_by=None, key_value_metadata=[], column_orders=None)
    p.parse_file_metadata(0)
    out = p.out
    out["R"] = p.R
    out["C"] = p.C
    a_si = np.empty(p.nsort, np.int32)
    a_sf = np.empty(p.nsort, np.uint8)
    si = a_si
    sf = a_sf
    for i in range(p.nsort):
        si[i] = p.sort_idx[i]
        sf[i] = p.sort_flags[i]
    a_mm = np.empty((p.nmism, 4), np.int64)
    mm = a_mm
    for i in range(p.nmism):
        mm[i, 0] = p.mism[4 * i]
        mm[i, 1] = p.mism[4 * i + 1]
        mm[i, 2] = p.mism[4 * i + 2]
        mm[i, 3] = p.mism[4 * i + 3]
    out.update(sort_idx=a_si, sort_flags=a_sf, path_mismatch=a_mm)
    return out


def scan_struct(const uint8_t[::1] buf, Py_ssize_t pos=0, int64_t base_offset=0):
    """Walk the struct at `pos` without decoding it: ([(field id, type nibble, value start,
    value end)], end). A bool field has an empty value span (its value is the nibble, 1 = true)."""
    cdef _Parser p = _new_parser(buf, base_offset)
    cdef int ft = 0
    cdef int64_t fid = 0
    cdef Py_ssize_t start
    if pos < 0 or pos > p.end:
        raise ValueError("pos outside the buffer")
    fields = []
    while True:
        pos = p.check(p.field(pos, &ft, &fid))
        if ft == CT_STOP:
            break
        start = pos
        pos = p.check(p.skip(pos, ft, 1, False))
        fields.append((fid, ft, start, pos))
    return fields, pos


def binary_fields(const uint8_t[::1] buf, const int64_t[::1] positions, int64_t fid0, int64_t fid1):
    """For the struct at each position (-1 = none), the (start, length) of its binary fields
    `fid0` and `fid1`: two (n, 2) int64 arrays, length -1 where absent. Reads the deprecated
    Statistics min (2) / max (1) lazily, from `statistics_offset`."""
    cdef _Parser p = _new_parser(buf, 0)
    cdef Py_ssize_t n = positions.shape[0], i, s = 0, ln = 0, pos
    cdef int ft = 0
    cdef int64_t fid
    a_start = np.zeros((n, 2), np.int64)
    a_len = np.full((n, 2), -1, np.int64)
    cdef int64_t[:, ::1] st = a_start
    cdef int64_t[:, ::1] le = a_len
    for i in range(n):
        if positions[i] < 0 or positions[i] >= p.end:
            continue
        pos = positions[i]
        fid = 0
        while True:
            pos = p.check(p.field(pos, &ft, &fid))
            if ft == CT_STOP:
                break
            if ft == CT_BINARY and (fid == fid0 or fid == fid1):
                pos = p.check(p.binary(pos, ft, &s, &ln, b"binary field"))
                st[i, 0 if fid == fid0 else 1] = s
                le[i, 0 if fid == fid0 else 1] = ln
            else:
                pos = p.check(p.skip(pos, ft, 1, False))
    return a_start, a_len


# PageHeader fields page_header returns, in order (-1 where absent; is_compressed defaults to 1).
PAGE_HEADER_FIELDS = ("end", "type", "uncompressed_page_size", "compressed_page_size", "num_values",
                      "encoding", "definition_level_encoding", "num_nulls", "num_rows",
                      "definition_levels_byte_length", "repetition_levels_byte_length", "is_compressed")


def page_header(const uint8_t[::1] buf, Py_ssize_t pos=0):
    """The PageHeader at `pos`, read with the footer parser's bounded primitives: a tuple in the
    order of PAGE_HEADER_FIELDS. num_values / encoding come from whichever of data_page_header (5),
    dictionary_page_header (7) or data_page_header_v2 (8) is present; the v2-only fields and the
    v1 definition level encoding stay -1 elsewhere. Unknown and mistyped fields are skipped (Thrift's
    rule); statistics are skipped too. ParquetFormatError on malformed bytes."""
    cdef _Parser p = _new_parser(buf, 0)
    cdef int64_t h[12]
    cdef Py_ssize_t i
    if pos < 0 or pos > p.end:
        raise ValueError("pos outside the buffer")
    p.check(p.page_header_into(pos, h))
    return tuple([h[i] for i in range(12)])


cdef object page_parser():
    """A parser for `read_page_header`: one per thread walking pages at a time (it holds the
    buffer being read and its first error)."""
    cdef _Parser p = _Parser()
    p.out = {}
    return p


cdef Py_ssize_t read_page_header(void* parser, const uint8_t* buf, Py_ssize_t n, Py_ssize_t pos,
                                 int64_t* h) noexcept nogil:
    """`page_header` without the GIL, for kernels walking a chunk's pages (`_split`): h[:12] as
    its tuple; the position after the header, or -1 when the bytes are malformed (the caller
    falls back to `page_header`, which raises what is wrong). `parser`: a `page_parser()` kept
    alive by the caller and used by one thread at a time."""
    return _read_page_header(<_Parser>parser, buf, n, pos, h)


cdef Py_ssize_t _read_page_header(_Parser p, const uint8_t* buf, Py_ssize_t n, Py_ssize_t pos,
                                  int64_t* h) noexcept nogil:
    p.p, p.end, p.ecode = buf, n, 0
    if pos < 0 or pos > n:
        return -1
    return p.page_header_into(pos, h)
