# Declarations the table walker (table/_walk.pyx) cimports: it reads each `_pm` as it finds it.
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint64_t


cdef class Arena:
    cdef uint8_t* data
    cdef Py_ssize_t used, cap
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]
    cdef int reserve(self, Py_ssize_t extra) except -1


cdef enum:
    STATUS_OK = 0
    STATUS_LARGE = 1
    STATUS_SOLO = 2
    STATUS_MISSING = 3


cdef void* grow(void* p, Py_ssize_t cap, size_t item, str what) except NULL
cdef int open_status(int err) noexcept nogil
cdef int read_fd(Arena arena, int fd, int64_t max_file, int64_t budget, int64_t* at, int64_t* size) except -1
cdef int read_at(Arena arena, int dirfd, const char* name, int64_t max_file, int64_t budget,
                 int64_t* at, int64_t* size) except -1


cdef class Checker:
    cdef Arena arena
    cdef bint verify, native
    cdef object crc
    cdef list reps_at, reps_cols
    cdef dict by_hash
    cdef int64_t* blocks
    cdef uint64_t* rows
    cdef Py_ssize_t used, cap
    cdef int64_t* first  # per file checked: its first block in blocks / rows
    cdef int64_t* count  # its row groups
    cdef int32_t* sid  # its schema id (-1: not OK)
    cdef Py_ssize_t files, fcap, last
    cdef int reserve(self, Py_ssize_t extra) except -1
    cdef int reserve_file(self) except -1
    cdef uint64_t file_crc(self, const uint8_t* f, uint64_t crc_offset) except? 0xFFFFFFFFFFFFFFFF
    cdef int check(self, int64_t at, int64_t size, object target, int8_t* status) except -1
