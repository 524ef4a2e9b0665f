"""RLE / bit-packed hybrid streams for the page kernels' tests: a slow, obviously correct decoder
(the Parquet spec's words, one bit at a time), a ULEB128 writer and random streams of runs."""

import numpy as np


def rle_reference(buf, pos, end, bit_width, count):
    """The RLE / bit-packed hybrid as the Parquet spec words it, one bit at a time."""
    out = []
    width = (bit_width + 7) // 8
    while len(out) < count:
        header, shift = 0, 0
        while True:
            b = int(buf[pos])
            pos += 1
            header |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        if header & 1:
            n = (header >> 1) * 8
            bits = int.from_bytes(bytes(buf[pos:pos + (header >> 1) * bit_width]), "little")
            for i in range(n):
                out.append((bits >> (i * bit_width)) & ((1 << bit_width) - 1))
            pos += (header >> 1) * bit_width
        else:
            v = int.from_bytes(bytes(buf[pos:pos + width]), "little")
            pos += width
            out += [v] * (header >> 1)
    return out[:count]


def uleb(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def random_runs(rng, bit_width, count):
    buf = bytearray()
    made = 0
    while made < count:
        if rng.random() < 0.5:
            n = int(rng.integers(1, 300))
            v = int(rng.integers(0, 1 << bit_width)) if bit_width else 0
            buf += uleb(n << 1) + v.to_bytes((bit_width + 7) // 8, "little")
            made += n
        else:
            groups = int(rng.integers(1, 20))
            vals = [int(rng.integers(0, 1 << bit_width)) if bit_width else 0 for _ in range(groups * 8)]
            bits = sum(v << (i * bit_width) for i, v in enumerate(vals))
            buf += uleb(groups << 1 | 1) + bits.to_bytes(groups * bit_width, "little")
            made += groups * 8
    return np.frombuffer(bytes(buf), np.uint8), made
