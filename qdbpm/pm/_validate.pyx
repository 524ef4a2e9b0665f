# cython: language_level=3
"""Kernel: every structural check of one `_pm` open (docs/format.md#validation) in one pass over
the committed bytes, plus what the reader needs of them, read once.

`check_open` walks the footer chain to the pinned snapshot, checks the header, descriptors,
sorting and bloom column lists, footer sections, block offsets, chunk records and bloom table, and
decodes the column names. It answers "all fine" (a Plan) or "something is wrong" (None) only:
the messages belong to the Python checks (validate.py), which the reader runs on None, so an
error keeps its class, text and file order. So it must accept exactly what they accept
(tests/pm/test_validate_kernel.py holds it to that). The CRC is the reader's, as before.

Every read goes through `rd`, checked against the end of the buffer (outside it: no read, the
input is bad); no product of two counts is formed before a bound on it is known, so hostile
counts neither wrap nor allocate (the one allocation, sorting unordered block offsets, is bounded
by the footer's size). Layout constants are C copies of qdbpm.pm.layout's (CONSTANTS, compared
by the test).
"""

from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, qsort
from libc.string cimport memcpy

cimport numpy as cnp

cnp.import_array()

cdef enum:
    HEADER_SIZE = 32
    COLUMN_SIZE = 32
    CHUNK_SIZE = 64
    FOOTER_FIXED_SIZE = 40
    SORTING_COLUMN_SIZE = 4
    ROW_GROUP_ENTRY_SIZE = 4
    BLOCK_NUM_ROWS_SIZE = 8
    CRC_SIZE = 4
    TRAILER_SIZE = 4
    BLOCK_OFFSET_SHIFT = 3
    BLOOM_INLINE_ENTRY_SIZE = 4
    BLOOM_EXTERNAL_ENTRY_SIZE = 16
    BLOOM_LENGTH_PREFIX = 4
    BLOOM_COL_COUNT_SIZE = 4
    BLOOM_COLUMN_SIZE = 4
    SBBF_BLOCK_BYTES = 32
    OOL_LENGTH_BITS = 16
    OOL_MAX_LENGTH = 0xFFFF
    PARQUET_TAIL = 8
    MIN_COMMITTED_SIZE = 36
    SCRATCHPAD_COUNT_SIZE = 4
    SCRATCHPAD_ENTRY_HEAD_SIZE = 8
    SCRATCHPAD_MAX_BYTES = 1 << 20
    SQUASH_TRACKER_SIZE = 8
    SEQ_TXN_SIZE = 8
    # record fields
    H_FEATURE_FLAGS = 8, H_DESIGNATED_TIMESTAMP = 16, H_SORTING_COLUMN_COUNT = 20, H_COLUMN_COUNT = 24
    C_NAME_OFFSET = 0, C_FLAGS = 16, C_FIXED_BYTE_LEN = 20, C_NAME_LENGTH = 24, C_PHYSICAL_TYPE = 28
    K_CODEC = 0, K_STAT_FLAGS = 2, K_STAT_SIZES = 3, K_MIN_STAT = 48, K_MAX_STAT = 56
    F_PARQUET_FOOTER_OFFSET = 0, F_PARQUET_FOOTER_LENGTH = 8, F_ROW_GROUP_COUNT = 12, F_UNUSED_BYTES = 16
    F_PREV_PM_SIZE = 24, F_FOOTER_FEATURE_FLAGS = 32
    # flag bits and enums
    FEATURE_BLOOM_FILTERS = 1
    FEATURE_BLOOM_FILTERS_EXTERNAL = 2
    FEATURE_SORTING_IS_DTS_ASC = 4
    FEATURE_SQUASH_TRACKER = 8
    KNOWN_HEADER_FEATURES = 0xF
    FOOTER_FEATURE_SEQ_TXN = 1
    FOOTER_FEATURE_SCRATCHPAD = 2
    KNOWN_FOOTER_FEATURES = 3
    COLUMN_FLAG_REPETITION_SHIFT = 2
    COLUMN_FLAG_REPETITION_MASK = 0b1100
    COLUMN_FLAG_DESCENDING = 1 << 4
    PHYSICAL_TYPE_MAX = 7
    PT_FIXED_LEN_BYTE_ARRAY = 7
    CODEC_MAX = 7
    STAT_MIN_PRESENT = 1 << 0
    STAT_MIN_INLINED = 1 << 1
    STAT_MAX_PRESENT = 1 << 3
    STAT_MAX_INLINED = 1 << 4
    STAT_SIZES_MAX_SHIFT = 4
    INLINE_STAT_MAX = 8

