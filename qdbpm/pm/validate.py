"""The structural checks of docs/format.md#validation, over numpy views of a mapped `_pm`.

The reader (pm/reader.py) calls them in file order while it parses, each before the bytes it
guards are read, with or without the CRC check: nothing read later (accessors, the pruning code,
the SBBF kernels) can follow an out-of-range reference or meet a filter size the kernels cannot
take. Checks over columns, row groups and chunks are vectorised: a 10,000-row-group file costs a
few array operations, not a Python loop per chunk. Each check reports the first offender.

`err(msg, cls=CorruptFileError)` builds the exception (the reader's: it names the file).

These checks are the reference: on open the reader first runs `check_open`, the Cython kernel
(_validate.pyx) that makes all of them in one pass and answers a Plan (all fine) or None
(something is wrong); only then does it run the checks below, which say what and raise. The
kernel accepts exactly what they accept (tests/pm/test_validate_kernel.py).
"""

from __future__ import annotations

import numpy as np

from . import layout as L
from ._validate import check_open  # noqa: F401  (re-exported: the reader's fast path)
from ..errors import UnsupportedFeatureError

_HEADER_FF = L.HEADER_AT["feature_flags"]


def _first(mask) -> tuple:
    """Index (a tuple of ints) of the first True of a boolean array."""
    return tuple(int(v[0]) for v in np.nonzero(mask))


def committed_size(file_size: int, head: bytes, err) -> int:
    """The committed size stored at offset 0, checked against the file's size."""
    if file_size < L.HEADER_SIZE:
        raise err(f"file is {file_size} bytes, shorter than the {L.HEADER_SIZE}-byte header")
    committed = int.from_bytes(head, "little")
    if committed < L.MIN_COMMITTED_SIZE:
        raise err(f"PARQUET_META_FILE_SIZE at offset {L.PM_SIZE_OFFSET} = {committed}: smaller than the "
                  f"minimum {L.MIN_COMMITTED_SIZE}")
    if committed > file_size:
        raise err(f"PARQUET_META_FILE_SIZE at offset {L.PM_SIZE_OFFSET} = {committed}: larger than the "
                  f"file ({file_size} bytes)")
    return committed


# --- footer chain ---------------------------------------------------------------------------


def check_snapshot_size(size: int, pm_size: int, err) -> None:
    if size < L.MIN_COMMITTED_SIZE or size > pm_size:
        raise err(f"snapshot size {size} is outside [{L.MIN_COMMITTED_SIZE}, {pm_size}]")


def footer_start(size: int, length: int, err) -> int:
    """Start of the footer whose FOOTER_LENGTH trailer (`length`) ends the snapshot of committed
    size `size`."""
    at = size - L.TRAILER_SIZE
    if length > at:
        raise err(f"FOOTER_LENGTH trailer at offset {at} = {length}: larger than the {at} bytes before it")
    start = at - length
    if start < L.HEADER_SIZE:
        raise err(f"footer offset {start} (trailer at {at} = {length}) is inside the "
                  f"{L.HEADER_SIZE}-byte header")
    if length < L.min_footer_size(0):
        raise err(f"FOOTER_LENGTH trailer at offset {at} = {length}: shorter than the "
                  f"{L.min_footer_size(0)}-byte minimum footer")
    return start


def prev_link(prev: int, size: int, start: int, err) -> None:
    """A PREV link points strictly back, so the chain walk ends."""
    if prev >= size:
        raise err(f"footer at {start}: PREV_PARQUET_META_FILE_SIZE at offset "
                  f"{start + L.FOOTER_AT['prev_pm_size']} = {prev} is not below its own snapshot size {size} "
                  "(a loop or a corrupt link)")


# --- header ---------------------------------------------------------------------------------


