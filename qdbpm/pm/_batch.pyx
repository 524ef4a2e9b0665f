# cython: language_level=3
"""Kernel: read many `_pm` files into one buffer and check each with the open's own checks
(_validate.plan_of), in one call: no Python object per file but its Plan (pm/batch.py wraps it).

read_files copies each file's bytes (open, fstat, pread, close) into one growing arena, 8-byte
aligned; a file it cannot take whole (missing, not regular, larger than its share, shorter than
it claims) is marked, and the caller opens it the one-file way, which maps it or raises the exact
error. check_files runs plan_of and the CRC on each file read, then lays out what a table's
pruning needs in concatenated arrays: each row group's block address, its row count, and a schema
id per file (files with byte-equal column descriptors and names share one).

Every read is bounds-checked: plan_of's reads against the file's committed size; gather's
against the arena; a file's committed size against the bytes read.
"""

from cpython.buffer cimport PyBUF_READ
from cpython.memoryview cimport PyMemoryView_FromMemory
from libc.errno cimport ENOENT, ENOTDIR, errno
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcmp, memcpy
from posix.stat cimport S_ISDIR, S_ISREG, fstat, struct_stat
from posix.unistd cimport close, pread

from qdbpm.pm._crc cimport crc32_raw, crc_ready
from qdbpm.pm._validate cimport Plan, names_ok, plan_of

cimport numpy as cnp

import numpy as np

from ..errors import CorruptFileError

cnp.import_array()

cdef extern from "fcntl.h" nogil:
    int c_openat "openat"(int dirfd, const char* path, int flags)
    int O_RDONLY, O_CLOEXEC, O_NONBLOCK, AT_FDCWD

cdef enum:
    FIRST_READ = 65536  # bytes read before asking a file's size
    SPARE_MAX = 128 << 20  # bytes kept for the next arena at most
    HEADER_SIZE = 32  # layout.HEADER_SIZE
    COLUMN_SIZE = 32  # layout.COLUMN_SIZE
    C_NAME_OFFSET = 0
    C_NAME_LENGTH = 24
    BLOCK_NUM_ROWS_SIZE = 8
    MIN_COMMITTED_SIZE = 36  # layout.MIN_COMMITTED_SIZE
    CRC_START = 8  # layout.CRC_START

# read_files' per-file status (_batch.pxd): read whole, checked by check_files; not read, larger
# than its share (map it); not read or not valid here (open it alone: it maps or raises the error);
# no such file, or a directory (a walker drops it; read_files' caller opens it alone and fails)
OK, LARGE, SOLO, MISSING = STATUS_OK, STATUS_LARGE, STATUS_SOLO, STATUS_MISSING
NATIVE_CRC = True  # tests: False checks every CRC through the `crc` callable (the fallback)
CONSTANTS = {"HEADER_SIZE": HEADER_SIZE, "COLUMN_SIZE": COLUMN_SIZE, "MIN_COMMITTED_SIZE": MIN_COMMITTED_SIZE,
             "CRC_START": CRC_START, "BLOCK_NUM_ROWS_SIZE": BLOCK_NUM_ROWS_SIZE,
             "COLUMN_AT": {"name_offset": C_NAME_OFFSET, "name_length": C_NAME_LENGTH}}


# The memory of the last arena freed (bytes already faulted in: on this VM a fresh page costs ~2 us,
# 60 MB ~30 ms); the next arena starts in it. One buffer: the largest arena freed, up to SPARE_MAX.
cdef uint8_t* spare = NULL
cdef Py_ssize_t spare_cap = 0


