"""The Snappy kernel (qdbpm/parquet/_snappy.pyx) against a slow reference decoder written from the
format description, and against Arrow's compressor: every element kind, overlapping copies,
prefixes, and malformed blocks (the kernel refuses exactly what the reference refuses)."""

import numpy as np
import pyarrow as pa
import pytest

from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import _snappy

CODEC = pa.Codec("snappy")


def reference(block: bytes) -> bytes:
    """Snappy's raw format (google/snappy format_description.txt), one element at a time.
    ValueError for anything malformed."""
    length, shift, i = 0, 0, 0
    while True:
        if i >= len(block) or i >= 5:
            raise ValueError("preamble")
        length |= (block[i] & 0x7F) << shift
        shift += 7
        i += 1
        if not block[i - 1] & 0x80:
            break
    out = elements(block, i)
    if len(out) != length:
        raise ValueError("length")
    return out


def elements(block: bytes, i: int) -> bytes:
    """The output of the elements from block[i:]."""
    out = bytearray()
    while i < len(block):
        tag = block[i]
        kind = tag & 3
        if kind == 0:
            n = (tag >> 2) + 1
            i += 1
            if n > 60:
                extra = n - 60
                if i + extra > len(block):
                    raise ValueError("literal length cut short")
                n = int.from_bytes(block[i:i + extra], "little") + 1
                i += extra
            if i + n > len(block):
                raise ValueError("literal past the input")
            out += block[i:i + n]
            i += n
            continue
        size = {1: 2, 2: 3, 3: 5}[kind]
        if i + size > len(block):
            raise ValueError("copy cut short")
        if kind == 1:
            n, offset = 4 + ((tag >> 2) & 7), ((tag >> 5) << 8) | block[i + 1]
        else:
            n, offset = (tag >> 2) + 1, int.from_bytes(block[i + 1:i + size], "little")
        i += size
        if offset == 0 or offset > len(out):
            raise ValueError("offset")
        for _ in range(n):
            out.append(out[-offset])
    return bytes(out)


def kernel(block: bytes, size=None, want=-1):
    src = np.frombuffer(block, np.uint8)
    if size is None:
        size, _ = _snappy.decoded_length(src)
    dst = np.full(size, 0xAA, np.uint8)
    got = _snappy.decode(src, dst, want)
    return bytes(dst[:got])


