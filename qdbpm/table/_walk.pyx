# cython: language_level=3
"""Kernel: the listing rule of table/listing.py (directories below a root holding a `_pm`, none
under a hidden directory) in one C pass over the tree, reading each `_pm` it finds into one
arena as it goes (pm/_batch.read_at), so a one-shot planner pays a few system calls per
partition and no Python object but its name.

A directory of many subdirectories (a table's partitions, AHEAD or more) is shared with the
offload worker (`_offload.call`): this thread stats and reads them from the front, the worker
from the back into its own buffer, until they meet; this thread then takes the worker's stats
and reads in order, each read only where it is the one read_at would make (the same room), and
checks every file itself. Whoever reads what, the answer is the same (tests/table/test_walk.py).
TPC-H's 84 partitions: read_partitions ~1.5 -> ~0.7 ms.

It follows os.walk(root) (followlinks=False), which listing.list_partitions uses and the tests
hold it to: an entry is a directory when it is one after following symlinks; `_pm` counts when it
is not a directory; symlinked directories are not entered; directories that cannot be read are
skipped; hidden names (HIDDEN_PREFIXES) are never entered.
"""

from libc.errno cimport ENOENT, ENOTDIR, errno
from libc.stdint cimport int8_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy, strcmp, strlen
from posix.stat cimport S_ISDIR, S_ISLNK, fstat, fstatat, struct_stat
from posix.unistd cimport pread

from qdbpm._pthread cimport pthread_mutex_init, pthread_mutex_lock, pthread_mutex_t, pthread_mutex_unlock
from qdbpm.pm._batch cimport (Arena, Checker, commit, open_status, read_at, read_room, STATUS_MISSING,
                              STATUS_SOLO)
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
    HEADER_SIZE = 32  # layout.HEADER_SIZE: a first read shorter than this is never prefetched
    # what the worker did for a subdirectory (Entry.state)
    PRE_NONE = 0  # nothing: this thread does it all
    PRE_STAT = 1  # stat only (the leaf test takes it): not a leaf, or its `_pm` is read here
    PRE_OPEN_FAILED = 2  # a leaf whose `_pm` did not open (Entry.err)
    PRE_READ = 3  # a leaf whose `_pm` was read whole: Entry.got bytes at Entry.off of Pre.buf

AHEAD = 8  # subdirectories of one directory from which the worker reads about half their `_pm`
MAIN_CLAIMS = True  # tests: False leaves every subdirectory's stat and read to the prefetch job


cdef struct Entry:  # one subdirectory, as the prefetch job left it
    int state
    int stat_rc
    int err
    struct_stat st
    int64_t got, off


cdef struct Pre:  # a directory's subdirectories: this thread claims from the front, the worker from the back
    pthread_mutex_t mu
    int dirfd
    uint64_t dev
    Py_ssize_t n, front, back
    const char** names
    const char* pm_name
    Entry* e
    uint8_t* buf
    int64_t cap, used, room


# The prefetch buffer last freed (its pages faulted in already), for the next walk's.
cdef uint8_t* pre_spare = NULL
cdef int64_t pre_spare_cap = 0