cdef class Arena:
    """One growing malloc'd buffer, exposed read-only through the buffer protocol (fields:
    _batch.pxd). Only read_at grows it, before any view of it exists."""

    def __dealloc__(self):
        global spare, spare_cap
        if self.data != NULL and spare_cap < self.cap <= SPARE_MAX:  # kept for the next arena (`spare`)
            free(spare)
            spare, spare_cap = self.data, self.cap
        else:
            free(self.data)

    cdef int reserve(self, Py_ssize_t extra) except -1:
        global spare, spare_cap
        cdef Py_ssize_t want = self.used + extra, cap = self.cap if self.cap else 65536
        cdef uint8_t* p
        if want <= self.cap:
            return 0
        if self.data == NULL and spare != NULL:  # a new arena starts in the last one's memory
            self.data, self.cap, spare, spare_cap = spare, spare_cap, NULL, 0
            if want <= self.cap:
                return 0
        while cap < want:
            cap *= 2
        p = <uint8_t*>realloc(self.data, cap)
        if p == NULL:
            raise MemoryError(f"cannot grow the _pm read buffer to {cap} bytes")
        self.data, self.cap = p, cap
        return 0

    def __getbuffer__(self, Py_buffer* view, int flags):
        self.shape[0], self.strides[0] = self.used, 1
        view.buf = self.data
        view.obj = self
        view.len = self.used
        view.readonly = 1
        view.itemsize = 1
        view.format = "B"
        view.ndim = 1
        view.shape = self.shape
        view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef inline uint64_t le(const uint8_t* p, int width) noexcept nogil:
    cdef uint64_t v = 0
    cdef int k
    for k in range(width):
        v |= (<uint64_t>p[k]) << (8 * k)
    return v


cdef int open_status(int err) noexcept nogil:
    """A file whose open failed with errno `err`: absent (a walker drops it), or opened alone."""
    return STATUS_MISSING if err == ENOENT or err == ENOTDIR else STATUS_SOLO


cdef int read_at(Arena arena, int dirfd, const char* name, int64_t max_file, int64_t budget,
                 int64_t* at, int64_t* size) except -1:
    """Read file `name` (relative to dirfd, or absolute) whole into the arena; its status, and
    where its committed bytes lie when STATUS_OK (see read_files)."""
    cdef int fd = c_openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK)  # a FIFO must not block
    if fd < 0:
        return open_status(errno)
    return read_fd(arena, fd, max_file, budget, at, size)


cdef int read_fd(Arena arena, int fd, int64_t max_file, int64_t budget, int64_t* at, int64_t* size) except -1:
    """read_at of a file opened already (`fd`, which it closes). Small files take one read: a
    short read of a regular file is its end (the file's type and size are asked only when the
    first read fills its room)."""
    cdef struct_stat st
    cdef int64_t room = FIRST_READ, got = 0, r, committed
    try:
        room = min(room, max_file, budget - arena.used)  # a file that fills it is measured below
        if room < HEADER_SIZE:
            return STATUS_LARGE
        arena.reserve(room + 8)
        r = pread(fd, arena.data + arena.used, room, 0)
        if r < 0:  # a directory, a pipe, an I/O error: the one-file open says which
            return STATUS_MISSING if fstat(fd, &st) == 0 and S_ISDIR(st.st_mode) else STATUS_SOLO
        got = r
        if got == room:  # maybe more: now ask what it is and how long
            if fstat(fd, &st) != 0 or not S_ISREG(st.st_mode):
                return STATUS_SOLO
            if st.st_size > max_file or arena.used + st.st_size > budget:
                return STATUS_LARGE
            arena.reserve(st.st_size + 8)
            while got < st.st_size:
                r = pread(fd, arena.data + arena.used + got, st.st_size - got, got)
                if r <= 0:
                    break
                got += r
        if got < HEADER_SIZE:
            return STATUS_SOLO
        committed = <int64_t>le(arena.data + arena.used, 8)
        if committed < MIN_COMMITTED_SIZE or committed > got:
            return STATUS_SOLO  # the one-file open raises the exact error (or sees a newer commit)
        at[0], size[0] = arena.used, committed
        arena.used = (arena.used + committed + 7) & ~(<Py_ssize_t>7)
        return STATUS_OK
    finally:
        close(fd)


