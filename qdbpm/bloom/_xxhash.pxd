# XXH64 (seed 0) as inline nogil functions, so _sbbf and _prune can cimport them and hash
# without a Python call per value. Written from the XXH64 specification (xxhash_spec.md).

from libc.stdint cimport uint8_t, uint32_t, uint64_t

cdef extern from *:
    """
    #ifndef QDBPM_XXHASH_HELPERS
    #define QDBPM_XXHASH_HELPERS
    #include <stdint.h>
    #include <string.h>
    /* The five XXH64 primes. */
    #define QDBPM_XXH_P1 UINT64_C(0x9E3779B185EBCA87)
    #define QDBPM_XXH_P2 UINT64_C(0xC2B2AE3D27D4EB4F)
    #define QDBPM_XXH_P3 UINT64_C(0x165667B19E3779F9)
    #define QDBPM_XXH_P4 UINT64_C(0x85EBCA77C2B2AE63)
    #define QDBPM_XXH_P5 UINT64_C(0x27D4EB2F165667C5)
    /* Little-endian loads/stores whatever the host order: XXH64 and the SBBF words are defined
       on LE bytes. memcpy compiles to one unaligned move on x86-64 and arm64. */
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #define QDBPM_BSWAP32(x) __builtin_bswap32(x)
    #define QDBPM_BSWAP64(x) __builtin_bswap64(x)
    #else
    #define QDBPM_BSWAP32(x) (x)
    #define QDBPM_BSWAP64(x) (x)
    #endif
    static inline uint64_t qdbpm_load_le64(const unsigned char *p) {
        uint64_t v; memcpy(&v, p, 8); return QDBPM_BSWAP64(v);
    }
    static inline uint32_t qdbpm_load_le32(const unsigned char *p) {
        uint32_t v; memcpy(&v, p, 4); return QDBPM_BSWAP32(v);
    }
    static inline void qdbpm_store_le32(unsigned char *p, uint32_t v) {
        v = QDBPM_BSWAP32(v); memcpy(p, &v, 4);
    }
    #endif
    """
    const uint64_t XXH_P1 "QDBPM_XXH_P1"
    const uint64_t XXH_P2 "QDBPM_XXH_P2"
    const uint64_t XXH_P3 "QDBPM_XXH_P3"
    const uint64_t XXH_P4 "QDBPM_XXH_P4"
    const uint64_t XXH_P5 "QDBPM_XXH_P5"
    uint64_t load_le64 "qdbpm_load_le64"(const unsigned char *p) noexcept nogil
    uint32_t load_le32 "qdbpm_load_le32"(const unsigned char *p) noexcept nogil
    void store_le32 "qdbpm_store_le32"(unsigned char *p, uint32_t v) noexcept nogil


cdef inline uint64_t _rotl64(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _xxh_round(uint64_t acc, uint64_t lane) noexcept nogil:
    acc = acc + lane * XXH_P2
    acc = _rotl64(acc, 31)
    return acc * XXH_P1


cdef inline uint64_t _xxh_merge(uint64_t h, uint64_t acc) noexcept nogil:
    h = h ^ _xxh_round(0, acc)
    return h * XXH_P1 + XXH_P4


cdef inline uint64_t _xxh_avalanche(uint64_t h) noexcept nogil:
    h = h ^ (h >> 33)
    h = h * XXH_P2
    h = h ^ (h >> 29)
    h = h * XXH_P3
    return h ^ (h >> 32)


cdef inline uint64_t xxh64(const unsigned char* p, size_t n) noexcept nogil:
    """XXH64 of n bytes at p, seed 0. p may be NULL when n == 0."""
    cdef const unsigned char* end = p + n
    cdef const unsigned char* limit
    cdef uint64_t h, v1, v2, v3, v4
    if n >= 32:
        # Four accumulators over 32-byte stripes (seed 0 folded into the initial values).
        v1 = XXH_P1 + XXH_P2
        v2 = XXH_P2
        v3 = 0
        v4 = 0 - XXH_P1
        limit = end - 32
        while p <= limit:
            v1 = _xxh_round(v1, load_le64(p))
            v2 = _xxh_round(v2, load_le64(p + 8))
            v3 = _xxh_round(v3, load_le64(p + 16))
            v4 = _xxh_round(v4, load_le64(p + 24))
            p += 32
        h = _rotl64(v1, 1) + _rotl64(v2, 7) + _rotl64(v3, 12) + _rotl64(v4, 18)
        h = _xxh_merge(h, v1)
        h = _xxh_merge(h, v2)
        h = _xxh_merge(h, v3)
        h = _xxh_merge(h, v4)
    else:
        h = XXH_P5
    h = h + <uint64_t>n
    # Tail: 8-byte lanes, then one 4-byte lane, then single bytes.
    while end - p >= 8:
        h = h ^ _xxh_round(0, load_le64(p))
        h = _rotl64(h, 27) * XXH_P1 + XXH_P4
        p += 8
    if end - p >= 4:
        h = h ^ (<uint64_t>load_le32(p) * XXH_P1)
        h = _rotl64(h, 23) * XXH_P2 + XXH_P3
        p += 4
    while p < end:
        h = h ^ (<uint64_t>p[0] * XXH_P5)
        h = _rotl64(h, 11) * XXH_P1
        p += 1
    return _xxh_avalanche(h)


cdef inline uint64_t xxh64_u32(uint32_t v) noexcept nogil:
    """XXH64 of the 4 little-endian bytes of v (INT32 / FLOAT PLAIN encoding)."""
    cdef uint64_t h = XXH_P5 + 4
    h = h ^ (<uint64_t>v * XXH_P1)
    h = _rotl64(h, 23) * XXH_P2 + XXH_P3
    return _xxh_avalanche(h)


cdef inline uint64_t xxh64_u64(uint64_t v) noexcept nogil:
    """XXH64 of the 8 little-endian bytes of v (INT64 / DOUBLE PLAIN encoding)."""
    cdef uint64_t h = XXH_P5 + 8
    h = h ^ _xxh_round(0, v)
    h = _rotl64(h, 27) * XXH_P1 + XXH_P4
    return _xxh_avalanche(h)