cdef uint64_t OPTIONAL_FEATURE_MASK = 0x00000000FFFFFFFF
cdef uint64_t REQUIRED_FEATURE_MASK = 0xFFFFFFFF00000000
cdef uint64_t SBBF_MAX_BYTES = (<uint64_t>SBBF_BLOCK_BYTES) << 32
cdef uint64_t U64_LIMIT = 0xFFFFFFFFFFFFFFFF

CONSTANTS = {
    "HEADER_SIZE": HEADER_SIZE, "COLUMN_SIZE": COLUMN_SIZE, "CHUNK_SIZE": CHUNK_SIZE,
    "FOOTER_FIXED_SIZE": FOOTER_FIXED_SIZE, "SORTING_COLUMN_SIZE": SORTING_COLUMN_SIZE,
    "ROW_GROUP_ENTRY_SIZE": ROW_GROUP_ENTRY_SIZE, "BLOCK_NUM_ROWS_SIZE": BLOCK_NUM_ROWS_SIZE,
    "CRC_SIZE": CRC_SIZE, "TRAILER_SIZE": TRAILER_SIZE, "BLOCK_OFFSET_SHIFT": BLOCK_OFFSET_SHIFT,
    "BLOOM_INLINE_ENTRY_SIZE": BLOOM_INLINE_ENTRY_SIZE, "BLOOM_EXTERNAL_ENTRY_SIZE": BLOOM_EXTERNAL_ENTRY_SIZE,
    "BLOOM_LENGTH_PREFIX": BLOOM_LENGTH_PREFIX, "BLOOM_COL_COUNT_SIZE": BLOOM_COL_COUNT_SIZE,
    "BLOOM_COLUMN_SIZE": BLOOM_COLUMN_SIZE, "SBBF_BLOCK_BYTES": SBBF_BLOCK_BYTES,
    "SBBF_MAX_BYTES": SBBF_MAX_BYTES, "OOL_LENGTH_BITS": OOL_LENGTH_BITS, "OOL_MAX_LENGTH": OOL_MAX_LENGTH,
    "PARQUET_TAIL": PARQUET_TAIL, "MIN_COMMITTED_SIZE": MIN_COMMITTED_SIZE,
    "SCRATCHPAD_COUNT_SIZE": SCRATCHPAD_COUNT_SIZE, "SCRATCHPAD_ENTRY_HEAD_SIZE": SCRATCHPAD_ENTRY_HEAD_SIZE,
    "SCRATCHPAD_MAX_BYTES": SCRATCHPAD_MAX_BYTES, "SQUASH_TRACKER_SIZE": SQUASH_TRACKER_SIZE,
    "SEQ_TXN_SIZE": SEQ_TXN_SIZE,
    "HEADER_AT": {"feature_flags": H_FEATURE_FLAGS, "designated_timestamp": H_DESIGNATED_TIMESTAMP,
                  "sorting_column_count": H_SORTING_COLUMN_COUNT, "column_count": H_COLUMN_COUNT},
    "COLUMN_AT": {"name_offset": C_NAME_OFFSET, "flags": C_FLAGS, "fixed_byte_len": C_FIXED_BYTE_LEN,
                  "name_length": C_NAME_LENGTH, "physical_type": C_PHYSICAL_TYPE},
    "CHUNK_AT": {"codec": K_CODEC, "stat_flags": K_STAT_FLAGS, "stat_sizes": K_STAT_SIZES,
                 "min_stat": K_MIN_STAT, "max_stat": K_MAX_STAT},
    "FOOTER_AT": {"parquet_footer_offset": F_PARQUET_FOOTER_OFFSET, "parquet_footer_length": F_PARQUET_FOOTER_LENGTH,
                  "row_group_count": F_ROW_GROUP_COUNT, "unused_bytes": F_UNUSED_BYTES,
                  "prev_pm_size": F_PREV_PM_SIZE, "footer_feature_flags": F_FOOTER_FEATURE_FLAGS},
    "FEATURE_BLOOM_FILTERS": FEATURE_BLOOM_FILTERS, "FEATURE_BLOOM_FILTERS_EXTERNAL": FEATURE_BLOOM_FILTERS_EXTERNAL,
    "FEATURE_SORTING_IS_DTS_ASC": FEATURE_SORTING_IS_DTS_ASC, "FEATURE_SQUASH_TRACKER": FEATURE_SQUASH_TRACKER,
    "KNOWN_HEADER_FEATURES": KNOWN_HEADER_FEATURES, "FOOTER_FEATURE_SEQ_TXN": FOOTER_FEATURE_SEQ_TXN,
    "FOOTER_FEATURE_SCRATCHPAD": FOOTER_FEATURE_SCRATCHPAD, "KNOWN_FOOTER_FEATURES": KNOWN_FOOTER_FEATURES,
    "OPTIONAL_FEATURE_MASK": OPTIONAL_FEATURE_MASK, "REQUIRED_FEATURE_MASK": REQUIRED_FEATURE_MASK,
    "COLUMN_FLAG_REPETITION_SHIFT": COLUMN_FLAG_REPETITION_SHIFT,
    "COLUMN_FLAG_REPETITION_MASK": COLUMN_FLAG_REPETITION_MASK, "COLUMN_FLAG_DESCENDING": COLUMN_FLAG_DESCENDING,
    "PHYSICAL_TYPE_MAX": PHYSICAL_TYPE_MAX, "PT_FIXED_LEN_BYTE_ARRAY": PT_FIXED_LEN_BYTE_ARRAY,
    "CODEC_MAX": CODEC_MAX, "STAT_MIN_PRESENT": STAT_MIN_PRESENT, "STAT_MIN_INLINED": STAT_MIN_INLINED,
    "STAT_MAX_PRESENT": STAT_MAX_PRESENT, "STAT_MAX_INLINED": STAT_MAX_INLINED,
    "STAT_SIZES_MAX_SHIFT": STAT_SIZES_MAX_SHIFT, "INLINE_STAT_MAX": INLINE_STAT_MAX,
}