def read_files(list paths, int64_t max_file, int64_t budget):
    """(Arena, at int64[n], size int64[n], status int8[n]): each path's committed bytes at
    `at` (8-aligned) when status is STATUS_OK. A file over max_file bytes, or past `budget` bytes
    read in all, is STATUS_LARGE; one that cannot be read whole or whose committed size is not
    within [MIN_COMMITTED_SIZE, bytes read] is STATUS_SOLO. `paths`: bytes (os.fsencode)."""
    cdef Py_ssize_t n = len(paths), i
    cdef Arena arena = Arena.__new__(Arena)
    at_a, size_a = np.zeros(n, np.int64), np.zeros(n, np.int64)
    status_a = np.full(n, STATUS_SOLO, np.int8)
    cdef int64_t[::1] at = at_a, size = size_a
    cdef int8_t[::1] status = status_a
    for i in range(n):
        status[i] = read_at(arena, AT_FDCWD, <bytes>paths[i], max_file, budget, &at[i], &size[i])
    return arena, at_a, size_a, status_a


cdef uint64_t fnv(const uint8_t* p, uint64_t n, uint64_t h) noexcept nogil:
    cdef uint64_t k
    for k in range(n):
        h = (h ^ p[k]) * 1099511628211ULL
    return h


cdef uint64_t schema_hash(const uint8_t* f, uint64_t ncols) noexcept nogil:
    """Hash of a checked file's column descriptors and names (plan_of bounded every name)."""
    cdef uint64_t h = fnv(f + HEADER_SIZE, COLUMN_SIZE * ncols, 14695981039346656037ULL), c, d
    for c in range(ncols):
        d = HEADER_SIZE + COLUMN_SIZE * c
        h = fnv(f + le(f + d + C_NAME_OFFSET, 8), le(f + d + C_NAME_LENGTH, 4), h)
    return h


cdef bint same_schema(const uint8_t* a, uint64_t na, const uint8_t* b, uint64_t ncols) noexcept nogil:
    """Byte-equal descriptors and names (what Schema.of keys on) of checked files a (`na`
    columns) and b (`ncols`)."""
    cdef uint64_t c, d, la, lb
    if na != ncols or memcmp(a + HEADER_SIZE, b + HEADER_SIZE, COLUMN_SIZE * ncols) != 0:
        return False
    for c in range(ncols):
        d = HEADER_SIZE + COLUMN_SIZE * c
        la, lb = le(a + d + C_NAME_LENGTH, 4), le(b + d + C_NAME_LENGTH, 4)
        if la != lb or memcmp(a + le(a + d + C_NAME_OFFSET, 8), b + le(b + d + C_NAME_OFFSET, 8), la) != 0:
            return False
    return True


cdef void* grow(void* p, Py_ssize_t cap, size_t item, str what) except NULL:
    """p reallocated to `cap` items of `item` bytes (a kernel's growing array), or MemoryError
    naming `what`; p is left as it was then (its owner still frees it)."""
    cdef void* q = realloc(p, cap * item if cap else 1)
    if q == NULL:
        raise MemoryError(f"cannot grow the {what} to {cap} entries")
    return q


