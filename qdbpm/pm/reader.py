"""Read `_pm` files: map the committed size, walk the footer chain to the pinned snapshot, verify
the CRC, and expose numpy views of the header, the footer and the row group blocks.

Format only: pruning over these views is qdbpm.meta's. Every structural check (pm/validate.py)
runs on open, with or without the CRC check, before the bytes it guards are read, so later
accessors (and the pruning code and SBBF kernels that trust them) never see an out-of-range
reference or a filter size the kernels cannot take.

They run first as one fused kernel pass (validate.check_open), which also says where each
section lies; only a file it finds wrong is parsed the reference way (`_open_checked`), whose
Python checks raise the error.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from . import layout as L
from . import stat_decode as SD
from . import validate as V
from .crc import crc32
from .description import ByteRefs, Column, Description
from ..errors import ChecksumError, CorruptFileError, SnapshotNotFoundError


READ_AT_MOST = 1 << 20  # bytes: smaller committed sizes are read, larger ones mapped


def _u32(buf, off):
    return int.from_bytes(buf[off : off + L.U32.itemsize], "little")


class _Footer:
    """One footer, located through its trailer: its place, what the chain walk needs, and its
    fixed part's bytes (a copy: a footer holds no view of the mapping)."""

    __slots__ = ("pm_size", "start", "length", "raw", "parquet_size", "prev_pm_size")

    def __init__(self, pm_size, start, length, raw, parquet_size, prev_pm_size):
        self.pm_size, self.start, self.length, self.raw = pm_size, start, length, raw
        self.parquet_size, self.prev_pm_size = parquet_size, prev_pm_size

    @property
    def fixed(self):
        """The fixed part as a (read-only) L.FOOTER_DTYPE record."""
        return np.frombuffer(self.raw, L.FOOTER_DTYPE, count=1)[0]


