# Parquet split-block bloom filter (SBBF) primitives as inline nogil functions, for _sbbf's batch
# kernels and for _prune. A bitset is nblocks * 32 bytes: blocks of 8 little-endian u32 words.
# Callers guarantee 1 <= nblocks < 2**32 and that bitset holds nblocks * 32 bytes.

from libc.stdint cimport uint8_t, uint32_t, uint64_t
from qdbpm.bloom._xxhash cimport load_le32, store_le32

cdef extern from *:
    """
    #ifndef QDBPM_SBBF_SALT_DEFINED
    #define QDBPM_SBBF_SALT_DEFINED
    #include <stdint.h>
    /* The eight odd salts of the Parquet SBBF: word i of a block gets bit (key * salt[i]) >> 27. */
    static const uint32_t qdbpm_sbbf_salt[8] = {
        0x47b6137bU, 0x44974d91U, 0x8824ad5bU, 0xa2b7289dU,
        0x705495c7U, 0x2df1424bU, 0x9efc4947U, 0x5c6bfb31U};
    #endif
    """
    const uint32_t* SBBF_SALT "qdbpm_sbbf_salt"


cdef inline uint64_t sbbf_block_offset(uint64_t h, uint64_t nblocks) noexcept nogil:
    # Block index from the high 32 bits by multiply-shift (no modulo bias, any block count).
    return (((h >> 32) * nblocks) >> 32) * 32


cdef inline void sbbf_insert(uint8_t* bitset, uint64_t nblocks, uint64_t h) noexcept nogil:
    cdef uint8_t* block = bitset + sbbf_block_offset(h, nblocks)
    cdef uint32_t key = <uint32_t>h
    cdef int i
    for i in range(8):
        store_le32(block + 4 * i,
                   load_le32(block + 4 * i) | ((<uint32_t>1) << ((key * SBBF_SALT[i]) >> 27)))


cdef inline bint sbbf_check(const uint8_t* bitset, uint64_t nblocks, uint64_t h) noexcept nogil:
    # Branch-free: OR together the wanted bits that are missing; absent values mispredict less.
    cdef const uint8_t* block = bitset + sbbf_block_offset(h, nblocks)
    cdef uint32_t key = <uint32_t>h
    cdef uint32_t missing = 0
    cdef int i
    for i in range(8):
        missing |= ~load_le32(block + 4 * i) & ((<uint32_t>1) << ((key * SBBF_SALT[i]) >> 27))
    return missing == 0