cdef class Checker:
    """check_files one file at a time (`check`), in any order, then laid out for a chosen order
    (`finish`): the tree walker (table/_walk.pyx) checks each `_pm` right after reading it, while
    its bytes are still in cache, and sorts the partitions only at the end. What `finish` needs of
    a file (its blocks' addresses and row counts) is copied out at `check`, into flat buffers in
    the order of the calls: nothing is read back from the arena later (that was a cache miss per
    row group, scattered over every file) and nothing holds a pointer into it (it may move)."""

    def __cinit__(self, Arena arena, bint verify, crc):
        self.arena, self.verify, self.crc = arena, verify, crc
        self.native = NATIVE_CRC and crc_ready()
        self.reps_at, self.reps_cols, self.by_hash = [], [], {}
        self.blocks, self.rows, self.used, self.cap = NULL, NULL, 0, 0
        self.first, self.count, self.sid, self.files, self.fcap, self.last = NULL, NULL, NULL, 0, 0, -1

    def __dealloc__(self):
        free(self.blocks)
        free(self.rows)
        free(self.first)
        free(self.count)
        free(self.sid)

    cdef int reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t cap = self.cap if self.cap else 1024
        if self.used + extra <= self.cap:
            return 0
        while cap < self.used + extra:
            cap *= 2
        self.blocks = <int64_t*>grow(self.blocks, cap, sizeof(int64_t), "_pm batch's block list")
        self.rows = <uint64_t*>grow(self.rows, cap, sizeof(uint64_t), "_pm batch's row counts")
        self.cap = cap
        return 0

    cdef int reserve_file(self) except -1:
        """Room for one more file's entries (first, count, sid)."""
        cdef Py_ssize_t cap = self.fcap * 2 if self.fcap else 256
        if self.files < self.fcap:
            return 0
        self.first = <int64_t*>grow(self.first, cap, sizeof(int64_t), "_pm batch's file list")
        self.count = <int64_t*>grow(self.count, cap, sizeof(int64_t), "_pm batch's file list")
        self.sid = <int32_t*>grow(self.sid, cap, sizeof(int32_t), "_pm batch's file list")
        self.fcap = cap
        return 0

    cdef uint64_t file_crc(self, const uint8_t* f, uint64_t crc_offset) except? 0xFFFFFFFFFFFFFFFF:
        """The CRC of f[CRC_START : crc_offset] (plan_of: inside the file): ISA-L's function called
        directly where _crc found it, else `crc` (pm/crc.py's, the same ISA-L code behind Python)."""
        if self.native:
            return crc32_raw(0, f + CRC_START, <size_t>(crc_offset - CRC_START))
        return self.crc(PyMemoryView_FromMemory(<char*>f + CRC_START, <Py_ssize_t>(crc_offset - CRC_START),
                                                PyBUF_READ)) & 0xFFFFFFFF

    cdef int check(self, int64_t at, int64_t size, object target, int8_t* status) except -1:
        """Check the next file (its committed bytes at `at`, `size` long, when *status is
        STATUS_OK): plan_of for snapshot `target` (None: the latest) and the CRC; a file that
        fails becomes STATUS_SOLO."""
        cdef const uint8_t* f
        cdef Plan pl
        cdef uint64_t h
        cdef Py_ssize_t me = self.files, r, rgc, j = -1  # this file's index
        cdef const int64_t* offs
        self.reserve_file()
        self.first[me], self.count[me], self.sid[me] = self.used, 0, -1
        self.files += 1
        if status[0] != STATUS_OK:
            return 0
        if at < 0 or size < 0 or at + size > self.arena.used:
            raise CorruptFileError(f"_pm batch: file {me} lies outside the read buffer")
        f = self.arena.data + at
        obj = plan_of(f, <uint64_t>size, target, False)
        if obj is None:
            status[0] = STATUS_SOLO
            return 0
        pl = <Plan>obj
        if self.verify and self.file_crc(f, pl.crc_offset) != pl.stored_crc:
            status[0] = STATUS_SOLO  # the one-file open raises the checksum error
            return 0
        # a table's partitions mostly share one schema: the last file's first, then by hash
        if self.last >= 0 and same_schema(self.arena.data + <int64_t>self.reps_at[self.last],
                                          <uint64_t>self.reps_cols[self.last], f, pl.column_count):
            j = self.last
        else:
            h = schema_hash(f, pl.column_count)
            ids = self.by_hash.get(h)
            if ids is None:
                ids = self.by_hash[h] = []
            for k in ids:
                if same_schema(self.arena.data + <int64_t>self.reps_at[k], <uint64_t>self.reps_cols[k], f,
                               pl.column_count):
                    j = k  # byte-equal names: UTF-8 as the representative's were found
                    break
            else:
                if not names_ok(f, <uint64_t>size, pl):
                    status[0] = STATUS_SOLO  # the one-file open raises the name error
                    return 0
                j = len(self.reps_at)
                ids.append(j)
                self.reps_at.append(at)
                self.reps_cols.append(pl.column_count)
        self.sid[me] = j
        self.last = j
        offs = <const int64_t*>cnp.PyArray_DATA(pl.block_offsets)  # plan_of's int64 array, rgc long
        rgc = <Py_ssize_t>pl.row_group_count
        self.reserve(rgc)
        for r in range(rgc):
            self.blocks[self.used + r] = at + offs[r]  # plan_of: inside the file's committed bytes
            self.rows[self.used + r] = le(f + offs[r], BLOCK_NUM_ROWS_SIZE)
        self.used += rgc
        self.count[me] = rgc
        return 0

    def finish(self, order=None):
        """(rg_start, block_at, num_rows, schema_id, reps) as check_files returns them, for the
        files in `order` (indexes into the `check` calls; None: the calls' order). Schema ids are
        numbered by first appearance in that order, as check_files numbers them."""
        cdef Py_ssize_t n = self.files if order is None else len(order), k, i, c, a, nreps = 0
        cdef int32_t old
        idx_a = np.arange(n, dtype=np.int64) if order is None else np.asarray(order, np.int64).reshape(-1)
        cdef const int64_t[::1] idx = idx_a
        seen_a = np.zeros(self.files, np.uint8)
        cdef uint8_t[::1] seen = seen_a
        for k in range(n):
            i = idx[k]
            if i < 0 or i >= self.files or seen[i]:
                raise ValueError("Checker.finish: order is not a permutation of the files checked")
            seen[i] = 1
        rg_a = np.zeros(n + 1, np.int64)
        sid_a = np.full(n, -1, np.int32)
        renumber_a = np.full(len(self.reps_at), -1, np.int32)
        reps_a = np.empty(len(self.reps_at), np.int64)
        cdef int64_t[::1] rg = rg_a, reps = reps_a
        cdef int32_t[::1] sid = sid_a, renumber = renumber_a
        for k in range(n):
            i = idx[k]
            old = self.sid[i]
            rg[k + 1] = rg[k]
            if old < 0:
                continue
            rg[k + 1] += self.count[i]
            if renumber[old] < 0:
                renumber[old] = nreps
                reps[nreps] = k
                nreps += 1
            sid[k] = renumber[old]
        block_a, rows_a = np.empty(rg[n], np.int64), np.empty(rg[n], np.uint64)
        cdef int64_t[::1] block = block_a
        cdef uint64_t[::1] rows = rows_a
        for k in range(n):
            c = rg[k + 1] - rg[k]
            if c:
                a = self.first[idx[k]]
                memcpy(&block[rg[k]], self.blocks + a, c * sizeof(int64_t))
                memcpy(&rows[rg[k]], self.rows + a, c * sizeof(uint64_t))
        return rg_a, block_a, rows_a, sid_a, reps_a[:nreps].copy()


