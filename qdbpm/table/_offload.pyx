# cython: language_level=3
"""Kernel: a worker thread that never takes the GIL, reading a scan's ranges ahead and splitting
chunks (`parquet/_split.pyx`) as C jobs (`offload` is the wrapper); other kernels queue their
own C work on it (`call`: the table walk's lstat's and opens, `_walk.pyx`).

A pool thread running Python holds the GIL between its kernels, and the calling thread, which
filters and gathers, waits for it on every kernel's way out (TPC-H Q6: the price column's pages
were split on the pool, ~0.6 ms of waits per one shot). Here a job is a C struct on a queue: the
worker runs it without ever touching a Python object; the thread that needs a result takes it
from the job once done, or runs it itself if the worker has not started it (`steal`), so no
thread waits behind the queue for work it can do.

Lifetime: a job is referenced by the queue and by its Handle; the last to let go frees it. A
Handle keeps the Python buffers the job reads and writes alive, drops a job not started and waits
for one running before it goes. After a fork the child's queue starts empty (`reset`); jobs of
the parent's generation then answer "not done here" (code 1), and their callers read again.
"""

from libc.errno cimport EINTR, errno
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from posix.fcntl cimport O_CLOEXEC, O_NONBLOCK, O_RDONLY, open as c_open
from posix.unistd cimport close as c_close, pread as c_pread

from ..parquet._pages cimport mask_rows_c
from ..parquet._split cimport SplitOut, lookup_split_c, split_chunk_c, split_free, split_result
from ..parquet._thrift cimport page_parser
from .._pthread cimport (pthread_cond_broadcast, pthread_cond_init, pthread_cond_signal, pthread_cond_t,
                        pthread_cond_wait, pthread_mutex_init, pthread_mutex_lock, pthread_mutex_t,
                        pthread_mutex_unlock)

cdef enum:
    J_READ = 1
    J_SPLIT = 2
    J_FILTER = 3
    J_CALL = 4
    ST_QUEUED = 0
    ST_RUNNING = 1
    ST_DONE = 2
    ST_DROPPED = 3
    QCAP = 4096  # jobs queued at most; past it a job runs in the thread submitting it


cdef struct FilterPart:  # a filter's chunk: its split, the Decider memo of its column, its rows
    Job* split
    int ptype
    int max_def
    int width
    const void* known
    Py_ssize_t nknown
    const uint8_t* answers
    int64_t row0
    int64_t nrows


cdef struct Job:
    int kind
    int state
    int refs
    int code          # 0: done here; else the caller decides (reads again, walks in Python)
    uint64_t gen
    char* path        # read: the file, its bytes [start, start + want) into dst
    int64_t start
    uint8_t* dst
    Py_ssize_t want
    Py_ssize_t got
    Job* dep          # split: the read whose bytes src points into (NULL: read already)
    const uint8_t* src
    Py_ssize_t n
    int64_t num_values
    int codec
    void* parser
    SplitOut out
    FilterPart* parts  # filter: its chunks; dst its keep mask (want rows), rows the rows kept (got)
    Py_ssize_t nparts
    int64_t* rows
    call_fn fn        # call: fn(arg), a kernel's own work (`call`)
    void* arg


cdef pthread_mutex_t mu
cdef pthread_cond_t work_cv, done_cv
cdef Job* queue[QCAP]
cdef Py_ssize_t qhead = 0, qtail = 0
cdef uint64_t gen = 0


def reset():
    """A fresh, empty queue (at import, and in a forked child, whose worker did not survive)."""
    global qhead, qtail, gen
    pthread_mutex_init(&mu, NULL)
    pthread_cond_init(&work_cv, NULL)
    pthread_cond_init(&done_cv, NULL)
    qhead = qtail = 0
    gen += 1


reset()


cdef void _release(Job* j) noexcept nogil:
    """Drop one reference (mu held); the last frees the job."""
    j.refs -= 1
    if j.refs == 0:
        free(j.path)
        free(j.parts)
        split_free(&j.out)
        free(j)