class PmFile:
    """One pinned snapshot of a `_pm` file: `data` bytes (fetched from an object store) or the
    file at `path`, mapped. qdbpm.open gives the pruning subclass, qdbpm.ParquetMeta."""

    def __init__(self, path, *, parquet_size=None, verify=True, data=None):
        self.path = os.fspath(path)
        self._mm = None
        if data is not None:  # bytes fetched from an object store: the same checks over a buffer
            committed = V.committed_size(len(data), bytes(data[: L.PM_SIZE_BYTES]), self._err)
            self._mm = memoryview(data)[:committed]
        else:
            with open(self.path, "rb") as f:
                # The committed size first, the file size second: a writer publishing in between
                # has already grown the file, and never truncates below a published size.
                head = f.read(L.PM_SIZE_BYTES)
                file_size = os.fstat(f.fileno()).st_size
                committed = V.committed_size(file_size, head, self._err)
                # Exactly the committed size (past it: maybe an unpublished append); small files
                # read, not mapped (a mapping keeps a descriptor: 100,000 would run out of them).
                if committed > READ_AT_MOST:
                    self._mm = mmap.mmap(f.fileno(), committed, access=mmap.ACCESS_READ)
                elif len(mv := memoryview(os.pread(f.fileno(), committed, 0))) < committed:
                    raise self._err(f"file shrank below its committed size {committed} while read")
                else:
                    self._mm = mv
        try:
            self._buf = np.frombuffer(self._mm, dtype=np.uint8)
            self.pm_size = committed
            plan = V.check_open(self._buf, parquet_size)
            if plan is not None:
                self._open_planned(plan, verify)
            else:
                self._open_checked(parquet_size, verify)
        except BaseException:
            self.close()
            raise

    def _open_checked(self, parquet_size, verify):
        """The reference open: parse in file order, each Python check before the bytes it guards.
        Only trailers and fixed footer fields are read before the CRC check, so a flipped byte
        anywhere it covers is reported as a checksum mismatch, not as whatever structural error
        the flip happens to cause."""
        self._footer = self._find_snapshot(parquet_size)
        self.crc_offset = self._footer.start + self._footer.length - L.CRC_SIZE
        self.stored_crc = _u32(self._buf, self.crc_offset)
        if verify:
            self.verify_checksum()
        self._parse_header()
        self._parse_footer()
        self._parse_blocks()

    def _open_planned(self, k, verify):
        """The fast open: the kernel found every check passing; set what _open_checked would, from
        its plan (k), with a handful of views."""
        buf, start, ncols, rgc, nb = self._buf, k.footer_start, k.column_count, k.row_group_count, k.bloom_column_count
        raw = buf[start : start + L.FOOTER_FIXED_SIZE].tobytes()
        self._footer = _Footer(k.snapshot_size, start, k.footer_length, raw,
                               L.parquet_size(k.parquet_footer_offset, k.parquet_footer_length), k.prev_pm_size)
        self.crc_offset, self.stored_crc = k.crc_offset, k.stored_crc
        if verify:
            self.verify_checksum()
        self.feature_flags, self.column_count, self.column_names = k.feature_flags, ncols, k.names
        self.designated_timestamp, self.sorting_columns = k.designated_timestamp, k.sorting_columns
        self.squash_tracker, self.header_end = k.squash_tracker, k.header_end
        self.columns = np.frombuffer(buf, L.COLUMN_DTYPE, count=ncols, offset=L.HEADER_SIZE)
        self.sorting_column_indices = np.frombuffer(buf, L.U32, count=k.sorting_column_count,
                                                    offset=L.HEADER_SIZE + L.COLUMN_SIZE * ncols)
        self.bloom_columns = np.frombuffer(buf, L.U32, count=nb, offset=k.bloom_columns_at) if nb \
            else np.zeros(0, np.uint32)
        self.snapshot_pm_size, self.footer_offset, self.parquet_size = k.snapshot_size, start, self._footer.parquet_size
        self.parquet_footer_offset, self.parquet_footer_length = k.parquet_footer_offset, k.parquet_footer_length
        self.row_group_count, self.unused_bytes, self.prev_pm_size = rgc, k.unused_bytes, k.prev_pm_size
        self.footer_feature_flags, self.block_offsets, self.seq_txn = k.footer_feature_flags, k.block_offsets, k.seq_txn
        self.bloom_table = None if k.bloom_table_at < 0 else np.frombuffer(
            buf, L.BLOOM_EXTERNAL_DTYPE if self.bloom_external else L.U32, count=rgc * nb,
            offset=k.bloom_table_at).reshape(rgc, nb)
        self.scratchpad = None
        if k.scratchpad_at >= 0:
            self._parse_scratchpad(k.scratchpad_at, k.crc_offset)
        self.num_rows, self.chunks = self._block_views(k.block_offsets, L.block_size(ncols), k.block_step)

    def _err(self, msg, cls=CorruptFileError):
        return cls(f"{self.path}: {msg}")

    @property
    def buffer(self) -> np.ndarray:
        """The committed bytes, a read-only uint8 view of the mapping (out-of-line stats and inline
        bitsets are read from it at the offsets the chunk records and bloom table give)."""
        return self._buf

    # --- header -----------------------------------------------------------------------------

    def _parse_header(self):
        buf, size, err = self._buf, self.pm_size, self._err
        h = np.frombuffer(buf, L.HEADER_DTYPE, count=1)[0]
        self.feature_flags = ff = int(h["feature_flags"])
        ncols, nsort, dts = int(h["column_count"]), int(h["sorting_column_count"]), int(h["designated_timestamp"])
        V.check_header(ff, ncols, nsort, dts, size, err)
        desc_end = L.HEADER_SIZE + L.COLUMN_SIZE * ncols
        sort_end = desc_end + L.SORTING_COLUMN_SIZE * nsort
        cols = np.frombuffer(buf, L.COLUMN_DTYPE, count=ncols, offset=L.HEADER_SIZE)
        sort_idx = np.frombuffer(buf, L.U32, count=nsort, offset=desc_end)
        V.check_columns(cols, sort_idx, size, err)
        names = []
        for i, (off, ln) in enumerate(zip(cols["name_offset"].tolist(), cols["name_length"].tolist())):
            try:
                names.append(buf[off : off + ln].tobytes().decode("utf-8"))
            except UnicodeDecodeError as e:
                raise err(f"column {i} name at offset {off}: invalid UTF-8 ({e.reason})") from None
        V.check_sorting(ff, cols, dts, err)
        pos = max(sort_end, int((cols["name_offset"] + cols["name_length"]).max()) if ncols else 0)
        self.bloom_columns = np.zeros(0, np.uint32)
        if ff & L.FEATURE_BLOOM_FILTERS:
            if pos + L.BLOOM_COL_COUNT_SIZE > size:
                raise err(f"bloom section at offset {pos} runs past the committed size {size}")
            n = _u32(buf, pos)
            V.check_bloom_count(n, ncols, pos, err)
            pos += L.BLOOM_COL_COUNT_SIZE
            if pos + L.BLOOM_COLUMN_SIZE * n > size:
                raise err(f"bloom column list at offset {pos} runs past the committed size {size}")
            bc = np.frombuffer(buf, L.U32, count=n, offset=pos)
            V.check_bloom_columns(bc, ncols, pos, err)
            self.bloom_columns = bc
            pos += L.BLOOM_COLUMN_SIZE * n
        self.squash_tracker = None
        if ff & L.FEATURE_SQUASH_TRACKER:
            if pos + L.SQUASH_TRACKER_SIZE > size:
                raise err(f"squash tracker at offset {pos} runs past the committed size {size}")
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
        V.check_snapshot_size(size, self.pm_size, self._err)
        length = _u32(self._buf, size - L.TRAILER_SIZE)
        start = V.footer_start(size, length, self._err)
        raw = self._buf[start : start + L.FOOTER_FIXED_SIZE].tobytes()
        fx = np.frombuffer(raw, L.FOOTER_DTYPE, count=1)[0]
        return _Footer(size, start, length, raw, L.parquet_size(int(fx["parquet_footer_offset"]),
                       int(fx["parquet_footer_length"])), int(fx["prev_pm_size"]))

    def _find_snapshot(self, parquet_size) -> _Footer:
        size = self.pm_size
        seen = []
        while True:
            ft = self._locate(size)
            seen.append(ft.parquet_size)
            if parquet_size is None or ft.parquet_size == parquet_size:
                return ft
            prev = ft.prev_pm_size
            if prev == 0:
                raise self._err(f"no snapshot for Parquet size {parquet_size}; the chain holds {seen}",
                                SnapshotNotFoundError)
            V.prev_link(prev, size, ft.start, self._err)
            size = prev

    def snapshots(self) -> list:
        """Parquet sizes of this footer and every older one reachable through PREV, newest first."""
        out, ft = [], self._footer
        while True:
            out.append(ft.parquet_size)
            prev = ft.prev_pm_size
            if prev == 0:
                return out
            V.prev_link(prev, ft.pm_size, ft.start, self._err)
            ft = self._locate(prev)

    def _parse_footer(self):
        ft, buf, err = self._footer, self._buf, self._err
        fx = ft.fixed
        self.snapshot_pm_size = ft.pm_size
        self.footer_offset = ft.start
        self.parquet_footer_offset = int(fx["parquet_footer_offset"])
        self.parquet_footer_length = int(fx["parquet_footer_length"])
        self.parquet_size = ft.parquet_size
        self.row_group_count = rgc = int(fx["row_group_count"])
        self.unused_bytes = int(fx["unused_bytes"])
        self.prev_pm_size = int(fx["prev_pm_size"])
        self.footer_feature_flags = fff = int(fx["footer_feature_flags"])
        V.check_footer(ft.start, ft.length, rgc, fff, err)
        crc_pos = self.crc_offset
        entries_at = ft.start + L.FOOTER_FIXED_SIZE
        self.block_offsets = np.frombuffer(buf, L.U32, count=rgc, offset=entries_at).astype(np.int64) << L.BLOCK_OFFSET_SHIFT
        pos = entries_at + L.ROW_GROUP_ENTRY_SIZE * rgc
        nb = len(self.bloom_columns)
        self.bloom_table = None
        if nb:
            dt = L.BLOOM_EXTERNAL_DTYPE if self.bloom_external else L.U32
            end = pos + dt.itemsize * rgc * nb
            if end > crc_pos:
                raise err(f"footer at {ft.start}: bloom table at offset {pos} ({rgc} x {nb} entries) "
                          f"runs past the CRC at {crc_pos}")
            self.bloom_table = np.frombuffer(buf, dt, count=rgc * nb, offset=pos).reshape(rgc, nb)
            pos = end
        self.seq_txn = None
        if fff & L.FOOTER_FEATURE_SEQ_TXN:
            if pos + L.SEQ_TXN_SIZE > crc_pos:
                raise err(f"footer at {ft.start}: SEQ_TXN at offset {pos} runs past the CRC at {crc_pos}")
            self.seq_txn = int(np.frombuffer(buf, L.I64, count=1, offset=pos)[0])
            pos += L.SEQ_TXN_SIZE
        self.scratchpad = None
        if fff & L.FOOTER_FEATURE_SCRATCHPAD:
            pos = self._parse_scratchpad(pos, crc_pos)
        V.check_footer_end(ft.start, pos, crc_pos, self.feature_flags, fff, err)

    def _parse_scratchpad(self, pos, crc_pos):
        buf, start, err = self._buf, pos, self._err
        if pos + L.SCRATCHPAD_COUNT_SIZE > crc_pos:
            raise err(f"scratchpad count at offset {pos} runs past the CRC at {crc_pos}")
        count = _u32(buf, pos)
        pos += L.SCRATCHPAD_COUNT_SIZE
        items = []
        head = L.SCRATCHPAD_ENTRY_HEAD_SIZE
        for k in range(count):
            if pos + head > crc_pos:
                raise err(f"scratchpad entry {k} at offset {pos} runs past the CRC at {crc_pos}")
            code, ln = _u32(buf, pos), _u32(buf, pos + L.U32.itemsize)
            if pos + head + ln > crc_pos:
                raise err(f"scratchpad entry {k} at offset {pos}: length {ln} runs past the CRC at {crc_pos}")
            items.append((code, buf[pos + head : pos + head + ln].tobytes()))
            pos += head + ln
            if pos - start > L.SCRATCHPAD_MAX_BYTES:
                raise err(f"scratchpad at offset {start} exceeds the 1 MiB limit")
        self.scratchpad = items
        return pos

    def verify_checksum(self):
        stored = self.stored_crc
        computed = crc32(self._mm, L.CRC_START, self.crc_offset)
        if stored != computed:
            raise self._err(f"checksum mismatch: stored 0x{stored:08x}, computed 0x{computed:08x} over "
                            f"[{L.CRC_START}, {self.crc_offset})", ChecksumError)

    # --- blocks -----------------------------------------------------------------------------

    def _parse_blocks(self):
        offs, fixed, limit = self.block_offsets, L.block_size(self.column_count), self._footer.start
        V.check_block_offsets(offs, fixed, self.header_end, limit, self._err)
        rgc = self.row_group_count
        step = int(offs[1] - offs[0]) if rgc > 1 else fixed
        even = step >= fixed and bool(np.all(np.diff(offs) == step))
        self.num_rows, self.chunks = self._block_views(offs, fixed, step if even else 0)
        V.check_chunks(self.chunks, offs, limit, self._err)
        if self.bloom_table is not None:
            V.check_blooms(self.bloom_table, self.bloom_columns, self.bloom_external, self._buf, self.header_end,
                           limit, self.parquet_footer_offset, self._err)

    def _block_views(self, offs, fixed, step):
        """num_rows and chunk records of the blocks at `offs`: views when they lie `step` bytes
        apart (step > 0), else copies."""
        rgc, ncols, mm = self.row_group_count, self.column_count, self._mm
        if rgc == 0:
            return np.zeros(0, np.uint64), np.zeros((0, ncols), L.CHUNK_DTYPE)
        nr = L.BLOCK_NUM_ROWS_SIZE
        if step:
            # Evenly spaced blocks: zero-copy strided views of the mapping.
            num_rows = np.ndarray((rgc,), L.U64, buffer=mm, offset=int(offs[0]), strides=(step,))
            chunks = np.ndarray((rgc, ncols), L.CHUNK_DTYPE, buffer=mm, offset=int(offs[0]) + nr,
                                strides=(step, L.CHUNK_SIZE))
            return num_rows, chunks
        rows = self._buf[offs[:, None] + np.arange(fixed)]
        num_rows = rows[:, :nr].copy().view(L.U64).reshape(rgc)
        chunks = rows[:, nr:].copy().view(L.CHUNK_DTYPE).reshape(rgc, ncols)
        return num_rows, chunks

    # --- accessors --------------------------------------------------------------------------

    @property
    def bloom_external(self) -> bool:
        """Bloom filters are (offset, length) references into the Parquet file (header bit 1)."""
        return bool(self.feature_flags & L.FEATURE_BLOOM_FILTERS_EXTERNAL)

    def stat_bytes(self, row_group, column):
        """Verbatim (min, max) Parquet stat bytes of one chunk, None where absent."""
        rg, col = self._index(row_group, column)
        return SD.chunk_stat_bytes(self.chunks[rg, col], int(self.columns[col]["physical_type"]),
                                   SD.ool_start(int(self.block_offsets[rg]), self.column_count), self._buf)

    def bloom_entries(self, column):
        """The bloom table entries of one column over all row groups (u32 inline references, or
        external (offset, length) records), None when the column has no filters."""
        col = self.column_index(column) if isinstance(column, str) else int(column)
        if self.bloom_table is None:
            return None
        k = int(np.searchsorted(self.bloom_columns, col))
        if k >= len(self.bloom_columns) or int(self.bloom_columns[k]) != col:
            return None
        return self.bloom_table[:, k]

    def bloom_bitsets(self, column):
        """(data, offsets, lengths) of one column's inline bitsets over all row groups, slices of
        `buffer`, lengths -1 where absent; None when it has none or the filters are external."""
        e = self.bloom_entries(column)
        if e is None or self.bloom_external:
            return None
        pos = e.astype(np.int64) << L.BLOCK_OFFSET_SHIFT
        present = e != 0
        lengths = np.where(present, V.inline_bloom_lengths(self._buf, pos, present), -1)
        return self._buf, pos + L.BLOOM_LENGTH_PREFIX, lengths

    def bloom_filter(self, row_group, column):
        """Raw SBBF bitset of one chunk (inline mode), None when the chunk has none."""
        ref = self._bloom_entry(row_group, column)
        if ref is None or self.bloom_external:
            return None
        pos = int(ref) << L.BLOCK_OFFSET_SHIFT
        n = int(np.frombuffer(self._buf, L.I32, count=1, offset=pos)[0])
        return self._buf[pos + L.BLOOM_LENGTH_PREFIX : pos + L.BLOOM_LENGTH_PREFIX + n].tobytes()

    def bloom_ref(self, row_group, column):
        """(offset, length) of one chunk's bitset inside the Parquet file (external mode), or None."""
        ref = self._bloom_entry(row_group, column)
        if ref is None or not self.bloom_external:
            return None
        return int(ref["offset"]), int(ref["length"])

    def _bloom_entry(self, row_group, column):
        rg, col = self._index(row_group, column)
        e = self.bloom_entries(col)
        if e is None:
            return None
        e = e[rg]
        return e if int(e["length"] if self.bloom_external else e) else None

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
        external = self.bloom_external
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
        return (f"<{type(self).__name__} {self.path!r} pm_size={self.pm_size} parquet_size={self.parquet_size} "
                f"row_groups={self.row_group_count} columns={self.column_count}>")