cdef struct Src:
    const uint8_t* p
    uint64_t n  # the committed size: nothing at or past it is read
    bint oob  # a read fell outside [0, n): the input is bad (the checks should have said so first)


cdef inline uint64_t rd(Src* s, uint64_t off, int width) noexcept nogil:
    """Little-endian unsigned `width`-byte read at `off`; 0, and s.oob set, when it would leave
    the buffer."""
    cdef uint64_t v = 0
    cdef int k
    if off > s.n or <uint64_t>width > s.n - off:
        s.oob = True
        return 0
    for k in range(width):
        v |= (<uint64_t>s.p[off + k]) << (8 * k)
    return v


cdef inline bint fits(uint64_t pos, uint64_t width, uint64_t end) noexcept nogil:
    """pos + width <= end, without wrap-around (pos may lie past the buffer: a name of length 0
    may sit anywhere, and the header ends after it)."""
    return pos <= end and width <= end - pos


cdef inline uint64_t umin(uint64_t a, uint64_t b) noexcept nogil:
    return a if a < b else b


cdef int cmp_u64(const void* a, const void* b) noexcept nogil:
    cdef uint64_t x = (<const uint64_t*>a)[0], y = (<const uint64_t*>b)[0]
    return (x > y) - (x < y)


cdef class Plan:
    """Where each section of a checked snapshot lies and its scalar fields, read once (fields:
    _validate.pxd)."""