def check_files(Arena arena, const int64_t[::1] at, const int64_t[::1] size, int8_t[::1] status,
                targets, bint verify, crc):
    """Check every STATUS_OK file (plan_of for its snapshot `targets[i]`, None: the latest; the
    CRC over [CRC_START, crc offset) when verify: ISA-L's from C (pm/_crc), or `crc(buffer) -> int`
    where that is not loaded or NATIVE_CRC is off: the same zlib CRC either way); a file that fails
    becomes STATUS_SOLO. Returns (rg_start int64[n + 1]: each
    file's first row group in the concatenation (0 row groups where not OK); block_at int64: each
    row group's block address in the arena; num_rows uint64; schema_id int32[n]: -1 where not OK,
    else equal for files with byte-equal descriptors and names; reps: int64, the first file of
    each schema id)."""
    cdef Py_ssize_t n = at.shape[0], i
    if status.shape[0] != n or size.shape[0] != n or (targets is not None and len(targets) != n):
        raise ValueError("check_files: arrays of different lengths")
    cdef Checker c = Checker(arena, verify, crc)
    for i in range(n):
        c.check(at[i], size[i], None if targets is None else targets[i], &status[i])
    return c.finish()


def gather(Arena arena, const int64_t[::1] at, uint8_t[:, ::1] out):
    """out[i] = the out.shape[1] bytes at at[i] of the arena, each range checked."""
    cdef Py_ssize_t n = at.shape[0], i, w = out.shape[1]
    cdef int64_t o
    if out.shape[0] != n:
        raise ValueError("gather: output rows differ from addresses")
    for i in range(n):
        o = at[i]
        if o < 0 or o > arena.used - w:
            raise CorruptFileError(f"_pm batch: record at {o} lies outside the read buffer")
        memcpy(&out[i, 0], arena.data + o, w)