def check_header(ff: int, ncols: int, nsort: int, dts: int, size: int, err) -> None:
    """Feature bits, counts and the designated timestamp of the fixed header."""
    unknown_required = ff & L.REQUIRED_FEATURE_MASK & ~L.KNOWN_HEADER_FEATURES
    if unknown_required:
        raise err(f"FEATURE_FLAGS at offset {_HEADER_FF} = 0x{ff:016x}: unknown required "
                  f"bits 0x{unknown_required:016x}", UnsupportedFeatureError)
    if ff & L.FEATURE_BLOOM_FILTERS_EXTERNAL and not ff & L.FEATURE_BLOOM_FILTERS:
        raise err(f"FEATURE_FLAGS at offset {_HEADER_FF} = 0x{ff:016x}: BLOOM_FILTERS_EXTERNAL (bit 1) "
                  "without BLOOM_FILTERS (bit 0)")
    desc_end = L.HEADER_SIZE + L.COLUMN_SIZE * ncols
    if desc_end > size:
        raise err(f"COLUMN_COUNT at offset {L.HEADER_AT['column_count']} = {ncols}: descriptors end at "
                  f"{desc_end}, past the committed size {size}")
    sort_end = desc_end + L.SORTING_COLUMN_SIZE * nsort
    if sort_end > size:
        raise err(f"SORTING_COLUMN_COUNT at offset {L.HEADER_AT['sorting_column_count']} = {nsort}: sorting "
                  f"columns end at {sort_end}, past the committed size {size}")
    if not -1 <= dts < ncols:
        raise err(f"DESIGNATED_TIMESTAMP at offset {L.HEADER_AT['designated_timestamp']} = {dts}: not in "
                  f"[-1, {ncols})")
    if ff & L.FEATURE_SORTING_IS_DTS_ASC and dts < 0:
        raise err(f"FEATURE_FLAGS at offset {_HEADER_FF} = 0x{ff:016x}: SORTING_IS_DTS_ASC (bit 2) with "
                  "no designated timestamp")


def check_columns(cols, sort_idx, size: int, err) -> None:
    """Sorting indices and column descriptors: names inside the file after the sorting list,
    repetition, physical type and FIXED_LEN_BYTE_ARRAY width."""
    ncols = len(cols)
    desc_end = L.HEADER_SIZE + L.COLUMN_SIZE * ncols
    sort_end = desc_end + L.SORTING_COLUMN_SIZE * len(sort_idx)
    bad = sort_idx >= ncols
    if bad.any():
        (i,) = _first(bad)
        raise err(f"sorting column {i} at offset {desc_end + L.SORTING_COLUMN_SIZE * i} = {int(sort_idx[i])}: "
                  f"not a column index (< {ncols})")
    if not ncols:
        return
    off, ln = cols["name_offset"], cols["name_length"].astype(np.uint64)
    bad = off < sort_end
    if bad.any():
        (i,) = _first(bad)
        raise err(f"column {i} NAME_OFFSET at offset {L.column_field_offset(i, 'name_offset')} = {int(off[i])}: "
                  f"inside the descriptors or sorting columns (which end at {sort_end})")
    bad = ln > np.uint64(size) - np.minimum(off, np.uint64(size))  # off + ln > size, without wrapping
    if bad.any():
        (i,) = _first(bad)
        raise err(f"column {i} name at {int(off[i])} with NAME_LENGTH {int(ln[i])} (offset "
                  f"{L.column_field_offset(i, 'name_length')}) runs past the committed size {size}")
    flags = cols["flags"]
    bad = (flags & L.COLUMN_FLAG_REPETITION_MASK) >> L.COLUMN_FLAG_REPETITION_SHIFT == 3
    if bad.any():
        (i,) = _first(bad)
        raise err(f"column {i} FLAGS at offset {L.column_field_offset(i, 'flags')} = 0x{int(flags[i]):x}: "
                  "repetition value 3")
    pt = cols["physical_type"]
    bad = pt > L.PHYSICAL_TYPE_MAX
    if bad.any():
        (i,) = _first(bad)
        raise err(f"column {i} PHYSICAL_TYPE at offset {L.column_field_offset(i, 'physical_type')} = "
                  f"{int(pt[i])}: not 0..{L.PHYSICAL_TYPE_MAX}")
    bad = (pt == L.PT_FIXED_LEN_BYTE_ARRAY) & (cols["fixed_byte_len"] <= 0)
    if bad.any():
        # pruning encodes literals at this width (as the writer, it requires one)
        (i,) = _first(bad)
        raise err(f"column {i} FIXED_BYTE_LEN at offset {L.column_field_offset(i, 'fixed_byte_len')} = "
                  f"{int(cols['fixed_byte_len'][i])}: a FIXED_LEN_BYTE_ARRAY column needs a positive width")


def check_sorting(ff: int, cols, dts: int, err) -> None:
    if ff & L.FEATURE_SORTING_IS_DTS_ASC and int(cols[dts]["flags"]) & L.COLUMN_FLAG_DESCENDING:
        raise err(f"SORTING_IS_DTS_ASC with the designated timestamp column {dts} flagged DESCENDING")


