# Declarations other kernels cimport (pm/_batch.pyx opens many files with the same checks).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t


cdef class Plan:
    # footer chain: the pinned snapshot
    cdef readonly uint64_t snapshot_size, footer_start, footer_length, crc_offset, stored_crc
    cdef readonly uint64_t parquet_footer_offset, parquet_footer_length, row_group_count, unused_bytes
    cdef readonly uint64_t prev_pm_size, footer_feature_flags
    # header
    cdef readonly uint64_t feature_flags, column_count, sorting_column_count, header_end
    cdef readonly int32_t designated_timestamp
    cdef readonly uint64_t bloom_columns_at, bloom_column_count
    cdef readonly object squash_tracker, names, sorting_columns
    # footer sections (-1: absent) and blocks
    cdef readonly int64_t bloom_table_at, scratchpad_at
    cdef readonly object seq_txn, block_offsets
    cdef readonly int64_t block_step  # blocks evenly this far apart (> 0), or 0


cdef object plan_of(const uint8_t* p, uint64_t n, object parquet_size, bint names=*)
cdef bint names_ok(const uint8_t* p, uint64_t n, object plan)