cdef bint walk_chain(Src* s, object target, Plan pl) except -1:
    """The footer whose Parquet size is `target` (None: the latest), as the reader's chain walk."""
    cdef uint64_t size = s.n, at, length, start, pfo, pfl, prev, t = 0
    cdef bint c_target = type(target) is int and 0 <= target <= U64_LIMIT
    if c_target:
        t = target
    while True:
        if size < MIN_COMMITTED_SIZE or size > s.n:
            return False
        at = size - TRAILER_SIZE
        length = rd(s, at, 4)
        if length > at:
            return False
        start = at - length
        if start < HEADER_SIZE or length < FOOTER_FIXED_SIZE + CRC_SIZE:
            return False
        pfo = rd(s, start + F_PARQUET_FOOTER_OFFSET, 8)
        pfl = rd(s, start + F_PARQUET_FOOTER_LENGTH, 4)
        prev = rd(s, start + F_PREV_PM_SIZE, 8)
        if s.oob:
            return False
        if target is None:
            break
        if c_target:
            if t >= pfl + PARQUET_TAIL and pfo == t - pfl - PARQUET_TAIL:
                break
        elif (<object>pfo) + (<object>pfl) + PARQUET_TAIL == target:  # Python ints: no wrap-around
            break
        if prev == 0 or prev >= size:  # not found, or a link that does not point back
            return False
        size = prev
    pl.snapshot_size, pl.footer_start, pl.footer_length = size, start, length
    pl.crc_offset = start + length - CRC_SIZE
    pl.stored_crc = rd(s, pl.crc_offset, 4)
    pl.parquet_footer_offset, pl.parquet_footer_length, pl.prev_pm_size = pfo, pfl, prev
    pl.row_group_count = rd(s, start + F_ROW_GROUP_COUNT, 4)
    pl.unused_bytes = rd(s, start + F_UNUSED_BYTES, 8)
    pl.footer_feature_flags = rd(s, start + F_FOOTER_FEATURE_FLAGS, 8)
    return not s.oob


cdef bint check_header(Src* s, Plan pl) except -1:
    """Header, column descriptors, sorting list, names' bounds, bloom column list, squash tracker."""
    cdef uint64_t n = s.n, ff, ncols, nsort, desc_end, sort_end, i, d, off, nl, name_end = 0, pos, nb, c, last = 0
    cdef int32_t dts, flags, fbl
    cdef uint8_t pt
    ff = rd(s, H_FEATURE_FLAGS, 8)
    dts = <int32_t>rd(s, H_DESIGNATED_TIMESTAMP, 4)
    nsort = rd(s, H_SORTING_COLUMN_COUNT, 4)
    ncols = rd(s, H_COLUMN_COUNT, 4)
    if s.oob or ff & REQUIRED_FEATURE_MASK & ~(<uint64_t>KNOWN_HEADER_FEATURES):
        return False
    if ff & FEATURE_BLOOM_FILTERS_EXTERNAL and not ff & FEATURE_BLOOM_FILTERS:
        return False
    desc_end = HEADER_SIZE + COLUMN_SIZE * ncols  # < 2**38: counts are u32
    sort_end = desc_end + SORTING_COLUMN_SIZE * nsort
    if desc_end > n or sort_end > n:
        return False
    if dts < -1 or <int64_t>dts >= <int64_t>ncols:
        return False
    if ff & FEATURE_SORTING_IS_DTS_ASC and dts < 0:
        return False
    for i in range(nsort):
        if rd(s, desc_end + SORTING_COLUMN_SIZE * i, 4) >= ncols:
            return False
    for i in range(ncols):
        d = HEADER_SIZE + COLUMN_SIZE * i
        off = rd(s, d + C_NAME_OFFSET, 8)
        flags = <int32_t>rd(s, d + C_FLAGS, 4)
        fbl = <int32_t>rd(s, d + C_FIXED_BYTE_LEN, 4)
        nl = rd(s, d + C_NAME_LENGTH, 4)
        pt = <uint8_t>rd(s, d + C_PHYSICAL_TYPE, 1)
        if off < sort_end or nl > n - umin(off, n):
            return False
        if (flags & COLUMN_FLAG_REPETITION_MASK) >> COLUMN_FLAG_REPETITION_SHIFT == 3:
            return False
        if pt > PHYSICAL_TYPE_MAX or (pt == PT_FIXED_LEN_BYTE_ARRAY and fbl <= 0):
            return False
        if off + nl > name_end:  # no wrap: off <= n here, or nl == 0
            name_end = off + nl
    if ff & FEATURE_SORTING_IS_DTS_ASC and \
            rd(s, HEADER_SIZE + COLUMN_SIZE * <uint64_t>dts + C_FLAGS, 4) & COLUMN_FLAG_DESCENDING:
        return False
    pos = sort_end if sort_end > name_end else name_end
    pl.bloom_columns_at = pl.bloom_column_count = 0
    if ff & FEATURE_BLOOM_FILTERS:
        if not fits(pos, BLOOM_COL_COUNT_SIZE, n):
            return False
        nb = rd(s, pos, 4)
        if nb == 0 or nb > ncols:
            return False
        pos += BLOOM_COL_COUNT_SIZE
        if not fits(pos, BLOOM_COLUMN_SIZE * nb, n):
            return False
        for i in range(nb):
            c = rd(s, pos + BLOOM_COLUMN_SIZE * i, 4)
            if c >= ncols or (i and c <= last):  # column indices, strictly ascending
                return False
            last = c
        pl.bloom_columns_at, pl.bloom_column_count = pos, nb
        pos += BLOOM_COLUMN_SIZE * nb
    pl.squash_tracker = None
    if ff & FEATURE_SQUASH_TRACKER:
        if not fits(pos, SQUASH_TRACKER_SIZE, n):
            return False
        pl.squash_tracker = <int64_t>rd(s, pos, 8)
        pos += SQUASH_TRACKER_SIZE
    pl.feature_flags, pl.column_count, pl.sorting_column_count = ff, ncols, nsort
    pl.designated_timestamp, pl.header_end = dts, pos
    return not s.oob


