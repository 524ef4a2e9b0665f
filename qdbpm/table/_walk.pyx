# cython: language_level=3
"""Kernel: the listing rule of table/listing.py (directories below a root holding a `_pm`, none
under a hidden directory) in one C pass over the tree, reading each `_pm` it finds into one
arena as it goes (pm/_batch.read_at), so a one-shot planner pays a few system calls per
partition and no Python object but its name.

A directory of many subdirectories (a table's partitions, AHEAD or more) is shared with the
offload worker (`_offload.call`): this thread stats, opens, reads and checks them from the front,
the worker stats and opens them from the back (the path lookups: most of a partition's system
calls), until they meet; this thread then reads and checks the worker's in order, from the
descriptors it opened (HOLD at most: the worker stops there, and the rest is this
thread's; lstat's alone would move kernel caches between cores for little). Every byte is read
once, by this thread, into the arena: the work is split, not added to. Whoever does what, the
answer is the same (tests/table/test_walk.py).

It follows os.walk(root) (followlinks=False), which listing.list_partitions uses and the tests
hold it to: an entry is a directory when it is one after following symlinks; `_pm` counts when it
is not a directory; symlinked directories are not entered; directories that cannot be read are
skipped; hidden names (HIDDEN_PREFIXES) are never entered.
"""

from libc.errno cimport ENOENT, ENOTDIR, errno
from libc.stdint cimport int8_t, int64_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, strcmp, strlen
from posix.resource cimport RLIMIT_NOFILE, getrlimit, rlimit
from posix.stat cimport S_ISDIR, S_ISLNK, fstat, fstatat, struct_stat

from qdbpm._pthread cimport pthread_mutex_init, pthread_mutex_lock, pthread_mutex_t, pthread_mutex_unlock
from qdbpm.pm._batch cimport Arena, Checker, grow, open_status, read_at, read_fd, STATUS_MISSING, STATUS_SOLO
from qdbpm.table._offload cimport call

import os

import numpy as np

from ..errors import PmError

cdef extern from "fcntl.h" nogil:
    int c_openat "openat"(int dirfd, const char* path, int flags)
    int O_RDONLY, O_CLOEXEC, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, AT_SYMLINK_NOFOLLOW, AT_FDCWD

cdef extern from "dirent.h" nogil:
    ctypedef struct DIR
    struct dirent:
        unsigned char d_type
        char d_name[256]
    DIR* fdopendir(int fd)
    dirent* readdir(DIR* d)
    int closedir(DIR* d)
    enum: DT_DIR, DT_LNK, DT_UNKNOWN

cdef extern from "Python.h":
    object PyUnicode_DecodeFSDefaultAndSize(const char* s, Py_ssize_t size)

cdef extern from "unistd.h" nogil:
    int close(int fd)

cdef extern from "sys/vfs.h" nogil:
    ctypedef struct statfs_t "struct statfs":
        long f_type
    int fstatfs(int fd, statfs_t* buf)

cdef enum:
    # Filesystems whose directory link count is 2 + its subdirectories (GNU fts's leaf rule);
    # elsewhere (btrfs, overlayfs, NFS, FUSE, ...) every directory is listed.
    EXT_MAGIC = 0xEF53
    XFS_MAGIC = 0x58465342
    TMPFS_MAGIC = 0x01021994
    MAX_DEPTH = 256  # deeper trees are refused, not walked (and not a stack overflow)
    PATH_MAX_BYTES = 4096
    # what the worker did for a subdirectory (Entry.state)
    PRE_NONE = 0  # nothing: this thread does it all
    PRE_STAT = 1  # lstat only (the leaf test takes it): not a leaf, or its `_pm` is opened here
    PRE_OPEN_FAILED = 2  # a leaf whose `_pm` did not open (Entry.err)
    PRE_OPENED = 3  # a leaf whose `_pm` is open (Entry.fd), for this thread to read and close

AHEAD = 8  # subdirectories of one directory from which the worker lstat's and opens about half
HOLD = 256  # files the worker holds open for this thread at most (and 1/16 of the process's limit)
MAIN_CLAIMS = True  # tests: False leaves every subdirectory's stat and open to the prefetch job


cdef struct Entry:  # one subdirectory, as the prefetch job left it (what the leaf test reads of its lstat)
    int state
    int stat_rc
    int err
    int fd
    unsigned int mode
    uint64_t dev, nlink


