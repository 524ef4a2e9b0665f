# cython: language_level=3
"""Kernel: ZSTD pages decoded without the GIL, through the libzstd of the `zstandard` package.

ZSTD's format fixes what a valid frame decodes to, but not what a corrupt one (without a checksum)
does: libzstd 1.5.4 and 1.5.7 turned the same mutated DuckDB page into bytes differing in two
places, both without an error. So the decoder here must be the one the Python walk uses
(`codecs`: zstandard's for small pages; Arrow's, the same version today, for the rest), never just
any libzstd. pyarrow's copy is linked in and not exported; zstandard's CFFI extension exports its
copy's functions. This loads that file with dlopen (or, failing that, a system libzstd of exactly
the same version) and takes five functions; where neither is there, `zstd_ready()` is false and
ZSTD chunks stay with the Python walk, as before.

A page decodes with `ZSTD_decompressDCtx` into exactly its size: the library checks every frame
against both buffers (it is fuzzed for that), and a page whose frames do not fill its size
exactly, or want more room, is an error here, left to the Python walk to name. Decoding
contexts are kept in a small free list (a thread takes one, gives it back), so a page costs no
allocation and no thread keeps one past its call.
"""

from libc.stdint cimport uint8_t

import os

import zstandard

from .._dl cimport RTLD_LOCAL, RTLD_NOW, dlclose, dlopen, dlsym, module_file
from .._pthread cimport pthread_mutex_init, pthread_mutex_lock, pthread_mutex_t, pthread_mutex_unlock

ctypedef void* (*create_t)() noexcept nogil
ctypedef size_t (*free_t)(void* dctx) noexcept nogil
ctypedef size_t (*decompress_t)(void* dctx, void* dst, size_t cap, const void* src, size_t n) noexcept nogil
ctypedef unsigned (*is_error_t)(size_t code) noexcept nogil
ctypedef unsigned (*version_t)() noexcept nogil

cdef create_t _create = NULL
cdef free_t _free = NULL
cdef decompress_t _decompress = NULL
cdef is_error_t _is_error = NULL
cdef unsigned _version = 0
cdef bint _ready = False

SYSTEM_NAMES = (b"libzstd.so.1", b"libzstd.so", b"libzstd.1.dylib", b"libzstd.dylib")
# The version the Python walk decodes with (zstandard's; Arrow's codec is held to it by tests).
WANT = zstandard.ZSTD_VERSION[0] * 10000 + zstandard.ZSTD_VERSION[1] * 100 + zstandard.ZSTD_VERSION[2]

cdef enum:
    KEPT = 8  # decoding contexts kept for reuse (about 100 KB each)
cdef pthread_mutex_t _mu
cdef void* _kept[KEPT]
cdef int _nkept = 0


def _candidates():
    """zstandard's CFFI extension (found, not imported), then the system's names."""
    own = module_file("zstandard._cffi")
    return ([] if own is None else [own]) + list(SYSTEM_NAMES)


def _load(candidates, unsigned want):
    """The first of `candidates` that loads, has the five functions and is version `want`: its
    name, its functions then the decoder's; None when none is (the decoder is left as it was)."""
    global _create, _free, _decompress, _is_error, _version, _ready
    cdef void* h
    cdef version_t version
    cdef create_t create
    cdef free_t free_
    cdef decompress_t decompress
    cdef is_error_t is_error
    for name in candidates:
        h = dlopen(<const char*>name, RTLD_NOW | RTLD_LOCAL)
        if h == NULL:
            continue
        version = <version_t>dlsym(h, b"ZSTD_versionNumber")
        create = <create_t>dlsym(h, b"ZSTD_createDCtx")
        free_ = <free_t>dlsym(h, b"ZSTD_freeDCtx")
        decompress = <decompress_t>dlsym(h, b"ZSTD_decompressDCtx")
        is_error = <is_error_t>dlsym(h, b"ZSTD_isError")
        if (version == NULL or create == NULL or free_ == NULL or decompress == NULL or is_error == NULL
                or version() != want):
            dlclose(h)
            continue
        _create, _free, _decompress, _is_error = create, free_, decompress, is_error
        _version, _ready = want, True
        return name
    return None


def reset():
    """The free list's lock made anew (at import, and in a forked child: a parent's thread may
    have held it as it forked)."""
    pthread_mutex_init(&_mu, NULL)


reset()
os.register_at_fork(after_in_child=reset)
LOADED = _load(_candidates(), WANT)  # the file the decoder came from, None when there is none


def available() -> bool:
    """Whether the decoder was found (ZSTD pages then decode on the worker)."""
    return bool(_ready)


def version() -> int:
    """The loaded libzstd's version number (10504 for 1.5.4), 0 when none."""
    return _version


cdef bint zstd_ready() noexcept nogil:
    return _ready


cdef void* _take() noexcept nogil:
    global _nkept
    cdef void* ctx = NULL
    pthread_mutex_lock(&_mu)
    if _nkept:
        _nkept -= 1
        ctx = _kept[_nkept]
    pthread_mutex_unlock(&_mu)
    return ctx if ctx != NULL else _create()


cdef void _give(void* ctx) noexcept nogil:
    global _nkept
    pthread_mutex_lock(&_mu)
    if _nkept < KEPT:
        _kept[_nkept] = ctx
        _nkept += 1
        ctx = NULL
    pthread_mutex_unlock(&_mu)
    if ctx != NULL:
        _free(ctx)


cdef int zstd_page(const uint8_t* src, Py_ssize_t n, uint8_t* dst, Py_ssize_t size) noexcept nogil:
    """The ZSTD frames src[:n] decoded into dst[:size]: 0 when they fill exactly `size` bytes,
    1 otherwise (no library, malformed, shorter or longer: the Python walk decides)."""
    cdef void* ctx
    cdef size_t got
    if not _ready or n <= 0 or size < 0:
        return 1
    ctx = _take()
    if ctx == NULL:
        return 1
    got = _decompress(ctx, dst, <size_t>size, src, <size_t>n)
    _give(ctx)  # a context is reset by its next frame, whatever this one did
    return 1 if _is_error(got) or got != <size_t>size else 0


def decode(const uint8_t[::1] src, uint8_t[::1] out):
    """`zstd_page` of `src` into all of `out` with the GIL released (a test hook): whether the
    frames filled it exactly (False: declined; `out` then holds whatever was written)."""
    cdef uint8_t* dst = &out[0] if out.shape[0] else NULL
    cdef const uint8_t* s = &src[0] if src.shape[0] else NULL
    cdef Py_ssize_t n = src.shape[0], size = out.shape[0]
    cdef int code
    with nogil:
        code = zstd_page(s, n, dst, size)
    return code == 0
