# What other kernels cimport of the worker (`_offload.pyx`): a C callback run as one of its jobs.

ctypedef void (*call_fn)(void* arg) noexcept nogil

cdef object call(call_fn fn, void* arg, object keep)