cdef bint check_footer(Src* s, Plan pl) except -1:
    """Room for the row group entries, feature bits, bloom table, SEQ_TXN, scratchpad, and nothing
    unexplained before the CRC."""
    cdef uint64_t start = pl.footer_start, crc = pl.crc_offset, rgc = pl.row_group_count
    cdef uint64_t nb = pl.bloom_column_count, fff = pl.footer_feature_flags, ff = pl.feature_flags
    cdef uint64_t pos, esz, sp, count, k, ln
    if pl.footer_length < FOOTER_FIXED_SIZE + ROW_GROUP_ENTRY_SIZE * rgc + CRC_SIZE:
        return False
    if fff & REQUIRED_FEATURE_MASK & ~(<uint64_t>KNOWN_FOOTER_FEATURES):
        return False
    pos = start + FOOTER_FIXED_SIZE + ROW_GROUP_ENTRY_SIZE * rgc  # <= crc, by the length check
    pl.bloom_table_at = -1
    if nb:
        esz = BLOOM_EXTERNAL_ENTRY_SIZE if ff & FEATURE_BLOOM_FILTERS_EXTERNAL else BLOOM_INLINE_ENTRY_SIZE
        if rgc * nb > (crc - pos) // esz:  # esz * rgc * nb > crc - pos, without forming the product
            return False
        pl.bloom_table_at = pos
        pos += esz * rgc * nb
    pl.seq_txn = None
    if fff & FOOTER_FEATURE_SEQ_TXN:
        if pos + SEQ_TXN_SIZE > crc:
            return False
        pl.seq_txn = <int64_t>rd(s, pos, 8)
        pos += SEQ_TXN_SIZE
    pl.scratchpad_at = -1
    if fff & FOOTER_FEATURE_SCRATCHPAD:
        pl.scratchpad_at = sp = pos
        if pos + SCRATCHPAD_COUNT_SIZE > crc:
            return False
        count = rd(s, pos, 4)
        pos += SCRATCHPAD_COUNT_SIZE
        for k in range(count):  # each entry takes >= 8 bytes before the CRC: bounded by the footer
            if pos + SCRATCHPAD_ENTRY_HEAD_SIZE > crc:
                return False
            ln = rd(s, pos + 4, 4)
            if pos + SCRATCHPAD_ENTRY_HEAD_SIZE + ln > crc:
                return False
            pos += SCRATCHPAD_ENTRY_HEAD_SIZE + ln
            if pos - sp > SCRATCHPAD_MAX_BYTES:
                return False
    if pos != crc and not (((fff & ~(<uint64_t>KNOWN_FOOTER_FEATURES)) | (ff & ~(<uint64_t>KNOWN_HEADER_FEATURES)))
                           & OPTIONAL_FEATURE_MASK):
        return False
    return not s.oob