cdef bint broken_link(int fd, const char* rel) noexcept:
    """`rel` below fd is a symlink whose target does not exist."""
    cdef struct_stat st
    return fstatat(fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 and S_ISLNK(st.st_mode) and fstatat(fd, rel, &st, 0) != 0


cdef inline bint is_leaf(int rc, const struct_stat* st, uint64_t dev) noexcept nogil:
    """The leaf rule on a subdirectory's lstat (`rc` its result): a directory on the root's
    device with no subdirectory (link count 2), whose `_pm` is opened without listing it."""
    return rc == 0 and S_ISDIR(st.st_mode) and st.st_dev == dev and st.st_nlink == 2


cdef void _prefetch_one(Pre* p, Py_ssize_t i) noexcept nogil:
    """Subdirectory i's lstat and, for a leaf, its `_pm`'s first read (p.room bytes) into p.buf,
    as `_Walk.sub` and read_at would make them. A read that fills its room (maybe more), fails
    or finds no memory is left to read_at in the walking thread."""
    cdef Entry* e = &p.e[i]
    cdef char rel[PATH_MAX_BYTES]
    cdef size_t a = strlen(p.names[i]), b = strlen(p.pm_name)
    cdef int fd
    cdef int64_t r, cap
    cdef uint8_t* nb
    e.stat_rc = fstatat(p.dirfd, p.names[i], &e.st, AT_SYMLINK_NOFOLLOW)
    e.state = PRE_STAT
    if not is_leaf(e.stat_rc, &e.st, p.dev) or a + b + 2 > PATH_MAX_BYTES:
        return
    memcpy(rel, p.names[i], a)
    rel[a] = b"/"
    memcpy(rel + a + 1, p.pm_name, b + 1)
    fd = c_openat(p.dirfd, rel, O_RDONLY | O_CLOEXEC | O_NONBLOCK)  # read_at's flags
    if fd < 0:
        e.err, e.state = errno, PRE_OPEN_FAILED
        return
    if p.used + p.room + 8 > p.cap:
        cap = p.cap if p.cap else 262144
        while cap < p.used + p.room + 8:
            cap *= 2
        nb = <uint8_t*>realloc(p.buf, cap)
        if nb == NULL:
            close(fd)
            return
        p.buf, p.cap = nb, cap
    r = pread(fd, p.buf + p.used, p.room, 0)
    close(fd)
    if r < 0 or r >= p.room:
        return
    e.off, e.got, e.state = p.used, r, PRE_READ
    p.used = (p.used + r + 7) & ~(<int64_t>7)


cdef void prefetch(void* arg) noexcept nogil:
    """The worker's job (`_offload.call`): subdirectories claimed from the back, one at a time,
    until they meet the walking thread's claims from the front (`_Prefetch.claim`)."""
    cdef Pre* p = <Pre*>arg
    cdef Py_ssize_t i
    while True:
        pthread_mutex_lock(&p.mu)
        if p.back <= p.front:
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
        global pre_spare, pre_spare_cap
        if self.p == NULL:
            return
        if self.p.buf != NULL and pre_spare_cap < self.p.cap <= (64 << 20):
            free(pre_spare)
            pre_spare, pre_spare_cap = self.p.buf, self.p.cap
        else:
            free(self.p.buf)
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


cdef _Prefetch _prefetch(int fd, list names, bytes pm_name, uint64_t dev, int64_t room):
    """A _Prefetch over `names` (bytes) below fd, its job not yet queued."""
    global pre_spare, pre_spare_cap
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
    pf.p.dirfd, pf.p.dev, pf.p.pm_name, pf.p.room = fd, dev, <const char*>pm_name, room
    pf.p.n, pf.p.front, pf.p.back = n, 0, n
    pf.p.buf, pf.p.cap, pre_spare, pre_spare_cap = pre_spare, pre_spare_cap, NULL, 0
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
    cdef list names, at, size, status, idents
    cdef char path[PATH_MAX_BYTES]  # the relative path of the directory being walked

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
            if self.read and self.leaf_ok and ns >= self.ahead and read_room(self.arena, self.max_file, self.budget) \
                    >= HEADER_SIZE:
                # the worker stats and reads from the back while this thread goes from the front
                pre = _prefetch(fd, subdirs, self.pm_name, self.dev, read_room(self.arena, self.max_file, self.budget))
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
                rc, st = e.stat_rc, e.st
            else:
                rc = fstatat(fd, sub_name, &st, AT_SYMLINK_NOFOLLOW)
            if is_leaf(rc, &st, self.dev):
                # No subdirectory (GNU find's leaf rule): not listed; its `_pm` opened directly.
                self.found(fd, sub_name + b"/" + self.pm_name, k + n, True, p, i)
                return 0
        sub = c_openat(fd, sub_name, O_RDONLY | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW)
        if sub < 0:
            return 0  # vanished or unreadable: os.walk skips it too
        self.visit(sub, k + n, depth + 1)
        return 0

    cdef int found(self, int fd, bytes rel, Py_ssize_t plen, bint unlisted, Pre* p=NULL, Py_ssize_t i=0) except -1:
        """The `_pm` at `rel` below fd names a partition (path[:plen]) unless, `unlisted` (its
        directory was not listed), it is missing or a directory. `p`: its read by the worker
        (entry i), taken where it is the one read_at would make now (the same room)."""
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
            elif e != NULL and e.state == PRE_READ and read_room(self.arena, self.max_file, self.budget) == p.room:
                self.arena.reserve(e.got + 8)
                memcpy(self.arena.data + self.arena.used, p.buf + e.off, e.got)
                status = commit(self.arena, e.got, &at, &size)
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
            self.at.append(at)
            self.size.append(size)
            self.status.append(status)
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
    check each file right after reading it (pm/_batch.Checker, CRC by `crc`; a file that fails
    becomes STATUS_SOLO) and return the Checker last, else None there. ahead: with `read` and the
    leaf rule, a directory of this many subdirectories or more shares their stats and first reads
    with the offload worker (`_offload.call`: this thread takes them from the front, the worker
    from the back; the answer is the same whoever reads what)."""
    cdef _Walk w = _Walk.__new__(_Walk)
    w.ahead = max(1, ahead)
    w.read, w.identities, w.pm_name = read, identities, pm_name
    w.hidden_dot, w.hidden_us = "." in hidden, "_" in hidden
    if set(hidden) - {".", "_"}:
        raise ValueError(f"walk: hidden prefixes {hidden!r}: only '.' and '_' are supported")
    w.arena = Arena.__new__(Arena)
    w.checker = Checker(w.arena, True, crc) if read and crc is not None else None
    w.max_file, w.budget = max_file, budget
    w.names, w.at, w.size, w.status, w.idents = [], [], [], [], []
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
    return (w.names, w.idents if identities else None, w.arena, np.array(w.at, np.int64),
            np.array(w.size, np.int64), np.array(w.status, np.int8), w.checker)