cdef int _read(Job* j) noexcept nogil:
    cdef int fd = c_open(j.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    cdef Py_ssize_t k
    while fd < 0 and errno == EINTR:
        fd = c_open(j.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    if fd < 0:
        return 1
    j.got = 0
    while j.got < j.want:
        k = c_pread(fd, j.dst + j.got, j.want - j.got, j.start + j.got)
        if k < 0:
            if errno == EINTR:
                continue
            break
        if k == 0:
            break
        j.got += k
    c_close(fd)
    return 0 if j.got == j.want else 1


cdef int _filter(Job* j) noexcept nogil:
    """A unit's filter pass: each chunk's rows looked up (its split run first), then the rows kept."""
    cdef Py_ssize_t i, k
    cdef FilterPart* p
    if j.want:
        memset(j.dst, 1, j.want)
    for i in range(j.nparts):
        p = &j.parts[i]
        _finish(p.split)
        if p.split.state != ST_DONE or p.split.code != 0:
            return 1
        if lookup_split_c(&p.split.out, p.split.src, p.ptype, p.max_def, p.width, p.known, p.nknown, p.answers,
                          j.dst + p.row0, p.nrows):
            return 1
    k = mask_rows_c(j.dst, j.want, j.rows, j.want)
    if k < 0:
        return 1
    j.got = k
    return 0


cdef void _run(Job* j) noexcept nogil:
    """Run j, claimed by this thread (mu not held); a split's read has ended before."""
    if j.kind == J_READ:
        j.code = _read(j)
    elif j.kind == J_FILTER:
        j.code = _filter(j)
    elif j.kind == J_CALL:
        j.fn(j.arg)
        j.code = 0
    elif j.dep != NULL and (j.dep.state != ST_DONE or j.dep.code != 0):
        j.code = 1  # its bytes were never read here
    else:
        j.code = split_chunk_c(j.parser, j.src, j.n, j.num_values, j.codec, &j.out)


cdef void _finish(Job* j) noexcept nogil:
    """Return once j has ended: run here (its read first) if no thread has started it, else wait."""
    cdef bint mine
    if j.gen != gen:
        j.code = 1  # queued before a fork: nobody here runs it
        return
    if j.dep != NULL:
        _finish(j.dep)
    pthread_mutex_lock(&mu)
    mine = j.state == ST_QUEUED
    if mine:
        j.state = ST_RUNNING
    else:
        while j.state == ST_RUNNING:
            pthread_cond_wait(&done_cv, &mu)
    pthread_mutex_unlock(&mu)
    if not mine:
        return
    _run(j)
    pthread_mutex_lock(&mu)
    j.state = ST_DONE
    pthread_cond_broadcast(&done_cv)
    pthread_mutex_unlock(&mu)


def work():
    """The worker's loop (a daemon thread's target): never returns, never takes the GIL."""
    global qhead
    cdef Job* j
    cdef bint mine
    with nogil:
        while True:
            pthread_mutex_lock(&mu)
            while qhead == qtail:
                pthread_cond_wait(&work_cv, &mu)
            j = queue[qhead % QCAP]
            qhead += 1
            mine = j.state == ST_QUEUED
            if mine:
                j.state = ST_RUNNING
            else:
                _release(j)  # dropped, or run by the thread that needed it
            pthread_mutex_unlock(&mu)
            if not mine:
                continue
            if j.dep != NULL:
                _finish(j.dep)  # queued before it: already run, unless dropped
            _run(j)
            pthread_mutex_lock(&mu)
            j.state = ST_DONE
            pthread_cond_broadcast(&done_cv)
            _release(j)
            pthread_mutex_unlock(&mu)


cdef class Handle:
    """A submitted job: `wait` for its code (0: done), `steal` it, `drop` it if not started."""

    cdef Job* job
    cdef object keep  # what the job's pointers point into, and its read's Handle

    def wait(self) -> int:
        with nogil:
            _finish(self.job)
        return self.job.code

    def steal(self) -> bool:
        """Run it (its read first) in this thread if no thread has started it."""
        cdef Job* j = self.job
        cdef bint queued
        if j.gen != gen:
            return False
        with nogil:
            pthread_mutex_lock(&mu)
            queued = j.state == ST_QUEUED
            pthread_mutex_unlock(&mu)
            if queued:
                _finish(j)
        return queued

    def done(self) -> bool:
        return self.job.state == ST_DONE or self.job.gen != gen

    def drop(self) -> bool:
        """Drop it if no thread has started it (True), as a Future's cancel."""
        cdef bint dropped = False
        if self.job.gen != gen:
            return False
        with nogil:
            pthread_mutex_lock(&mu)
            if self.job.state == ST_QUEUED:
                self.job.state, self.job.code = ST_DROPPED, 1  # a later wait is told "not done"
                dropped = True
            pthread_mutex_unlock(&mu)
        return dropped

    @property
    def got(self) -> int:
        return self.job.got

    def split(self):
        """A split's answer once `wait` said 0: `_split.split_result`'s (taken once)."""
        return split_result(&self.job.out)

    def __dealloc__(self):
        cdef Job* j = self.job
        if j == NULL or j.gen != gen:
            return  # never submitted, or the parent's (a forked child leaves it be)
        with nogil:
            pthread_mutex_lock(&mu)
            if j.state == ST_QUEUED:
                j.state = ST_DROPPED
            while j.state == ST_RUNNING:
                pthread_cond_wait(&done_cv, &mu)
            _release(j)
            pthread_mutex_unlock(&mu)


cdef Job* _new(int kind) except NULL:
    cdef Job* j = <Job*>malloc(sizeof(Job))
    if j == NULL:
        raise MemoryError()
    j.kind, j.state, j.refs, j.code, j.gen = kind, ST_QUEUED, 1, 0, gen
    j.path, j.dst, j.src, j.dep, j.parser, j.parts, j.rows = NULL, NULL, NULL, NULL, NULL, NULL, NULL
    j.nparts = 0
    j.fn, j.arg = NULL, NULL
    j.start = j.want = j.got = j.n = j.num_values = j.codec = 0
    j.out.pages, j.out.decoded, j.out.npages, j.out.cap, j.out.decoded_size, j.out.used = NULL, NULL, 0, 0, 0, 0
    return j


cdef Handle _submit(Job* j, keep):
    """Queue j for the worker (behind a full queue: run here) and hand back its Handle."""
    global qtail
    cdef Handle h = Handle.__new__(Handle)
    cdef bint full
    h.job, h.keep = j, keep
    with nogil:
        pthread_mutex_lock(&mu)
        full = qtail - qhead >= QCAP
        if not full:
            j.refs += 1  # the queue's
            queue[qtail % QCAP] = j
            qtail += 1
            pthread_cond_signal(&work_cv)
        pthread_mutex_unlock(&mu)
        if full:
            _finish(j)
    return h


def read(bytes path, int64_t start, uint8_t[::1] dst) -> Handle:
    """Read bytes [start, start + len(dst)) of file `path` into `dst`; code 0 when all were
    read (else the caller reads again and names what failed). `path` holds no NUL."""
    if start < 0 or b"\0" in path:
        raise ValueError("read: a negative offset or a NUL in the path")
    cdef Job* j = _new(J_READ)
    cdef Py_ssize_t ln = len(path)
    j.path = <char*>malloc(ln + 1)
    if j.path == NULL:
        free(j)
        raise MemoryError()
    memcpy(j.path, <const char*>path, ln)
    j.path[ln] = 0
    j.start, j.want = start, dst.shape[0]
    j.dst = &dst[0] if dst.shape[0] else NULL
    return _submit(j, dst)


def split(Handle source, const uint8_t[::1] buf, Py_ssize_t offset, Py_ssize_t n, int64_t num_values,
          int codec) -> Handle:
    """Walk the chunk buf[offset:offset + n] (`_split.split_chunk_c`); `source`: the read
    filling `buf`, run before this (None: buf is read already)."""
    if offset < 0 or n < 0 or offset > buf.shape[0] - n:
        raise ValueError("split: the chunk lies outside its buffer")
    cdef Job* j = _new(J_SPLIT)
    parser = page_parser()
    j.dep = NULL if source is None else source.job
    j.src = (&buf[0] + offset) if n else NULL
    j.n, j.num_values, j.codec, j.parser = n, num_values, codec, <void*>parser
    return _submit(j, (source, buf, parser))


def filter(list parts, uint8_t[::1] keep, int64_t[::1] rows) -> Handle:
    """A unit's filter pass on split chunks (`_split.lookup_split_c`), `keep` its mask: code 0
    and the rows kept in rows[:got] (rows holds len(keep) + 8), else the Python pass decides.
    `parts`: per chunk (its split's Handle, physical type, max_def, width, the memo's values as bytes and their
    count, the memo's answers, its first row in the unit, its rows). Whoever takes a part's split
    result waits for this first: the result moves the decoded pages out of the job."""
    cdef Py_ssize_t n = keep.shape[0], i
    cdef Handle h
    cdef const uint8_t[::1] known, answers
    cdef FilterPart* p
    if rows.shape[0] < n + 8:
        raise ValueError("filter: rows holds fewer than len(keep) + 8 values")
    cdef Job* j = _new(J_FILTER)
    j.parts = <FilterPart*>malloc(max(1, len(parts)) * sizeof(FilterPart))
    if j.parts == NULL:
        free(j)
        raise MemoryError()
    try:
        for i, (split, ptype, max_def, width, known, nknown, answers, row0, nrows) in enumerate(parts):
            h = split
            if h.job.kind != J_SPLIT or width not in (4, 8) or nknown <= 0 or known.shape[0] != nknown * width \
                    or answers.shape[0] < nknown or row0 < 0 or nrows < 0 or row0 > n - nrows:
                raise ValueError("filter: a part outside its unit or memo")
            p = &j.parts[i]
            p.split, p.ptype, p.max_def, p.width, p.known, p.nknown = h.job, ptype, max_def, width, &known[0], nknown
            p.answers, p.row0, p.nrows = &answers[0], row0, nrows
    except BaseException:
        free(j.parts)
        free(j)
        raise
    j.nparts = len(parts)
    j.dst, j.want, j.rows = (&keep[0] if n else NULL), n, &rows[0]
    return _submit(j, (parts, keep, rows))


cdef object call(call_fn fn, void* arg, object keep):
    """Queue fn(arg) for the worker: a kernel's C work that touches no Python object (the walk's
    lstat's and opens, `_walk.pyx`); its Handle as the other jobs' (`keep`: what arg points into). fn
    must be safe to run in whichever thread gets it first: a `wait` or `steal` runs it here."""
    cdef Job* j = _new(J_CALL)
    j.fn, j.arg = fn, arg
    return _submit(j, keep)