cdef bint check_blocks(Src* s, Plan pl) except -1:
    """Block offsets inside [header_end, footer) and apart, then every chunk record in them."""
    cdef uint64_t rgc = pl.row_group_count, ncols = pl.column_count, limit = pl.footer_start
    cdef uint64_t fixed = BLOCK_NUM_ROWS_SIZE + CHUNK_SIZE * ncols, head = pl.header_end
    cdef uint64_t entries = pl.footer_start + FOOTER_FIXED_SIZE, i, o, step = fixed
    cdef bint apart = True, even = True
    cdef cnp.npy_intp dim = <cnp.npy_intp>rgc
    offs_arr = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT64, 0)
    cdef int64_t* offs = <int64_t*>cnp.PyArray_DATA(offs_arr)
    for i in range(rgc):
        o = rd(s, entries + ROW_GROUP_ENTRY_SIZE * i, 4) << BLOCK_OFFSET_SHIFT
        if o < head or o + fixed > limit:
            return False
        offs[i] = <int64_t>o
        if i:
            if i == 1:
                step = o - <uint64_t>offs[0] if o >= <uint64_t>offs[0] else 0
            if o < <uint64_t>offs[i - 1] + fixed:
                apart = False
            if o != <uint64_t>offs[i - 1] + step:
                even = False
    if not apart and not offsets_apart(offs, rgc, fixed):
        return False
    if s.oob or not check_chunks(s, offs, rgc, ncols, fixed, limit):
        return False
    pl.block_offsets = offs_arr
    pl.block_step = <int64_t>step if even and step >= fixed else 0
    return True


cdef bint offsets_apart(const int64_t* offs, uint64_t rgc, uint64_t fixed) noexcept:
    """No two blocks share bytes, whatever their order (sorted: the rare, unordered case)."""
    cdef uint64_t* tmp = <uint64_t*>malloc(rgc * sizeof(uint64_t))
    cdef uint64_t i
    cdef bint ok = True
    if tmp == NULL:
        return False  # the reference checks decide (and allocate) instead
    for i in range(rgc):
        tmp[i] = <uint64_t>offs[i]
    qsort(tmp, rgc, sizeof(uint64_t), cmp_u64)
    for i in range(1, rgc):
        if tmp[i] - tmp[i - 1] < fixed:
            ok = False
            break
    free(tmp)
    return ok


cdef bint check_chunks(Src* s, const int64_t* offs, uint64_t rgc, uint64_t ncols, uint64_t fixed,
                       uint64_t limit) noexcept:
    """Codecs, inline stat sizes, and out-of-line stats inside the block region. The fields are
    loaded directly, not through rd: a block found to lie inside the buffer holds its records."""
    cdef uint64_t i, c, ool_base, ref, rel, ln
    cdef uint8_t fl, sz
    cdef const uint8_t* r
    for i in range(rgc):
        if <uint64_t>offs[i] > s.n or fixed > s.n - <uint64_t>offs[i]:  # check_blocks' bound, restated here
            return False
        ool_base = <uint64_t>offs[i] + fixed
        r = s.p + offs[i] + BLOCK_NUM_ROWS_SIZE
        for c in range(ncols):
            if r[K_CODEC] > CODEC_MAX:
                return False
            fl, sz = r[K_STAT_FLAGS], r[K_STAT_SIZES]
            if fl & STAT_MIN_PRESENT:
                if fl & STAT_MIN_INLINED:
                    if (sz & 0xF) > INLINE_STAT_MAX:
                        return False
                else:
                    memcpy(&ref, r + K_MIN_STAT, 8)  # little-endian hosts only (qdbpm/__init__.py refuses others)
                    rel, ln = ref >> OOL_LENGTH_BITS, ref & OOL_MAX_LENGTH
                    if rel > limit or ool_base + rel + ln > limit:
                        return False
            if fl & STAT_MAX_PRESENT:
                if fl & STAT_MAX_INLINED:
                    if (sz >> STAT_SIZES_MAX_SHIFT) & 0xF > INLINE_STAT_MAX:
                        return False
                else:
                    memcpy(&ref, r + K_MAX_STAT, 8)
                    rel, ln = ref >> OOL_LENGTH_BITS, ref & OOL_MAX_LENGTH
                    if rel > limit or ool_base + rel + ln > limit:
                        return False
            r += CHUNK_SIZE
    return not s.oob


