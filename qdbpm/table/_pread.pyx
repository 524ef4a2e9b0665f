# cython: language_level=3
"""Kernel: a local file's byte range read in one call that releases the GIL once (`ranges` is the
wrapper). os.open, os.preadv and os.close each release the GIL and take it back: a scan's pool
thread reading a unit ahead then waits up to three times for the thread filtering the last unit,
which holds the GIL between its kernels. Here the open, the reads and the close run in one
nogil block."""

from libc.errno cimport EINTR, errno
from libc.stdint cimport int64_t, uint8_t
from posix.fcntl cimport O_CLOEXEC, O_NONBLOCK, O_RDONLY, open as c_open
from posix.unistd cimport close as c_close, pread as c_pread

import os


def read_into(bytes path, int64_t start, uint8_t[::1] out):
    """Read up to len(out) bytes of file `path` from byte `start` into `out`; how many were read
    (fewer at the end of the file: the caller names the short read). OSError (errno, path) as
    os.open / os.preadv raise it. O_NONBLOCK: a FIFO put in the file's place fails the read
    instead of hanging the open."""
    cdef const char* name = path
    cdef Py_ssize_t want = out.shape[0], got = 0, n = 0
    cdef int fd, err = 0
    cdef uint8_t* dst = &out[0] if want else NULL
    if start < 0:
        raise ValueError("negative offset")
    if b"\0" in path:
        raise ValueError("embedded null byte")  # as os.open: C would read the name up to it
    with nogil:
        fd = c_open(name, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        while fd < 0 and errno == EINTR:  # retried, as os.open retries (PEP 475)
            fd = c_open(name, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        if fd < 0:
            err = errno
        else:
            while got < want:
                n = c_pread(fd, dst + got, want - got, start + got)
                if n < 0:
                    if errno == EINTR:
                        continue
                    err = errno
                    break
                if n == 0:
                    break
                got += n
            c_close(fd)
    if err:
        raise OSError(err, os.strerror(err), path.decode("utf-8", "surrogateescape"))
    return got
