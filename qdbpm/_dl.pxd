# cython: language_level=3
"""Loading a C function from another package's extension module (`parquet/_zstd.pyx` takes
libzstd's from zstandard's, `pm/_crc.pyx` ISA-L's CRC from isal's): the dlfcn calls, and where
that module's file is."""


cdef extern from "dlfcn.h" nogil:
    void* dlopen(const char* filename, int flags)
    void* dlsym(void* handle, const char* symbol)
    int dlclose(void* handle)
    int RTLD_NOW
    int RTLD_LOCAL


cdef inline object module_file(str name):
    """The file of module `name` (found, not imported), fsencoded for dlopen; None when there is
    no such file."""
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return os.fsencode(spec.origin) if spec is not None and spec.origin else None