cdef bint check_blooms(Src* s, Plan pl) noexcept:
    """Each filter's bytes lie where the SBBF kernels read them, with a length they can take."""
    cdef uint64_t count = pl.row_group_count * pl.bloom_column_count, at = <uint64_t>pl.bloom_table_at, j
    cdef uint64_t off, ln, pfo = pl.parquet_footer_offset, head = pl.header_end, limit = pl.footer_start
    cdef int64_t length
    cdef bint present
    if pl.bloom_table_at < 0:
        return True
    if pl.feature_flags & FEATURE_BLOOM_FILTERS_EXTERNAL:
        for j in range(count):
            off = rd(s, at + BLOOM_EXTERNAL_ENTRY_SIZE * j, 8)
            ln = rd(s, at + BLOOM_EXTERNAL_ENTRY_SIZE * j + 8, 8)
            present = ln != 0
            if (off == 0) == present:
                return False
            if present and (ln % SBBF_BLOCK_BYTES or ln > SBBF_MAX_BYTES or off > pfo or ln > pfo - off):
                return False
        return not s.oob
    for j in range(count):
        off = rd(s, at + BLOOM_INLINE_ENTRY_SIZE * j, 4) << BLOCK_OFFSET_SHIFT
        if off == 0:
            continue
        if off < head or off + BLOOM_LENGTH_PREFIX > limit:
            return False
        length = <int32_t>rd(s, off, 4)
        if length <= 0 or length % SBBF_BLOCK_BYTES or off + BLOOM_LENGTH_PREFIX + <uint64_t>length > limit:
            return False
    return not s.oob


cdef object decode_names(Src* s, Plan pl):
    """Column names (None: one is not UTF-8) and the sorting columns as the reader lists them."""
    cdef uint64_t i, d, ncols = pl.column_count, at = HEADER_SIZE + COLUMN_SIZE * ncols, k, off, nl
    names = []
    for i in range(ncols):
        d = HEADER_SIZE + COLUMN_SIZE * i
        off, nl = rd(s, d + C_NAME_OFFSET, 8), rd(s, d + C_NAME_LENGTH, 4)
        if nl == 0:
            names.append("")
            continue
        if not fits(off, nl, s.n):
            return None
        try:
            names.append(PyUnicode_DecodeUTF8(<char*>s.p + off, <Py_ssize_t>nl, NULL))
        except UnicodeDecodeError:
            return None
    if pl.feature_flags & FEATURE_SORTING_IS_DTS_ASC:
        sorting = [(pl.designated_timestamp, False)]
    else:
        sorting = []
        for i in range(pl.sorting_column_count):
            k = rd(s, at + SORTING_COLUMN_SIZE * i, 4)
            flags = rd(s, HEADER_SIZE + COLUMN_SIZE * k + C_FLAGS, 4)
            sorting.append((<object>k, bool(flags & COLUMN_FLAG_DESCENDING)))
    pl.names, pl.sorting_columns = names, sorting
    return names


cdef object plan_of(const uint8_t* p, uint64_t n, object parquet_size, bint names=True):
    """check_open over n bytes at p (NULL when n is 0). names=False: the column names are
    neither decoded nor checked to be UTF-8 (plan.names is None): the caller checks them
    (pm/_batch.pyx does, once per distinct set of names) or the plan is not all fine."""
    cdef Src s
    s.p, s.n, s.oob = p, n, False
    cdef Plan pl = Plan.__new__(Plan)
    if not (walk_chain(&s, parquet_size, pl) and check_header(&s, pl) and check_footer(&s, pl)
            and check_blocks(&s, pl) and check_blooms(&s, pl)):
        return None
    if names and decode_names(&s, pl) is None or s.oob:
        return None
    return pl


cdef bint names_ok(const uint8_t* p, uint64_t n, object plan):
    """The column names of a file plan_of(..., names=False) accepted decode as UTF-8."""
    cdef Src s
    s.p, s.n, s.oob = p, n, False
    return decode_names(&s, <Plan>plan) is not None and not s.oob


def check_open(const uint8_t[::1] buf, parquet_size=None):
    """A Plan of the snapshot of `buf` (the committed bytes) whose Parquet size is `parquet_size`
    (None: the latest) when every structural check passes, else None."""
    return plan_of(&buf[0] if buf.shape[0] else NULL, <uint64_t>buf.shape[0], parquet_size)
