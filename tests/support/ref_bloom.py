"""Slow, obviously-correct references for XXH64 and the Parquet SBBF, to check the Cython kernels.

Straight transcriptions of the definitions: Python ints masked to 64/32 bits, bytes decoded with
int.from_bytes, one bit set per word with explicit index arithmetic. No speed tricks."""

import math
import struct

M64 = (1 << 64) - 1
M32 = (1 << 32) - 1

P1 = 0x9E3779B185EBCA87
P2 = 0xC2B2AE3D27D4EB4F
P3 = 0x165667B19E3779F9
P4 = 0x85EBCA77C2B2AE63
P5 = 0x27D4EB2F165667C5

SALT = (0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31)


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def u64(b, i):
    return int.from_bytes(b[i:i + 8], "little")


def u32(b, i):
    return int.from_bytes(b[i:i + 4], "little")


def xxh_round(acc, lane):
    acc = (acc + lane * P2) & M64
    acc = rotl(acc, 31)
    return (acc * P1) & M64


def xxh64(data: bytes, seed: int = 0) -> int:
    data = bytes(data)
    n = len(data)
    i = 0
    if n >= 32:
        acc = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed & M64, (seed - P1) & M64]
        while i + 32 <= n:
            for lane in range(4):
                acc[lane] = xxh_round(acc[lane], u64(data, i + 8 * lane))
            i += 32
        h = (rotl(acc[0], 1) + rotl(acc[1], 7) + rotl(acc[2], 12) + rotl(acc[3], 18)) & M64
        for a in acc:
            h ^= xxh_round(0, a)
            h = (h * P1 + P4) & M64
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h ^= xxh_round(0, u64(data, i))
        h = (rotl(h, 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h ^= (u32(data, i) * P1) & M64
        h = (rotl(h, 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M64
        h = (rotl(h, 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    h ^= h >> 32
    return h


def plain_bytes(value, physical: str) -> bytes:
    """Parquet PLAIN encoding of one value, without a length prefix."""
    if physical == "INT32":
        return struct.pack("<i", value)
    if physical == "INT64":
        return struct.pack("<q", value)
    if physical == "FLOAT":
        return struct.pack("<f", 0.0 if value == 0 else value)  # -0.0 hashes as +0.0
    if physical == "DOUBLE":
        return struct.pack("<d", 0.0 if value == 0 else value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)  # BYTE_ARRAY / FIXED_LEN_BYTE_ARRAY: the raw bytes


def _bit_positions(h: int, num_bytes: int):
    """(byte index, bit index) of the 8 bits hash h owns in a num_bytes bitset."""
    nblocks = num_bytes // 32
    block = ((h >> 32) * nblocks) >> 32
    key = h & M32
    out = []
    for i in range(8):
        bit = ((key * SALT[i]) & M32) >> 27
        word_start = block * 32 + 4 * i  # little-endian u32: bit b lives in byte b // 8
        out.append((word_start + bit // 8, bit % 8))
    return out


def insert(bitset: bytearray, h: int) -> None:
    for byte, bit in _bit_positions(h, len(bitset)):
        bitset[byte] |= 1 << bit


def check(bitset: bytes, h: int) -> bool:
    return all(bitset[byte] >> bit & 1 for byte, bit in _bit_positions(h, len(bitset)))


def is_insertable(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))