def shapes(rng, n):
    yield rng.integers(0, 256, n, dtype=np.uint8)  # incompressible: long literals
    yield np.zeros(n, np.uint8)  # one byte repeated: offset-1 copies
    period = rng.integers(1, 9, dtype=np.uint8)
    yield np.tile(rng.integers(0, 256, int(period), dtype=np.uint8), n // int(period) + 1)[:n]  # offsets < 8
    yield rng.integers(0, 4, n, dtype=np.uint8)
    yield (np.arange(n // 8 + 1, dtype=np.int64) * int(rng.integers(1, 999))).view(np.uint8)[:n]  # TPC-H-like int64s
    words = [b"quick", b"brown", b"fox", b"jumps", b"over", b"the", b"lazy", b"dog", b" ", b"furiously"]
    yield np.frombuffer(b"".join(words[k] for k in rng.integers(0, len(words), n // 3 + 1))[:n], np.uint8)


def test_kernel_equals_data_and_reference_over_arrow_blocks():
    rng = np.random.default_rng(11)
    cases = 0
    for n in [0, 1, 7, 15, 16, 17, 63, 64, 65, 1000, 4096, 65535, 65536, 65537, 200_000]:
        for data in shapes(rng, n):
            data = np.ascontiguousarray(data).tobytes()
            block = CODEC.compress(data, asbytes=True)
            assert kernel(block) == data == reference(block)
            cases += 1
    assert cases == 15 * 6


def test_prefix_stops_once_enough_is_out_and_agrees_with_the_whole():
    rng = np.random.default_rng(12)
    for n in [1, 100, 5000, 70_000]:
        for data in shapes(rng, n):
            data = np.ascontiguousarray(data).tobytes()
            block = CODEC.compress(data, asbytes=True)
            for want in {0, 1, n // 3, n // 2, n - 1, n} | {int(w) for w in rng.integers(0, n + 1, 5)}:
                got = kernel(block, want=want)
                assert len(got) >= want and got == data[:len(got)]


def test_prefix_saves_the_rest():
    data = np.random.default_rng(1).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
    got = kernel(CODEC.compress(data, asbytes=True), want=1000)
    assert 1000 <= len(got) < 100_000  # one long literal at most past the prefix, not the megabyte


def literal(b: bytes) -> bytes:
    n = len(b) - 1
    if n < 60:
        return bytes([n << 2]) + b
    k = (n.bit_length() + 7) // 8
    return bytes([(59 + k) << 2]) + n.to_bytes(k, "little") + b


def preamble(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not out[-1] & 0x80:
            return bytes(out)


def copy1(n, off):
    return bytes([1 | ((n - 4) << 2) | ((off >> 8) << 5), off & 0xFF])


def copy2(n, off):
    return bytes([2 | ((n - 1) << 2)]) + off.to_bytes(2, "little")


def copy4(n, off):
    return bytes([3 | ((n - 1) << 2)]) + off.to_bytes(4, "little")


@pytest.mark.parametrize("body", [
    literal(b"x" * 61) + copy1(11, 61),  # 1-byte literal length; copy-1 at its widest
    literal(bytes(range(256)) * 2) + copy2(64, 512),  # 2-byte literal length; copy-2 at its longest
    literal(b"abc") + copy2(64, 1) + copy2(64, 2) + copy2(33, 3),  # overlapping: patterns of 1-3
    literal(b"abcdefg") + copy4(64, 7) + copy1(4, 5),  # copy-4; offset 7 < 8
    literal(bytes(70_000)) + copy4(50, 70_000),  # 3-byte literal length; a 4-byte offset past 64 KiB
    literal(b"0123456789abcdef") + copy1(8, 16) + copy1(11, 9) + copy2(9, 8),  # copies that end the output
])
def test_every_element_kind(body):
    out = elements(body, 0)  # what the elements decode to, whatever a preamble says
    block = preamble(len(out)) + body
    assert kernel(block) == reference(block) == out


MALFORMED = {
    "preamble cut": b"\x80",
    "preamble over 5 bytes": b"\x80\x80\x80\x80\x80\x01",
    "literal past input": preamble(10) + bytes([9 << 2]) + b"abc",
    "literal length cut": preamble(100) + bytes([62 << 2]) + b"\x01",
    "copy before start": preamble(8) + literal(b"ab") + copy1(6, 3),
    "offset zero": preamble(8) + literal(b"ab") + copy2(6, 0),
    "copy cut short": preamble(8) + literal(b"ab") + b"\x02\x01",
    "output over": preamble(4) + literal(b"ab") + copy1(4, 2),
    "input ends early": preamble(10) + literal(b"ab"),
    "bytes after the end": preamble(2) + literal(b"ab") + literal(b"c"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_blocks_raise_naming_snappy(name):
    block = MALFORMED[name]
    with pytest.raises(ValueError):
        reference(block)
    src = np.frombuffer(block, np.uint8)
    try:
        size, _ = _snappy.decoded_length(src)
    except ParquetFormatError as e:
        assert "snappy" in str(e)
        return
    with pytest.raises(ParquetFormatError, match="snappy"):
        _snappy.decode(src, np.empty(size, np.uint8))


def test_length_other_than_the_pages_is_refused():
    block = CODEC.compress(b"hello world", asbytes=True)
    with pytest.raises(ParquetFormatError, match="decodes to 11 bytes, its page says 12"):
        _snappy.decode(np.frombuffer(block, np.uint8), np.empty(12, np.uint8))


def test_mutated_blocks_fail_exactly_where_the_reference_fails():
    rng = np.random.default_rng(13)
    refused = 0
    for case in range(600):
        data = np.ascontiguousarray(list(shapes(rng, int(rng.integers(1, 3000))))[case % 6]).tobytes()
        block = bytearray(CODEC.compress(data, asbytes=True))
        for _ in range(int(rng.integers(1, 4))):
            block[int(rng.integers(0, len(block)))] = int(rng.integers(0, 256))
        block = bytes(block[:int(rng.integers(1, len(block) + 1))])
        try:
            want = reference(block)
        except ValueError:
            want = None
        try:
            got = kernel(block)
        except ParquetFormatError:
            got = None
        assert got == want, case
        refused += want is None
    assert 100 < refused < 600  # both outcomes were exercised


def test_block_fills_on_from_where_it_stopped():
    rng = np.random.default_rng(14)
    for data in shapes(rng, 50_000):
        data = np.ascontiguousarray(data).tobytes()
        src = np.frombuffer(CODEC.compress(data, asbytes=True), np.uint8)
        dst = np.empty(len(data), np.uint8)
        block, op = _snappy.Block(src, dst), 0
        for want in sorted(int(w) for w in rng.integers(0, len(data), 6)) + [len(data) + 5, -1]:
            got = block.fill(want)
            assert got >= min(max(want, op), len(data)) and got == block.op
            assert dst[:got].tobytes() == data[:got]  # the earlier prefix is intact, the new one right
            op = got
        assert op == len(data)


@pytest.mark.parametrize("seed", range(12))
def test_random_element_streams_equal_the_reference(seed):
    """Element streams built one element at a time (the kernel's fast loop takes literals and
    copies of at most 16 bytes from at least 8 back, and leaves everything else to its checked
    code): short and long literals, copies of every width from 1 to past the output written
    (refused), in any order; whole, cut short and decoded as prefixes."""
    rng = np.random.default_rng(4200 + seed)
    for case in range(40):
        body, out = bytearray(), 0
        for _ in range(int(rng.integers(1, 400))):
            kind = int(rng.integers(0, 5))
            if kind == 0 or out == 0:
                n = int(rng.choice([1, 2, 3, 15, 16, 17, 60, 61, 70]))
                body += literal(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
                out += n
                continue
            bad = rng.random() < 0.01  # a copy from before the output's start
            off = out + 1 if bad else int(rng.choice([1, 3, 7, 8, 9, 15, 16, 17, 40, out]).clip(1, out))
            if kind == 1 and off < 2048:
                n = int(rng.integers(4, 12))
                body += copy1(n, off)
            elif kind == 4:
                n = int(rng.integers(1, 65))
                body += copy4(n, off)
            else:
                n = int(rng.integers(1, 65))
                body += copy2(n, min(off, 65535))
            out += n
        try:
            want = elements(bytes(body), 0)
        except ValueError:
            want = None
        block = preamble(len(want) if want is not None else out) + bytes(body)
        try:
            got = kernel(block)
        except ParquetFormatError:
            got = None
        assert got == want, (seed, case)
        if want is not None:
            cut = block[:int(rng.integers(1, len(block)))]
            try:
                reference(cut)
                assert False, "a cut block decodes"  # never: the preamble says more
            except ValueError:
                pass
            with pytest.raises(ParquetFormatError):
                kernel(cut, size=len(want))
            w = int(rng.integers(0, len(want) + 1))
            got = kernel(block, want=w)
            assert len(got) >= w and got == want[:len(got)]


@pytest.mark.parametrize("nogil_bytes", [0, 1 << 40])
def test_with_or_without_the_gil_released_the_kernel_decodes_and_refuses_alike(monkeypatch, nogil_bytes):
    """A fill of fewer than NOGIL_BYTES keeps the GIL (handing it to another thread costs more
    than decoding a small page); the decoded bytes and the refusals are the same either way."""
    monkeypatch.setattr(_snappy, "NOGIL_BYTES", nogil_bytes)
    rng = np.random.default_rng(15)
    for n in [1, 4096, 65535, 65536, 65537, 200_000]:
        for data in shapes(rng, n):
            data = np.ascontiguousarray(data).tobytes()
            block = CODEC.compress(data, asbytes=True)
            assert kernel(block) == data
            src, dst = np.frombuffer(block, np.uint8), np.empty(len(data), np.uint8)
            b = _snappy.Block(src, dst)
            assert b.fill(n // 2) >= n // 2 and b.fill() == len(data) and dst.tobytes() == data
            cut = block[:len(block) // 2]
            with pytest.raises(ParquetFormatError, match="snappy"):
                kernel(cut) if len(cut) else _snappy.decode(np.frombuffer(b"\x05", np.uint8), np.empty(5, np.uint8))
