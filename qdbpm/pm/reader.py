"""Read `_pm` files: map the committed size, walk the footer chain to the pinned snapshot, verify
the CRC and every structural invariant, and expose numpy views.

Every offset is checked before it is read; all checks run on open, with or without the CRC check,
so later accessors (and the pruning code and SBBF kernels that trust them) never see an
out-of-range reference or a filter size the kernels cannot take.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from . import layout as L
from ..bloom.sbbf import _MAX_BLOCKS as SBBF_MAX_BLOCKS
from .crc import crc32
from .description import ByteRefs, Column, Description
from ..errors import ChecksumError, CorruptFileError, SnapshotNotFoundError, UnsupportedFeatureError

SBBF_MAX_BYTES = L.SBBF_BLOCK_BYTES * SBBF_MAX_BLOCKS  # the largest filter the kernels probe


def _u32(buf, off):
    return int.from_bytes(buf[off : off + 4], "little")


def _u64(buf, off):
    return int.from_bytes(buf[off : off + 8], "little")


class _Footer:
    """Fixed part of one footer, located through its trailer."""

    __slots__ = ("pm_size", "start", "length", "fixed", "parquet_size")

    def __init__(self, pm_size, start, length, fixed):
        self.pm_size = pm_size
        self.start = start
        self.length = length
        self.fixed = fixed
        self.parquet_size = L.parquet_size(int(fixed["parquet_footer_offset"]), int(fixed["parquet_footer_length"]))


class ParquetMeta:
    """One pinned snapshot of a `_pm` file. Use `qdbpm.open`."""

    def __init__(self, path, *, parquet_size=None, verify=True, data=None):
        self.path = os.fspath(path)
        self._mm = None
        self._cache = {}
        if data is not None:
            # Bytes fetched from an object store: the same checks, over a buffer instead of a map.
            committed = self._committed_size(len(data), bytes(data[: L.PM_SIZE_BYTES]))
            self._mm = memoryview(data)[:committed]
        else:
            with builtin_open(self.path, "rb") as f:
                # The committed size first, the file size second: a writer publishing in between
                # has already grown the file, and never truncates below a published size.
                head = f.read(L.PM_SIZE_BYTES)
                file_size = os.fstat(f.fileno()).st_size
                committed = self._committed_size(file_size, head)
                # Map exactly the committed size: bytes past it may be an unpublished append.
                self._mm = mmap.mmap(f.fileno(), committed, access=mmap.ACCESS_READ)
        try:
            self._buf = np.frombuffer(self._mm, dtype=np.uint8)
            self.pm_size = committed
            # Only trailers and fixed footer fields are read before the CRC check, so a flipped
            # byte anywhere it covers is reported as a checksum mismatch, not as whatever
            # structural error the flip happens to cause.
            self._footer = self._find_snapshot(parquet_size)
            self.crc_offset = self._footer.start + self._footer.length - L.CRC_SIZE
            self.stored_crc = _u32(self._buf, self.crc_offset)
            if verify:
                self.verify_checksum()
            self._parse_header()
            self._parse_footer()
            self._parse_blocks()
        except BaseException:
            self.close()
            raise

    def _committed_size(self, file_size, head):
        if file_size < L.HEADER_SIZE:
            raise self._err(f"file is {file_size} bytes, shorter than the {L.HEADER_SIZE}-byte header")
        committed = int.from_bytes(head, "little")
        if committed < L.MIN_COMMITTED_SIZE:
            raise self._err(f"PARQUET_META_FILE_SIZE at offset 0 = {committed}: smaller than the "
                            f"minimum {L.MIN_COMMITTED_SIZE}")
        if committed > file_size:
            raise self._err(f"PARQUET_META_FILE_SIZE at offset 0 = {committed}: larger than the "
                            f"file ({file_size} bytes)")
        return committed

    # --- errors -----------------------------------------------------------------------------

    def _err(self, msg, cls=CorruptFileError):
        return cls(f"{self.path}: {msg}")

    # --- header -----------------------------------------------------------------------------

    def _parse_header(self):
        buf, size = self._buf, self.pm_size
        h = np.frombuffer(buf, L.HEADER_DTYPE, count=1)[0]
        self.feature_flags = int(h["feature_flags"])
        unknown_required = self.feature_flags & L.REQUIRED_FEATURE_MASK & ~L.KNOWN_HEADER_FEATURES
        if unknown_required:
            raise self._err(f"FEATURE_FLAGS at offset 8 = 0x{self.feature_flags:016x}: unknown required "
                            f"bits 0x{unknown_required:016x}", UnsupportedFeatureError)
        ff = self.feature_flags
        if ff & L.FEATURE_BLOOM_FILTERS_EXTERNAL and not ff & L.FEATURE_BLOOM_FILTERS:
            raise self._err(f"FEATURE_FLAGS at offset 8 = 0x{ff:016x}: BLOOM_FILTERS_EXTERNAL (bit 1) "
                            "without BLOOM_FILTERS (bit 0)")
        ncols = int(h["column_count"])
        nsort = int(h["sorting_column_count"])
        dts = int(h["designated_timestamp"])
        desc_end = L.HEADER_SIZE + L.COLUMN_SIZE * ncols
        if desc_end > size:
            raise self._err(f"COLUMN_COUNT at offset 24 = {ncols}: descriptors end at {desc_end}, past "
                            f"the committed size {size}")
        sort_end = desc_end + L.SORTING_COLUMN_SIZE * nsort
        if sort_end > size:
            raise self._err(f"SORTING_COLUMN_COUNT at offset 20 = {nsort}: sorting columns end at "
                            f"{sort_end}, past the committed size {size}")
        if not -1 <= dts < ncols:
            raise self._err(f"DESIGNATED_TIMESTAMP at offset 16 = {dts}: not in [-1, {ncols})")
        if ff & L.FEATURE_SORTING_IS_DTS_ASC and dts < 0:
            raise self._err(f"FEATURE_FLAGS at offset 8 = 0x{ff:016x}: SORTING_IS_DTS_ASC (bit 2) with "
                            "no designated timestamp")
        cols = np.frombuffer(buf, L.COLUMN_DTYPE, count=ncols, offset=L.HEADER_SIZE)
        sort_idx = np.frombuffer(buf, L.U32, count=nsort, offset=desc_end)
        bad = np.nonzero(sort_idx >= ncols)[0]
        if bad.size:
            i = int(bad[0])
            raise self._err(f"sorting column {i} at offset {desc_end + 4 * i} = {int(sort_idx[i])}: not a "
                            f"column index (< {ncols})")
        names, names_end = [], sort_end
        for i in range(ncols):
            off, ln = int(cols[i]["name_offset"]), int(cols[i]["name_length"])
            at = L.HEADER_SIZE + L.COLUMN_SIZE * i
            if off < sort_end:
                raise self._err(f"column {i} NAME_OFFSET at offset {at} = {off}: inside the descriptors "
                                f"or sorting columns (which end at {sort_end})")
            if off + ln > size:
                raise self._err(f"column {i} name at {off} with NAME_LENGTH {ln} (offset {at + 24}) runs "
                                f"past the committed size {size}")
            try:
                names.append(buf[off : off + ln].tobytes().decode("utf-8"))
            except UnicodeDecodeError as e:
                raise self._err(f"column {i} name at offset {off}: invalid UTF-8 ({e.reason})") from None
            names_end = max(names_end, off + ln)
            rep = L.flags_repetition(int(cols[i]["flags"]))
            if rep == 3:
                raise self._err(f"column {i} FLAGS at offset {at + 16} = 0x{int(cols[i]['flags']):x}: "
                                "repetition value 3")
            pt = int(cols[i]["physical_type"])
            if pt > L.PHYSICAL_TYPE_MAX:
                raise self._err(f"column {i} PHYSICAL_TYPE at offset {at + 28} = {pt}: not 0..7")
            if pt == L.PT_FIXED_LEN_BYTE_ARRAY and int(cols[i]["fixed_byte_len"]) <= 0:
                # pruning encodes literals at this width (as the writer, it requires one)
                raise self._err(f"column {i} FIXED_BYTE_LEN at offset {at + 20} = {int(cols[i]['fixed_byte_len'])}: "
                                "a FIXED_LEN_BYTE_ARRAY column needs a positive width")
        if ff & L.FEATURE_SORTING_IS_DTS_ASC and int(cols[dts]["flags"]) & L.COLUMN_FLAG_DESCENDING:
            raise self._err(f"SORTING_IS_DTS_ASC with the designated timestamp column {dts} flagged DESCENDING")
        pos = names_end
        self.bloom_columns = np.zeros(0, np.uint32)
        if ff & L.FEATURE_BLOOM_FILTERS:
            if pos + 4 > size:
                raise self._err(f"bloom section at offset {pos} runs past the committed size {size}")
            n = _u32(buf, pos)
            if n == 0 or n > ncols:
                raise self._err(f"BLOOM_COL_COUNT at offset {pos} = {n}: must be in 1..{ncols}")
            if pos + 4 + 4 * n > size:
                raise self._err(f"bloom column list at offset {pos + 4} runs past the committed size {size}")
            bc = np.frombuffer(buf, L.U32, count=n, offset=pos + 4)
            if int(bc.max()) >= ncols:
                raise self._err(f"bloom column index {int(bc.max())} at offset {pos + 4}: not < {ncols}")
            if n > 1 and not np.all(bc[1:] > bc[:-1]):
                raise self._err(f"bloom column list at offset {pos + 4} is not strictly ascending: {bc.tolist()}")
            self.bloom_columns = bc
            pos += 4 + 4 * n
        self.squash_tracker = None
        if ff & L.FEATURE_SQUASH_TRACKER:
            if pos + L.SQUASH_TRACKER_SIZE > size:
                raise self._err(f"squash tracker at offset {pos} runs past the committed size {size}")
            self.squash_tracker = int(np.frombuffer(buf, L.I64, count=1, offset=pos)[0])
            pos += L.SQUASH_TRACKER_SIZE
        self.header_end = pos  # blocks start at or after this (unknown optional sections may follow)
        self.column_count = ncols
        self.columns = cols
        self.column_names = names
        self.designated_timestamp = dts
        self.sorting_column_indices = sort_idx
        if ff & L.FEATURE_SORTING_IS_DTS_ASC:
            self.sorting_columns = [(dts, False)]
        else:
            self.sorting_columns = [
                (int(i), bool(int(cols[int(i)]["flags"]) & L.COLUMN_FLAG_DESCENDING)) for i in sort_idx
            ]

    # --- footer chain -----------------------------------------------------------------------

    def _locate(self, size) -> _Footer:
        buf = self._buf
        if size < L.MIN_COMMITTED_SIZE or size > self.pm_size:
            raise self._err(f"snapshot size {size} is outside [{L.MIN_COMMITTED_SIZE}, {self.pm_size}]")
        length = _u32(buf, size - L.TRAILER_SIZE)
        if length > size - L.TRAILER_SIZE:
            raise self._err(f"FOOTER_LENGTH trailer at offset {size - 4} = {length}: larger than the "
                            f"{size - 4} bytes before it")
        start = size - L.TRAILER_SIZE - length
        if start < L.HEADER_SIZE:
            raise self._err(f"footer offset {start} (trailer at {size - 4} = {length}) is inside the "
                            f"{L.HEADER_SIZE}-byte header")
        if length < L.min_footer_size(0):
            raise self._err(f"FOOTER_LENGTH trailer at offset {size - 4} = {length}: shorter than the "
                            f"{L.min_footer_size(0)}-byte minimum footer")
        fixed = np.frombuffer(buf, L.FOOTER_DTYPE, count=1, offset=start)[0]
        return _Footer(size, start, length, fixed)

    def _find_snapshot(self, parquet_size) -> _Footer:
        size = self.pm_size
        seen = []
        while True:
            ft = self._locate(size)
            seen.append(ft.parquet_size)
            if parquet_size is None or ft.parquet_size == parquet_size:
                return ft
            prev = int(ft.fixed["prev_pm_size"])
            if prev == 0:
                raise self._err(f"no snapshot for Parquet size {parquet_size}; the chain holds {seen}",
                                SnapshotNotFoundError)
            if prev >= size:
                raise self._err(f"footer at {ft.start}: PREV_PARQUET_META_FILE_SIZE at offset "
                                f"{ft.start + 24} = {prev} is not below its own snapshot size {size} "
                                "(a loop or a corrupt link)")
            size = prev

    def snapshots(self) -> list:
        """Parquet sizes of this footer and every older one reachable through PREV, newest first."""
        out, ft = [], self._footer
        while True:
            out.append(ft.parquet_size)
            prev = int(ft.fixed["prev_pm_size"])
            if prev == 0:
                return out
            if prev >= ft.pm_size:
                raise self._err(f"footer at {ft.start}: PREV_PARQUET_META_FILE_SIZE = {prev} is not below "
                                f"{ft.pm_size} (a loop or a corrupt link)")
            ft = self._locate(prev)

    def _parse_footer(self):
        ft, buf = self._footer, self._buf
        fx = ft.fixed
        self.snapshot_pm_size = ft.pm_size
        self.footer_offset = ft.start
        self.parquet_footer_offset = int(fx["parquet_footer_offset"])
        self.parquet_footer_length = int(fx["parquet_footer_length"])
        self.parquet_size = ft.parquet_size
        self.row_group_count = rgc = int(fx["row_group_count"])
        need = L.min_footer_size(rgc)
        if ft.length < need:
            raise self._err(f"footer at {ft.start}: ROW_GROUP_COUNT at offset {ft.start + 12} = {rgc} needs "
                            f"at least {need} bytes but FOOTER_LENGTH is {ft.length}")
        self.unused_bytes = int(fx["unused_bytes"])
        self.prev_pm_size = int(fx["prev_pm_size"])
        self.footer_feature_flags = fff = int(fx["footer_feature_flags"])
        unknown_required = fff & L.REQUIRED_FEATURE_MASK & ~L.KNOWN_FOOTER_FEATURES
        if unknown_required:
            raise self._err(f"footer at {ft.start}: FOOTER_FEATURE_FLAGS at offset {ft.start + 32} = "
                            f"0x{fff:016x}: unknown required bits 0x{unknown_required:016x}",
                            UnsupportedFeatureError)
        crc_pos = self.crc_offset
        entries_at = ft.start + L.FOOTER_FIXED_SIZE
        self.block_offsets = np.frombuffer(buf, L.U32, count=rgc, offset=entries_at).astype(np.int64) << L.BLOCK_OFFSET_SHIFT
        pos = entries_at + L.ROW_GROUP_ENTRY_SIZE * rgc
        nb = len(self.bloom_columns)
        self.bloom_table = None
        if nb:
            external = bool(self.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL)
            dt = L.BLOOM_EXTERNAL_DTYPE if external else L.U32
            end = pos + dt.itemsize * rgc * nb
            if end > crc_pos:
                raise self._err(f"footer at {ft.start}: bloom table at offset {pos} ({rgc} x {nb} entries) "
                                f"runs past the CRC at {crc_pos}")
            self.bloom_table = np.frombuffer(buf, dt, count=rgc * nb, offset=pos).reshape(rgc, nb)
            pos = end
        self.seq_txn = None
        if fff & L.FOOTER_FEATURE_SEQ_TXN:
            if pos + L.SEQ_TXN_SIZE > crc_pos:
                raise self._err(f"footer at {ft.start}: SEQ_TXN at offset {pos} runs past the CRC at {crc_pos}")
            self.seq_txn = int(np.frombuffer(buf, L.I64, count=1, offset=pos)[0])
            pos += L.SEQ_TXN_SIZE
        self.scratchpad = None
        if fff & L.FOOTER_FEATURE_SCRATCHPAD:
            pos = self._parse_scratchpad(pos, crc_pos)
        if pos != crc_pos:
            unknown_optional = ((fff & ~L.KNOWN_FOOTER_FEATURES) | (self.feature_flags & ~L.KNOWN_HEADER_FEATURES)) \
                & L.OPTIONAL_FEATURE_MASK
            if not unknown_optional:
                raise self._err(f"footer at {ft.start}: {crc_pos - pos} bytes between the last known section "
                                f"(ends at {pos}) and the CRC at {crc_pos}, and no feature flag explains them")

    def _parse_scratchpad(self, pos, crc_pos):
        buf, start = self._buf, pos
        if pos + 4 > crc_pos:
            raise self._err(f"scratchpad count at offset {pos} runs past the CRC at {crc_pos}")
        count = _u32(buf, pos)
        pos += 4
        items = []
        for k in range(count):
            if pos + 8 > crc_pos:
                raise self._err(f"scratchpad entry {k} at offset {pos} runs past the CRC at {crc_pos}")
            code, ln = _u32(buf, pos), _u32(buf, pos + 4)
            if pos + 8 + ln > crc_pos:
                raise self._err(f"scratchpad entry {k} at offset {pos}: length {ln} runs past the CRC at {crc_pos}")
            items.append((code, buf[pos + 8 : pos + 8 + ln].tobytes()))
            pos += 8 + ln
            if pos - start > L.SCRATCHPAD_MAX_BYTES:
                raise self._err(f"scratchpad at offset {start} exceeds the 1 MiB limit")
        self.scratchpad = items
        return pos

    def verify_checksum(self):
        stored = self.stored_crc
        computed = crc32(self._mm, L.CRC_START, self.crc_offset)
        if stored != computed:
            raise self._err(f"checksum mismatch: stored 0x{stored:08x}, computed 0x{computed:08x} over "
                            f"[8, {self.crc_offset})", ChecksumError)

    # --- blocks -----------------------------------------------------------------------------

    def _parse_blocks(self):
        buf, ncols, rgc = self._buf, self.column_count, self.row_group_count
        offs = self.block_offsets
        fixed = L.block_size(ncols)
        limit = self._footer.start
        if rgc:
            bad = np.nonzero((offs < self.header_end) | (offs + fixed > limit))[0]
            if bad.size:
                i = int(bad[0])
                raise self._err(f"footer at {self._footer.start}: row group {i} BLOCK_OFFSET at offset "
                                f"{self._footer.start + 40 + 4 * i} -> {int(offs[i])}: the {fixed}-byte block "
                                f"must lie within [{self.header_end}, {limit})")
            # Blocks that share bytes would let a small file claim row groups x columns chunk
            # records far beyond its size (a memory bomb); no writer shares a block.
            if not (np.diff(offs) >= fixed).all():  # ascending and apart, the usual layout, needs no sort
                order = np.argsort(offs, kind="stable")
                close = np.nonzero(np.diff(offs[order]) < fixed)[0]
                if close.size:
                    i, j = sorted((int(order[close[0]]), int(order[close[0] + 1])))
                    raise self._err(f"footer at {self._footer.start}: row groups {i} and {j} have overlapping "
                                    f"blocks at offsets {int(offs[i])} and {int(offs[j])} (a block's fixed "
                                    f"part is {fixed} bytes)")
        self.num_rows, self.chunks = self._block_views(offs, fixed)
        ch = self.chunks
        if ch.size:
            codec = ch["codec"]
            if int(codec.max()) > L.CODEC_MAX:
                r, c = (int(v[0]) for v in np.nonzero(codec > L.CODEC_MAX))
                raise self._err(f"row group {r} column {c}: CODEC at offset "
                                f"{int(offs[r]) + 8 + 64 * c} = {int(codec[r, c])}: not 0..7")
            self._check_stats(offs, limit)
        if self.bloom_table is not None:
            self._check_blooms(limit)

    def _block_views(self, offs, fixed):
        rgc, ncols, mm = self.row_group_count, self.column_count, self._mm
        if rgc == 0:
            return np.zeros(0, np.uint64), np.zeros((0, ncols), L.CHUNK_DTYPE)
        step = int(offs[1] - offs[0]) if rgc > 1 else fixed
        if step >= fixed and np.all(np.diff(offs) == step):
            # Evenly spaced blocks: zero-copy strided views of the mapping.
            num_rows = np.ndarray((rgc,), L.U64, buffer=mm, offset=int(offs[0]), strides=(step,))
            chunks = np.ndarray((rgc, ncols), L.CHUNK_DTYPE, buffer=mm, offset=int(offs[0]) + 8,
                                strides=(step, L.CHUNK_SIZE))
            return num_rows, chunks
        rows = self._buf[offs[:, None] + np.arange(fixed)]
        num_rows = rows[:, :8].copy().view(L.U64).reshape(rgc)
        chunks = rows[:, 8:].copy().view(L.CHUNK_DTYPE).reshape(rgc, ncols)
        return num_rows, chunks

    def _check_stats(self, offs, limit):
        ch = self.chunks
        flags = ch["stat_flags"]
        sizes = ch["stat_sizes"]
        ool_base = offs[:, None] + L.block_size(self.column_count)
        for slot, present, inlined, shift, name in (
            ("min_stat", L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, 0, "MIN"),
            ("max_stat", L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED, 4, "MAX"),
        ):
            has = (flags & present) != 0
            inl = has & ((flags & inlined) != 0)
            nib = (sizes >> shift) & 0xF
            bad = inl & (nib > L.INLINE_STAT_MAX)
            if bad.any():
                r, c = (int(v[0]) for v in np.nonzero(bad))
                raise self._err(f"row group {r} column {c}: STAT_SIZES at offset {int(offs[r]) + 8 + 64 * c + 3} "
                                f"gives an inline {name} of {int(nib[r, c])} bytes (> 8)")
            ool = has & ~inl
            if ool.any():
                ref = ch[slot].astype(np.uint64)
                rel = (ref >> np.uint64(L.OOL_LENGTH_BITS)).astype(np.int64)
                ln = (ref & np.uint64(L.OOL_MAX_LENGTH)).astype(np.int64)
                # rel may be huge on hostile input: compare without overflow.
                bad = ool & ((rel > limit) | (ool_base + rel + ln > limit))
                if bad.any():
                    r, c = (int(v[0]) for v in np.nonzero(bad))
                    raise self._err(f"row group {r} column {c}: out-of-line {name} reference at offset "
                                    f"{int(offs[r]) + 8 + 64 * c + (48 if name == 'MIN' else 56)} "
                                    f"(offset {int(rel[r, c])}, length {int(ln[r, c])}) runs past the block "
                                    f"region ending at {limit}")

    def _check_blooms(self, limit):
        # Everything the SBBF kernels assume of a filter is established here, CRC or not: its
        # bytes lie inside the buffer they are read into, and its length is a positive multiple
        # of 32 with at most SBBF_MAX_BLOCKS blocks (qdbpm.bloom.probe_many).
        bt = self.bloom_table
        if self.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL:
            off, ln = bt["offset"], bt["length"]  # uint64: compared without int64 wrap-around
            pfo = np.uint64(self.parquet_footer_offset)
            present = ln != 0
            for bad, why in (
                ((off == 0) == present, "has one of offset / length zero"),
                (present & ((ln % L.SBBF_BLOCK_BYTES != 0) | (ln > SBBF_MAX_BYTES)),
                 f"has a length that is not a multiple of {L.SBBF_BLOCK_BYTES} up to {SBBF_MAX_BYTES}"),
                (present & ((off > pfo) | (ln > pfo - np.minimum(off, pfo))),
                 f"is not inside the Parquet data before its footer at {self.parquet_footer_offset}"),
            ):
                if bad.any():
                    r, k = (int(v[0]) for v in np.nonzero(bad))
                    raise self._err(f"row group {r} bloom column {int(self.bloom_columns[k])}: external bloom "
                                    f"entry (offset {int(off[r, k])}, length {int(ln[r, k])}) {why}")
            return
        pos = bt.astype(np.int64) << L.BLOCK_OFFSET_SHIFT
        present = bt != 0
        bad = present & ((pos < self.header_end) | (pos + L.BLOOM_LENGTH_PREFIX > limit))
        if not bad.any() and present.any():
            lengths = np.zeros(bt.shape, np.int64)
            p = pos[present]
            lengths[present] = self._buf[p[:, None] + np.arange(4)].copy().view(L.I32).reshape(-1)
            odd = present & ((lengths <= 0) | (lengths % L.SBBF_BLOCK_BYTES != 0))
            if odd.any():
                r, k = (int(v[0]) for v in np.nonzero(odd))
                raise self._err(f"row group {r} bloom column {int(self.bloom_columns[k])}: inline bitset at "
                                f"offset {int(pos[r, k])} has LENGTH {int(lengths[r, k])}, not a positive "
                                f"multiple of {L.SBBF_BLOCK_BYTES}")
            bad = present & (pos + L.BLOOM_LENGTH_PREFIX + lengths > limit)
        if bad.any():
            r, k = (int(v[0]) for v in np.nonzero(bad))
            raise self._err(f"row group {r} bloom column {int(self.bloom_columns[k])}: inline bitset at "
                            f"offset {int(pos[r, k])} does not fit before the footer at {limit}")

    # --- accessors --------------------------------------------------------------------------

    def stat_bytes(self, row_group, column):
        """Verbatim (min, max) Parquet stat bytes of one chunk, None where absent."""
        rg, col = self._index(row_group, column)
        ch = self.chunks[rg, col]
        flags, sizes = int(ch["stat_flags"]), int(ch["stat_sizes"])
        out = []
        for slot, present, inlined, shift in (
            ("min_stat", L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, 0),
            ("max_stat", L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED, 4),
        ):
            if not flags & present:
                out.append(None)
            elif flags & inlined:
                n = (sizes >> shift) & 0xF or L.PHYSICAL_WIDTH.get(int(self.columns[col]["physical_type"]), 8)
                out.append(int(ch[slot]).to_bytes(8, "little")[:n])
            else:
                ref = int(ch[slot])
                at = int(self.block_offsets[rg]) + L.block_size(self.column_count) + (ref >> L.OOL_LENGTH_BITS)
                out.append(self._buf[at : at + (ref & L.OOL_MAX_LENGTH)].tobytes())
        return tuple(out)

    def bloom_filter(self, row_group, column):
        """Raw SBBF bitset of one chunk (inline mode), None when the chunk has none."""
        ref = self._bloom_entry(row_group, column)
        if ref is None or self.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL:
            return None
        pos = int(ref) << L.BLOCK_OFFSET_SHIFT
        n = int(np.frombuffer(self._buf, L.I32, count=1, offset=pos)[0])
        return self._buf[pos + 4 : pos + 4 + n].tobytes()

    def bloom_ref(self, row_group, column):
        """(offset, length) of one chunk's bitset inside the Parquet file (external mode), or None."""
        ref = self._bloom_entry(row_group, column)
        if ref is None or not self.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL:
            return None
        return int(ref["offset"]), int(ref["length"])

    def _bloom_entry(self, row_group, column):
        rg, col = self._index(row_group, column)
        if self.bloom_table is None:
            return None
        k = int(np.searchsorted(self.bloom_columns, col))
        if k >= len(self.bloom_columns) or int(self.bloom_columns[k]) != col:
            return None
        e = self.bloom_table[rg, k]
        if self.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL:
            return e if int(e["length"]) else None
        return e if int(e) else None

    def _index(self, row_group, column):
        if isinstance(column, str):
            column = self.column_index(column)
        rg, col = int(row_group), int(column)
        if not 0 <= rg < self.row_group_count:
            raise IndexError(f"row group {rg} not in [0, {self.row_group_count})")
        if not 0 <= col < self.column_count:
            raise IndexError(f"column {col} not in [0, {self.column_count})")
        return rg, col

    def column_index(self, name) -> int:
        try:
            return self.column_names.index(name)
        except ValueError:
            raise KeyError(f"no column {name!r} in {self.path}; columns: {self.column_names}") from None

    def byte_ranges(self, row_groups=None, columns=None):
        """(offset, length) in the Parquet file of the chosen chunks, row group major."""
        rgs = np.arange(self.row_group_count) if row_groups is None else np.asarray(row_groups, np.int64)
        if columns is None:
            cols = np.arange(self.column_count)
        else:
            cols = np.asarray([self.column_index(c) if isinstance(c, str) else int(c) for c in columns], np.int64)
        sub = self.chunks[rgs[:, None], cols[None, :]]
        return list(zip(sub["byte_range_start"].reshape(-1).tolist(), sub["total_compressed"].reshape(-1).tolist()))

    # --- pruning support (typed stats and bloom indexes, decoded once and cached) ------------

    @property
    def schema(self):
        sch = self._cache.get("schema")
        if sch is None:
            from ..prune.stats import Schema

            sch = self._cache["schema"] = Schema.of(self)
        return sch

    def column_stats(self, column):
        """Typed min/max/null-count arrays of one column over all row groups (cached)."""
        from ..prune.stats import column_stats

        ct = self.schema.column(column) if isinstance(column, str) else self.schema.types[int(column)]
        key = ("stats", ct.index)
        st = self._cache.get(key)
        if st is None:
            st = self._cache[key] = column_stats(self, ct.index, ct)
        return st

    def bloom_index(self, column, parquet_file=None):
        """(data, offsets, lengths) of one column's bitsets over all row groups, lengths -1 where
        absent; None when the column has no filters. External filters are read from the Parquet
        file (default: data.parquet beside this _pm) once and cached; unreadable means none."""
        col = self.column_index(column) if isinstance(column, str) else int(column)
        key = ("bloom", col)
        if key in self._cache:
            return self._cache[key]
        out = None
        if self.bloom_table is not None:
            k = int(np.searchsorted(self.bloom_columns, col))
            if k < len(self.bloom_columns) and int(self.bloom_columns[k]) == col:
                e = self.bloom_table[:, k]
                if self.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL:
                    out = self._external_blooms(e, parquet_file)
                else:
                    pos = e.astype(np.int64) << L.BLOCK_OFFSET_SHIFT
                    lengths = np.full(len(e), -1, np.int64)
                    present = e != 0
                    if present.any():
                        p = pos[present]
                        lengths[present] = self._buf[p[:, None] + np.arange(4)].copy().view(L.I32).reshape(-1)
                    out = (self._buf, pos + L.BLOOM_LENGTH_PREFIX, lengths)
        self._cache[key] = out
        return out

    def _external_blooms(self, entries, parquet_file):
        path = parquet_file or os.path.join(os.path.dirname(os.path.abspath(self.path)), "data.parquet")
        present = np.nonzero(entries["length"] > 0)[0]
        if not present.size:
            return None
        offs, lens = entries["offset"][present], entries["length"][present]
        try:
            with builtin_open(path, "rb") as f:
                # Ends cannot wrap (offset + length <= PARQUET_FOOTER_OFFSET, checked on open), but
                # may lie past the file: then it does not hold what the snapshot says, and no
                # bloom pruning beats a read (or a buffer) of whatever size the entries claim.
                if int((offs + lens).max()) > os.fstat(f.fileno()).st_size:
                    return None
                offs, ends = offs.astype(np.int64), (offs + lens).astype(np.int64)
                # Read the union of the ranges, each byte once: memory stays within the file's
                # size however many entries share bytes.
                spans = []  # [start, end), merged, ascending
                for i in np.argsort(offs, kind="stable"):
                    s, e = int(offs[i]), int(ends[i])
                    if spans and s <= spans[-1][1]:
                        spans[-1][1] = max(spans[-1][1], e)
                    else:
                        spans.append([s, e])
                parts, shift, total = [], [], 0
                for s, e in spans:
                    f.seek(s)
                    blob = f.read(e - s)
                    if len(blob) != e - s:
                        return None  # shrunk since the fstat
                    parts.append(blob)
                    shift.append(total - s)  # file offset -> offset in the joined buffer
                    total += e - s
        except OSError:
            return None
        span = np.searchsorted(np.array([s for s, _ in spans], np.int64), offs, side="right") - 1
        offsets = np.zeros(len(entries), np.int64)
        lengths = np.full(len(entries), -1, np.int64)
        offsets[present] = offs + np.array(shift, np.int64)[span]
        lengths[present] = ends - offs
        return np.frombuffer(b"".join(parts), np.uint8), offsets, lengths

    def prune(self, predicate, *, parquet_file=None) -> np.ndarray:
        """Bool mask (row_group_count,): True where a row group may hold matching rows."""
        from ..prune.expr import parse
        from ..prune.rules import bind, evaluate

        if isinstance(predicate, str):
            predicate = parse(predicate)
        bound = bind(predicate, self.schema)
        return evaluate(bound, self.row_group_count, self.column_stats,
                        lambda c: self.bloom_index(c, parquet_file))

    def timestamp_find(self, ts) -> int:
        """Designated-timestamp lookup, docs/format.md#timestamp-lookup (2*rg+1 before rg, 2*(rg+1) inside,
        2*count+1 after the last); needs row groups sorted by the designated timestamp."""
        from ..prune.rules import timestamp_find

        mins, maxs = self._dts_bounds()
        return timestamp_find(mins, maxs, int(ts), self.num_rows)

    def timestamp_range(self, lo, hi) -> tuple:
        """[first, last) row groups overlapping [lo, hi) of the designated timestamp."""
        from ..prune.rules import timestamp_range

        mins, maxs = self._dts_bounds()
        live = np.asarray(self.num_rows) > 0
        return timestamp_range(np.where(live, mins, np.iinfo(np.int64).max), maxs, int(lo), int(hi))

    def _dts_bounds(self):
        from ..errors import PredicateError
        from ..prune.stats import KIND_ANYSIGN, KIND_INT, KIND_UINT

        dts = self.designated_timestamp
        if dts < 0:
            raise PredicateError(f"{self.path} has no designated timestamp")
        if not self.is_sorted_by_designated_timestamp():
            raise PredicateError(f"{self.path} is not sorted by its designated timestamp")
        st = self.column_stats(dts)
        if st.kind not in (KIND_INT, KIND_UINT, KIND_ANYSIGN):
            # e.g. a descriptor retyped to VARCHAR: its bounds are not numbers to search
            raise PredicateError(f"{self.path}: designated timestamp column {dts} has {st.kind} stats, not "
                                 "integer ones")
        if not st.has[np.asarray(self.num_rows) > 0].all():
            raise PredicateError(f"{self.path}: some row groups lack designated-timestamp stats")
        return st.lo, st.hi

    def is_sorted_by_designated_timestamp(self) -> bool:
        dts = self.designated_timestamp
        return dts >= 0 and bool(self.sorting_columns) and self.sorting_columns[0] == (dts, False)

    def to_description(self) -> Description:
        """This snapshot as a writer input (for compaction and round trips)."""
        rgc, ncols = self.row_group_count, self.column_count
        cols = [
            Column(name=self.column_names[i], type=int(c["type"]), id=int(c["id"]), flags=int(c["flags"]),
                   physical_type=int(c["physical_type"]), fixed_byte_len=int(c["fixed_byte_len"]),
                   max_rep_level=int(c["max_rep_level"]), max_def_level=int(c["max_def_level"]))
            for i, c in enumerate(self.columns)
        ]
        stats = np.empty((rgc, ncols, 2), object)
        any_stats = False
        for r in range(rgc):
            for c in range(ncols):
                if self.chunks[r, c]["stat_flags"] & (L.STAT_MIN_PRESENT | L.STAT_MAX_PRESENT):
                    stats[r, c] = self.stat_bytes(r, c)
                    any_stats = True
        blooms = None
        bcols = [int(b) for b in self.bloom_columns]
        external = bool(self.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL)
        if bcols:
            if external:
                start = np.zeros((rgc, ncols), np.int64)
                length = np.full((rgc, ncols), -1, np.int64)
                for k, c in enumerate(bcols):
                    e = self.bloom_table[:, k]
                    present = e["length"] > 0
                    start[present, c] = e["offset"][present]
                    length[present, c] = e["length"][present]
                blooms = ByteRefs(np.zeros(0, np.uint8), start, length)
            else:
                objs = np.empty((rgc, ncols), object)
                for r in range(rgc):
                    for c in bcols:
                        objs[r, c] = self.bloom_filter(r, c)
                blooms = ByteRefs.from_objects(objs)
        ff = self.feature_flags
        return Description(
            columns=cols,
            num_rows=np.array(self.num_rows, np.uint64),
            chunks=np.array(self.chunks),
            stats=ByteRefs.from_objects(stats) if any_stats else None,
            blooms=blooms,
            designated_timestamp=self.designated_timestamp,
            sorting_columns=[] if ff & L.FEATURE_SORTING_IS_DTS_ASC else [int(i) for i in self.sorting_column_indices],
            sorting_is_dts_asc=bool(ff & L.FEATURE_SORTING_IS_DTS_ASC),
            parquet_footer_offset=self.parquet_footer_offset,
            parquet_footer_length=self.parquet_footer_length,
            unused_bytes=self.unused_bytes,
            bloom_columns=bcols,
            bloom_external=external,
            squash_tracker=self.squash_tracker,
            seq_txn=self.seq_txn,
            scratchpad=self.scratchpad,
        )

    # --- lifecycle --------------------------------------------------------------------------

    def close(self):
        mm, self._mm = self._mm, None
        self._cache.clear()
        # Drop our own views first so the mapping can close unless the caller still holds one.
        for name in ("_buf", "chunks", "num_rows", "columns", "bloom_table", "bloom_columns",
                     "sorting_column_indices"):
            self.__dict__.pop(name, None)
        if mm is not None:
            try:
                if isinstance(mm, mmap.mmap):
                    mm.close()
                else:
                    mm.release()
            except BufferError:
                pass  # numpy views handed out still use the mapping; it closes when they go

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"<ParquetMeta {self.path!r} pm_size={self.pm_size} parquet_size={self.parquet_size} "
                f"row_groups={self.row_group_count} columns={self.column_count}>")


builtin_open = open


def open(pm_path, *, parquet_size=None, verify=True, filesystem=None) -> ParquetMeta:  # noqa: A001
    """Map the committed part of a `_pm` file and pin a snapshot (None: the latest).

    With an fsspec `filesystem` the file is fetched in one request and read from memory."""
    if filesystem is not None:
        try:
            data = filesystem.cat_file(pm_path)
        except FileNotFoundError:
            raise
        except OSError as e:
            from ..errors import StorageError

            raise StorageError(f"{pm_path}: cannot fetch: {e}") from e
        return ParquetMeta(pm_path, parquet_size=parquet_size, verify=verify, data=data)
    return ParquetMeta(pm_path, parquet_size=parquet_size, verify=verify)