cdef struct Pre:  # a directory's subdirectories: this thread claims from the front, the worker from the back
    pthread_mutex_t mu
    int dirfd
    uint64_t dev
    Py_ssize_t n, front, back, held, fds
    const char** names
    const char* pm_name
    Entry* e


cdef bint broken_link(int fd, const char* rel) noexcept:
    """`rel` below fd is a symlink whose target does not exist."""
    cdef struct_stat st
    return fstatat(fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 and S_ISLNK(st.st_mode) and fstatat(fd, rel, &st, 0) != 0


cdef inline bint is_leaf(int rc, unsigned int mode, uint64_t st_dev, uint64_t nlink, uint64_t dev) noexcept nogil:
    """The leaf rule on a subdirectory's lstat (`rc` its result): a directory on the root's
    device with no subdirectory (link count 2), whose `_pm` is opened without listing it."""
    return rc == 0 and S_ISDIR(mode) and st_dev == dev and nlink == 2


cdef void _prefetch_one(Pre* p, Py_ssize_t i) noexcept nogil:
    """Subdirectory i's lstat and, for a leaf, its `_pm` opened as read_at opens it (the path
    lookups, most of a partition's system calls); this thread reads it from the descriptor."""
    cdef Entry* e = &p.e[i]
    cdef char rel[PATH_MAX_BYTES]
    cdef size_t a = strlen(p.names[i]), b = strlen(p.pm_name)
    cdef int fd
    cdef struct_stat st
    e.stat_rc = fstatat(p.dirfd, p.names[i], &st, AT_SYMLINK_NOFOLLOW)
    e.mode, e.dev, e.nlink, e.state = st.st_mode, st.st_dev, st.st_nlink, PRE_STAT
    if not is_leaf(e.stat_rc, e.mode, e.dev, e.nlink, p.dev) or a + b + 2 > PATH_MAX_BYTES:
        return
    memcpy(rel, p.names[i], a)
    rel[a] = b"/"
    memcpy(rel + a + 1, p.pm_name, b + 1)
    fd = c_openat(p.dirfd, rel, O_RDONLY | O_CLOEXEC | O_NONBLOCK)  # read_at's flags
    if fd < 0:
        e.err, e.state = errno, PRE_OPEN_FAILED
        return
    e.fd, e.state = fd, PRE_OPENED
    p.held += 1


cdef void prefetch(void* arg) noexcept nogil:
    """The worker's job (`_offload.call`): subdirectories claimed from the back, one at a time,
    until they meet the walking thread's claims from the front (`_Prefetch.claim`)."""
    cdef Pre* p = <Pre*>arg
    cdef Py_ssize_t i
    while True:
        pthread_mutex_lock(&p.mu)
        if p.back <= p.front or p.held >= p.fds:  # met; or as many open as it may hold: the rest is this thread's
            pthread_mutex_unlock(&p.mu)
            return
        p.back -= 1
        i = p.back
        pthread_mutex_unlock(&p.mu)
        _prefetch_one(p, i)


cdef class _Prefetch:
    """A directory's subdirectories shared with the worker (`Pre`), and what its C arrays point
    into. Freed only once its job has ended: the job's Handle keeps it."""

    cdef Pre* p
    cdef list names

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.p == NULL:
            return
        if self.p.e != NULL:
            for i in range(self.p.n):
                if self.p.e[i].state == PRE_OPENED:  # never read (the walk raised first)
                    close(self.p.e[i].fd)
        free(self.p.names)
        free(self.p.e)
        free(self.p)

    cdef bint claim(self) noexcept:
        """Claim the next subdirectory from the front (False: the worker has the rest)."""
        cdef bint ok
        with nogil:
            pthread_mutex_lock(&self.p.mu)
            ok = self.p.front < self.p.back
            if ok:
                self.p.front += 1
            pthread_mutex_unlock(&self.p.mu)
        return ok


cdef Py_ssize_t fd_limit() noexcept:
    """The process's soft limit on open files (1,024 where it cannot be read)."""
    cdef rlimit rl
    if getrlimit(RLIMIT_NOFILE, &rl) != 0:
        return 1024
    return <Py_ssize_t>min(rl.rlim_cur, <unsigned long>(1 << 30))


cdef _Prefetch _prefetch(int fd, list names, bytes pm_name, uint64_t dev):
    """A _Prefetch over `names` (bytes) below fd, its job not yet queued."""
    cdef _Prefetch pf = _Prefetch.__new__(_Prefetch)
    cdef Py_ssize_t n = len(names), i
    pf.names = names + [pm_name]  # what the C pointers point into
    pf.p = <Pre*>calloc(1, sizeof(Pre))
    if pf.p == NULL:
        raise MemoryError()
    pf.p.names = <const char**>malloc(n * sizeof(char*))
    pf.p.e = <Entry*>calloc(n, sizeof(Entry))  # PRE_NONE each
    if pf.p.names == NULL or pf.p.e == NULL:
        raise MemoryError()
    for i in range(n):
        pf.p.names[i] = <const char*>(<bytes>names[i])
    pthread_mutex_init(&pf.p.mu, NULL)
    pf.p.dirfd, pf.p.dev, pf.p.pm_name = fd, dev, <const char*>pm_name
    pf.p.n, pf.p.front, pf.p.back, pf.p.held = n, 0, n, 0
    pf.p.fds = min(<Py_ssize_t>HOLD, fd_limit() // 16)
    return pf



cdef int _finish(handle) except -1:
    """Return once the prefetch job has ended, or dropped it if the worker never started it
    (this thread claimed every subdirectory then)."""
    if not (MAIN_CLAIMS and handle.drop()):
        handle.wait()  # not started: run here (MAIN_CLAIMS off); running: wait
    return 0


cdef class _Walk:
    cdef bint read, identities, hidden_dot, hidden_us, leaf_ok
    cdef uint64_t dev
    cdef Py_ssize_t ahead
    cdef bytes pm_name
    cdef Arena arena
    cdef Checker checker  # None, or each file read is checked at once (its bytes still in cache)
    cdef int64_t max_file, budget
    cdef list names, idents
    cdef int64_t* at  # with `read`: per partition found, where its `_pm` lies in the arena, its size
    cdef int64_t* size
    cdef int8_t* status  # and its status (pm/_batch: read_files' statuses)
    cdef Py_ssize_t nread, cap
    cdef char path[PATH_MAX_BYTES]  # the relative path of the directory being walked

    def __dealloc__(self):
        free(self.at)
        free(self.size)
        free(self.status)

    cdef int push(self, int64_t at, int64_t size, int8_t status) except -1:
        """One more partition's read."""
        cdef Py_ssize_t cap = self.cap * 2 if self.cap else 256
        if self.nread == self.cap:
            self.at = <int64_t*>grow(self.at, cap, sizeof(int64_t), "walk's read list")
            self.size = <int64_t*>grow(self.size, cap, sizeof(int64_t), "walk's read list")
            self.status = <int8_t*>grow(self.status, cap, sizeof(int8_t), "walk's read list")
            self.cap = cap
        self.at[self.nread], self.size[self.nread], self.status[self.nread] = at, size, status
        self.nread += 1
        return 0

    cdef tuple reads(self):
        """(at, size, status) of every partition found, as numpy arrays."""
        at, size, status = np.empty(self.nread, np.int64), np.empty(self.nread, np.int64), np.empty(self.nread, np.int8)
        cdef int64_t[::1] a = at, z = size
        cdef int8_t[::1] t = status
        if self.nread:
            memcpy(&a[0], self.at, self.nread * sizeof(int64_t))
            memcpy(&z[0], self.size, self.nread * sizeof(int64_t))
            memcpy(&t[0], self.status, self.nread * sizeof(int8_t))
        return at, size, status

    cdef int visit(self, int fd, Py_ssize_t plen, int depth) except -1:
        """Walk the open directory fd (relative path: path[:plen]); closes fd."""
        cdef DIR* d = fdopendir(fd)
        cdef dirent* e
        cdef struct_stat st
        cdef bint is_dir, is_link, found = False
        cdef const char* name
        cdef Py_ssize_t n
        cdef Py_ssize_t ns, i
        cdef list subdirs = []
        cdef _Prefetch pre = None
        handle = None
        if d == NULL:
            close(fd)
            return 0  # os.walk skips a directory it cannot list
        try:
            while True:
                e = readdir(d)
                if e == NULL:
                    break
                name = e.d_name
                if name[0] == b"." and (name[1] == 0 or (name[1] == b"." and name[2] == 0)):
                    continue
                if e.d_type == DT_DIR:
                    is_dir, is_link = True, False
                elif e.d_type == DT_LNK or e.d_type == DT_UNKNOWN:
                    is_link = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 and S_ISLNK(st.st_mode)
                    is_dir = fstatat(fd, name, &st, 0) == 0 and S_ISDIR(st.st_mode)  # follows, as is_dir()
                else:
                    is_dir, is_link = False, False
                if not is_dir:
                    if strcmp(name, self.pm_name) == 0:
                        found = True
                    continue
                if is_link or (name[0] == b"." and self.hidden_dot) or (name[0] == b"_" and self.hidden_us):
                    continue
                subdirs.append(<bytes>name)
            if found:
                self.found(fd, self.pm_name, plen, False)
            ns = len(subdirs)
            if self.read and self.leaf_ok and ns >= self.ahead:
                # the worker stats and opens from the back while this thread goes from the front
                pre = _prefetch(fd, subdirs, self.pm_name, self.dev)
                handle = call(prefetch, <void*>pre.p, pre)
            i = 0
            while i < ns and (handle is None or (MAIN_CLAIMS and pre.claim())):
                self.sub(fd, subdirs[i], plen, depth, NULL, 0)
                i += 1
            if handle is not None:
                _finish(handle)  # the worker's share is done (none if it never started)
                handle = None
                while i < ns:
                    self.sub(fd, subdirs[i], plen, depth, pre.p, i)
                    i += 1
        finally:
            if handle is not None:
                _finish(handle)  # the worker uses fd: it ends before fd is closed
            closedir(d)  # closes fd
        return 0

    cdef int sub(self, int fd, bytes sub_name, Py_ssize_t plen, int depth, Pre* p, Py_ssize_t i) except -1:
        """Subdirectory `sub_name` of the directory fd (path[:plen]): a leaf's `_pm` read, else
        walked; with `p`, from what the worker did for it (entry i), if anything."""
        cdef struct_stat st
        cdef Py_ssize_t n = len(sub_name), k
        cdef int rc, sub
        cdef bint leaf
        cdef char rel[PATH_MAX_BYTES]
        cdef Entry* e = NULL if p == NULL or p.e[i].state == PRE_NONE else &p.e[i]
        if plen + n + 2 > PATH_MAX_BYTES:
            raise PmError(f"partition path longer than {PATH_MAX_BYTES} bytes below the table root")
        if depth + 1 > MAX_DEPTH:
            raise PmError(f"directories nested deeper than {MAX_DEPTH} levels below the table root")
        k = plen
        if plen:
            self.path[plen] = b"/"
            k += 1
        memcpy(&self.path[k], <const char*>sub_name, n)
        if self.leaf_ok:
            if e != NULL:
                leaf = is_leaf(e.stat_rc, e.mode, e.dev, e.nlink, self.dev)
            else:
                rc = fstatat(fd, sub_name, &st, AT_SYMLINK_NOFOLLOW)
                leaf = is_leaf(rc, st.st_mode, st.st_dev, st.st_nlink, self.dev)
            if leaf:
                # No subdirectory (GNU find's leaf rule): not listed; its `_pm` opened directly.
                if n + len(self.pm_name) + 2 > PATH_MAX_BYTES:
                    raise PmError(f"partition path longer than {PATH_MAX_BYTES} bytes below the table root")
                memcpy(rel, <const char*>sub_name, n)
                rel[n] = b"/"
                memcpy(rel + n + 1, <const char*>self.pm_name, len(self.pm_name) + 1)
                self.found(fd, rel, k + n, True, p, i)
                return 0
        sub = c_openat(fd, sub_name, O_RDONLY | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW)
        if sub < 0:
            return 0  # vanished or unreadable: os.walk skips it too
        self.visit(sub, k + n, depth + 1)
        return 0

    cdef int found(self, int fd, const char* rel, Py_ssize_t plen, bint unlisted, Pre* p=NULL, Py_ssize_t i=0) except -1:
        """The `_pm` at `rel` below fd names a partition (path[:plen]) unless, `unlisted` (its
        directory was not listed), it is missing or a directory. `p`: its open by the worker
        (entry i), if any."""
        cdef Entry* e = NULL if p == NULL else &p.e[i]
        cdef struct_stat st
        cdef int64_t at = 0, size = 0
        cdef int status, err
        cdef int8_t checked
        if self.identities or (unlisted and not self.read):
            if fstatat(fd, rel, &st, 0) != 0:
                err = errno
                if err == ENOENT or err == ENOTDIR:
                    # gone, or never there; unlisted, without identities: a broken symlink is
                    # a partition to os.walk (a non-directory named _pm)
                    if self.identities or not broken_link(fd, rel):
                        return 0
                elif self.identities:
                    raise PmError(f"{PyUnicode_DecodeFSDefaultAndSize(self.path, plen)!r}: cannot stat its "
                                  f"{self.pm_name.decode()}: {os.strerror(err)}")
                # else (names only) os.walk would list it; opening it reports why it cannot be read
            elif unlisted and S_ISDIR(st.st_mode):
                return 0
        if self.read:
            if e != NULL and e.state == PRE_OPEN_FAILED:
                status = open_status(e.err)
            elif e != NULL and e.state == PRE_OPENED:
                e.state = PRE_STAT  # the descriptor is read_fd's to close
                status = read_fd(self.arena, e.fd, self.max_file, self.budget, &at, &size)
            else:
                status = read_at(self.arena, fd, rel, self.max_file, self.budget, &at, &size)
            if status == STATUS_MISSING:
                # listed: os.walk saw a non-directory (gone since, or a broken symlink); unlisted:
                # a partition only if it is a broken symlink (not a directory, not absent)
                if unlisted and not broken_link(fd, rel):
                    return 0
                status = STATUS_SOLO  # the one-file open raises what is wrong
            if self.checker is not None:
                checked = status
                self.checker.check(at, size, None, &checked)
                status = checked
            self.push(at, size, status)
        if self.identities:
            self.idents.append((st.st_size, <object>st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, st.st_ino))
        self.names.append(PyUnicode_DecodeFSDefaultAndSize(self.path, plen))
        return 0


def walk(root, bytes pm_name, hidden, *, bint identities=False, bint read=False, int64_t max_file=0,
         int64_t budget=0, bint leaf=True, crc=None, Py_ssize_t ahead=AHEAD):
    """(names, idents, arena, at, size, status, checker) of the partitions below `root` (bytes): names as
    os.walk's relative paths ('/'-joined, unsorted); idents (size, mtime ns, inode) of each
    `_pm` when `identities`; with `read`, each `_pm`'s bytes read into `arena` as
    pm/_batch.read_files does (at, size, status: int64 / int64 / int8 arrays), else None for
    those four. `hidden`: the name prefixes never entered ('.' and/or '_'). leaf=False: list
    every directory (the leaf rule off, as on filesystems it does not hold on). crc: with `read`,
    check each file right after reading it (pm/_batch.Checker; its CRC from C, by `crc` where
    that is not loaded; a file that fails becomes STATUS_SOLO) and return the Checker last,
    else None there. ahead: with `read` and the leaf rule, a directory of this many
    subdirectories or more shares their lstat's and opens with the offload worker
    (`_offload.call`: this thread takes them from the front, the worker from the back; this
    thread reads every file; the answer is the same whoever opens what)."""
    cdef _Walk w = _Walk.__new__(_Walk)
    w.ahead = max(1, ahead)
    w.read, w.identities, w.pm_name = read, identities, pm_name
    w.hidden_dot, w.hidden_us = "." in hidden, "_" in hidden
    if set(hidden) - {".", "_"}:
        raise ValueError(f"walk: hidden prefixes {hidden!r}: only '.' and '_' are supported")
    w.arena = Arena.__new__(Arena)
    w.checker = Checker(w.arena, True, crc) if read and crc is not None else None
    w.max_file, w.budget = max_file, budget
    w.names, w.idents = [], []
    cdef int fd = c_openat(AT_FDCWD, <bytes>root, O_RDONLY | O_CLOEXEC | O_DIRECTORY)
    if fd < 0:
        return None
    cdef struct_stat st
    cdef statfs_t fs
    w.leaf_ok = leaf and fstat(fd, &st) == 0 and fstatfs(fd, &fs) == 0 and (
        fs.f_type == EXT_MAGIC or fs.f_type == XFS_MAGIC or fs.f_type == TMPFS_MAGIC)
    w.dev = st.st_dev
    w.visit(fd, 0, 0)
    if not read:
        return w.names, w.idents if identities else None, None, None, None, None, None
    return (w.names, w.idents if identities else None, w.arena, *w.reads(), w.checker)