def check_bloom_count(n: int, ncols: int, at: int, err) -> None:
    if n == 0 or n > ncols:
        raise err(f"BLOOM_COL_COUNT at offset {at} = {n}: must be in 1..{ncols}")


def check_bloom_columns(bc, ncols: int, at: int, err) -> None:
    """The header's bloom column list (at offset `at`): column indices, strictly ascending."""
    if int(bc.max()) >= ncols:
        raise err(f"bloom column index {int(bc.max())} at offset {at}: not < {ncols}")
    if len(bc) > 1 and not np.all(bc[1:] > bc[:-1]):
        raise err(f"bloom column list at offset {at} is not strictly ascending: {bc.tolist()}")


# --- footer ---------------------------------------------------------------------------------


def check_footer(start: int, length: int, rgc: int, fff: int, err) -> None:
    """The fixed footer: room for its row group entries, no unknown required footer bit."""
    need = L.min_footer_size(rgc)
    if length < need:
        raise err(f"footer at {start}: ROW_GROUP_COUNT at offset {start + L.FOOTER_AT['row_group_count']} = "
                  f"{rgc} needs at least {need} bytes but FOOTER_LENGTH is {length}")
    unknown_required = fff & L.REQUIRED_FEATURE_MASK & ~L.KNOWN_FOOTER_FEATURES
    if unknown_required:
        raise err(f"footer at {start}: FOOTER_FEATURE_FLAGS at offset "
                  f"{start + L.FOOTER_AT['footer_feature_flags']} = 0x{fff:016x}: unknown required bits "
                  f"0x{unknown_required:016x}", UnsupportedFeatureError)


def check_footer_end(start: int, pos: int, crc_pos: int, ff: int, fff: int, err) -> None:
    """Bytes between the last known footer section (ending at `pos`) and the CRC need an unknown
    optional feature bit to explain them."""
    if pos != crc_pos:
        unknown_optional = ((fff & ~L.KNOWN_FOOTER_FEATURES) | (ff & ~L.KNOWN_HEADER_FEATURES)) \
            & L.OPTIONAL_FEATURE_MASK
        if not unknown_optional:
            raise err(f"footer at {start}: {crc_pos - pos} bytes between the last known section "
                      f"(ends at {pos}) and the CRC at {crc_pos}, and no feature flag explains them")


# --- blocks ---------------------------------------------------------------------------------


def check_block_offsets(offs, fixed: int, header_end: int, footer: int, err) -> None:
    """Each block's fixed part lies in [header_end, footer), and no two blocks share bytes: a
    small file could otherwise claim row groups x columns chunk records far beyond its size (a
    memory bomb); no writer shares a block."""
    if not len(offs):
        return
    bad = (offs < header_end) | (offs + fixed > footer)
    if bad.any():
        (i,) = _first(bad)
        raise err(f"footer at {footer}: row group {i} BLOCK_OFFSET at offset "
                  f"{footer + L.FOOTER_FIXED_SIZE + L.ROW_GROUP_ENTRY_SIZE * i} -> {int(offs[i])}: the "
                  f"{fixed}-byte block must lie within [{header_end}, {footer})")
    if not (np.diff(offs) >= fixed).all():  # ascending and apart, the usual layout, needs no sort
        order = np.argsort(offs, kind="stable")
        close = np.nonzero(np.diff(offs[order]) < fixed)[0]
        if close.size:
            i, j = sorted((int(order[close[0]]), int(order[close[0] + 1])))
            raise err(f"footer at {footer}: row groups {i} and {j} have overlapping blocks at offsets "
                      f"{int(offs[i])} and {int(offs[j])} (a block's fixed part is {fixed} bytes)")


