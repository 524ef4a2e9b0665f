# cython: language_level=3
"""Kernel: the listing rule of table/listing.py (directories below a root holding a `_pm`, none
under a hidden directory) in one C pass over the tree, reading each `_pm` it finds into one
arena as it goes (pm/_batch.read_at), so a one-shot planner pays a few system calls per
partition and no Python object but its name.

It follows os.walk(root) (followlinks=False), which listing.list_partitions uses and the tests
hold it to: an entry is a directory when it is one after following symlinks; `_pm` counts when it
is not a directory; symlinked directories are not entered; directories that cannot be read are
skipped; hidden names (HIDDEN_PREFIXES) are never entered.
"""

from libc.errno cimport ENOENT, ENOTDIR, errno
from libc.stdint cimport int8_t, int64_t, uint64_t
from libc.string cimport memcpy, strcmp
from posix.stat cimport S_ISDIR, S_ISLNK, fstat, fstatat, struct_stat

from qdbpm.pm._batch cimport Arena, Checker, read_at, STATUS_MISSING, STATUS_SOLO

import os

import numpy as np

from ..errors import PmError

cdef extern from "fcntl.h" nogil:
    int c_openat "openat"(int dirfd, const char* path, int flags)
    int O_RDONLY, O_CLOEXEC, O_DIRECTORY, O_NOFOLLOW, AT_SYMLINK_NOFOLLOW, AT_FDCWD

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


cdef bint broken_link(int fd, const char* rel) noexcept:
    """`rel` below fd is a symlink whose target does not exist."""
    cdef struct_stat st
    return fstatat(fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 and S_ISLNK(st.st_mode) and fstatat(fd, rel, &st, 0) != 0


cdef class _Walk:
    cdef bint read, identities, hidden_dot, hidden_us, leaf_ok
    cdef uint64_t dev
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
        cdef int sub, status
        cdef int64_t at = 0, size = 0
        cdef list subdirs = []
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
            for sub_name in subdirs:
                n = len(<bytes>sub_name)
                if plen + n + 2 > PATH_MAX_BYTES:
                    raise PmError(f"partition path longer than {PATH_MAX_BYTES} bytes below the table root")
                if depth + 1 > MAX_DEPTH:
                    raise PmError(f"directories nested deeper than {MAX_DEPTH} levels below the table root")
                k = plen
                if plen:
                    self.path[plen] = b"/"
                    k += 1
                memcpy(&self.path[k], <const char*>(<bytes>sub_name), n)
                if self.leaf_ok and fstatat(fd, sub_name, &st, AT_SYMLINK_NOFOLLOW) == 0 and S_ISDIR(st.st_mode) \
                        and st.st_dev == self.dev and st.st_nlink == 2:
                    # No subdirectory (GNU find's leaf rule): not listed; its `_pm` opened directly.
                    self.found(fd, <bytes>sub_name + b"/" + self.pm_name, k + n, True)
                    continue
                sub = c_openat(fd, <bytes>sub_name, O_RDONLY | O_CLOEXEC | O_DIRECTORY | O_NOFOLLOW)
                if sub < 0:
                    continue  # vanished or unreadable: os.walk skips it too
                self.visit(sub, k + n, depth + 1)
        finally:
            closedir(d)  # closes fd
        return 0

    cdef int found(self, int fd, bytes rel, Py_ssize_t plen, bint unlisted) except -1:
        """The `_pm` at `rel` below fd names a partition (path[:plen]) unless, `unlisted` (its
        directory was not listed), it is missing or a directory."""
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
         int64_t budget=0, bint leaf=True, crc=None):
    """(names, idents, arena, at, size, status, checker) of the partitions below `root` (bytes): names as
    os.walk's relative paths ('/'-joined, unsorted); idents (size, mtime ns, inode) of each
    `_pm` when `identities`; with `read`, each `_pm`'s bytes read into `arena` as
    pm/_batch.read_files does (at, size, status: int64 / int64 / int8 arrays), else None for
    those four. `hidden`: the name prefixes never entered ('.' and/or '_'). leaf=False: list
    every directory (the leaf rule off, as on filesystems it does not hold on). crc: with `read`,
    check each file right after reading it (pm/_batch.Checker, CRC by `crc`; a file that fails
    becomes STATUS_SOLO) and return the Checker last, else None there."""
    cdef _Walk w = _Walk.__new__(_Walk)
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
