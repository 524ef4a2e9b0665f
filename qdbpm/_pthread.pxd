# cython: language_level=3
"""The POSIX thread calls the GIL-free kernels share (`parquet/_split.pyx`'s buffer cache,
`table/_offload.pyx`'s job queue): Cython ships no pthread.pxd."""


cdef extern from "pthread.h" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, void*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)
    int pthread_cond_init(pthread_cond_t*, void*)
    int pthread_cond_wait(pthread_cond_t*, pthread_mutex_t*)
    int pthread_cond_broadcast(pthread_cond_t*)
    int pthread_cond_signal(pthread_cond_t*)