def check_chunks(chunks, offs, limit: int, err) -> None:
    """Codecs, and stats: inline lengths up to 8, out-of-line bytes inside the block region
    (which ends at `limit`, the footer start)."""
    if not chunks.size:
        return
    codec = chunks["codec"]
    bad = codec > L.CODEC_MAX
    if bad.any():
        r, c = _first(bad)
        raise err(f"row group {r} column {c}: CODEC at offset {L.chunk_field_offset(int(offs[r]), c, 'codec')} = "
                  f"{int(codec[r, c])}: not 0..{L.CODEC_MAX}")
    flags, sizes = chunks["stat_flags"], chunks["stat_sizes"]
    ool_base = offs[:, None] + L.block_size(chunks.shape[1])
    for slot, present, inlined, shift, name in (
        ("min_stat", L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, 0, "MIN"),
        ("max_stat", L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED, L.STAT_SIZES_MAX_SHIFT, "MAX"),
    ):
        has = (flags & present) != 0
        inl = has & ((flags & inlined) != 0)
        nib = (sizes >> shift) & 0xF
        bad = inl & (nib > L.INLINE_STAT_MAX)
        if bad.any():
            r, c = _first(bad)
            raise err(f"row group {r} column {c}: STAT_SIZES at offset "
                      f"{L.chunk_field_offset(int(offs[r]), c, 'stat_sizes')} gives an inline {name} of "
                      f"{int(nib[r, c])} bytes (> {L.INLINE_STAT_MAX})")
        ool = has & ~inl
        if ool.any():
            ref = chunks[slot].astype(np.uint64)
            rel = (ref >> np.uint64(L.OOL_LENGTH_BITS)).astype(np.int64)
            ln = (ref & np.uint64(L.OOL_MAX_LENGTH)).astype(np.int64)
            # rel may be huge on hostile input: compare without overflow.
            bad = ool & ((rel > limit) | (ool_base + rel + ln > limit))
            if bad.any():
                r, c = _first(bad)
                raise err(f"row group {r} column {c}: out-of-line {name} reference at offset "
                          f"{L.chunk_field_offset(int(offs[r]), c, slot)} (offset {int(rel[r, c])}, length "
                          f"{int(ln[r, c])}) runs past the block region ending at {limit}")


def inline_bloom_lengths(buf, positions, present) -> np.ndarray:
    """The i32 LENGTH before each present inline bitset (`positions`: absolute offsets of the
    prefixes); 0 where absent."""
    lengths = np.zeros(positions.shape, np.int64)
    if present.any():
        p = positions[present]
        lengths[present] = buf[p[:, None] + np.arange(L.BLOOM_LENGTH_PREFIX)].copy().view(L.I32).reshape(-1)
    return lengths


def check_blooms(bt, bloom_columns, external: bool, buf, header_end: int, limit: int,
                 parquet_footer_offset: int, err) -> None:
    """Everything the SBBF kernels assume of a filter, CRC or not: its bytes lie inside the buffer
    they are read into (the block region [header_end, limit) inline, the Parquet data before its
    footer external), and its length is a positive multiple of 32 with at most SBBF_MAX_BLOCKS
    blocks (qdbpm.bloom.probe_many)."""
    if external:
        off, ln = bt["offset"], bt["length"]  # uint64: compared without int64 wrap-around
        pfo = np.uint64(parquet_footer_offset)
        present = ln != 0
        for bad, why in (
            ((off == 0) == present, "has one of offset / length zero"),
            (present & ((ln % L.SBBF_BLOCK_BYTES != 0) | (ln > L.SBBF_MAX_BYTES)),
             f"has a length that is not a multiple of {L.SBBF_BLOCK_BYTES} up to {L.SBBF_MAX_BYTES}"),
            (present & ((off > pfo) | (ln > pfo - np.minimum(off, pfo))),
             f"is not inside the Parquet data before its footer at {parquet_footer_offset}"),
        ):
            if bad.any():
                r, k = _first(bad)
                raise err(f"row group {r} bloom column {int(bloom_columns[k])}: external bloom "
                          f"entry (offset {int(off[r, k])}, length {int(ln[r, k])}) {why}")
        return
    pos = bt.astype(np.int64) << L.BLOCK_OFFSET_SHIFT
    present = bt != 0
    bad = present & ((pos < header_end) | (pos + L.BLOOM_LENGTH_PREFIX > limit))
    if not bad.any() and present.any():
        lengths = inline_bloom_lengths(buf, pos, present)
        odd = present & ((lengths <= 0) | (lengths % L.SBBF_BLOCK_BYTES != 0))
        if odd.any():
            r, k = _first(odd)
            raise err(f"row group {r} bloom column {int(bloom_columns[k])}: inline bitset at "
                      f"offset {int(pos[r, k])} has LENGTH {int(lengths[r, k])}, not a positive "
                      f"multiple of {L.SBBF_BLOCK_BYTES}")
        bad = present & (pos + L.BLOOM_LENGTH_PREFIX + lengths > limit)
    if bad.any():
        r, k = _first(bad)
        raise err(f"row group {r} bloom column {int(bloom_columns[k])}: inline bitset at "
                  f"offset {int(pos[r, k])} does not fit before the footer at {limit}")
