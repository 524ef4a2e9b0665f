"""The Cython kernels that read untrusted bytes read nothing past their buffer, proven with a
guard page: each input ends on the last byte before a page mapped PROT_NONE, so a read one byte
too far is a segfault instead of a silent read of the allocator's next bytes (which the value
tests cannot see). Inputs: random RLE / bit-packed runs and byte-array runs for the page kernels
(qdbpm/parquet/_pages.pyx); Snappy and LZ4 blocks whole, cut short and mutated, their output
buffers guarded too (qdbpm/parquet/_snappy.pyx, qdbpm/parquet/_lz4.pyx), and ZSTD frames through
zstandard's libzstd (qdbpm/parquet/_zstd.pyx); a real Parquet footer, its page headers, its chunks and its
`_pm`, each cut short and mutated, for the Thrift parser (qdbpm/parquet/_thrift.pyx), the chunk walk
and its filter pass (qdbpm/parquet/_split.pyx) and the `_pm` checks (qdbpm/pm/_validate.pyx). Run in a child process,
so a fault fails this test, not the session."""

import subprocess
import sys

CHILD = r'''
import ctypes, mmap, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from qdbpm.errors import ParquetFormatError, PmError
from qdbpm.parquet import _lz4, _pages, _snappy, _split, _thrift, _zstd
from qdbpm.pm import _validate
from test_direct import random_runs

PAGE = mmap.PAGESIZE
ROOM = 64 * PAGE
area = mmap.mmap(-1, ROOM + PAGE)
base = ctypes.addressof(ctypes.c_char.from_buffer(area))
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
assert libc.mprotect(base + ROOM, PAGE, 0) == 0  # PROT_NONE: the byte after the buffer faults
whole = np.frombuffer(area, np.uint8, count=ROOM)


def guarded(data):
    """`data` as a view whose last byte is the last one before the guard page."""
    assert 0 < len(data) <= ROOM
    view = whole[ROOM - len(data):]
    view[:] = np.frombuffer(bytes(data), np.uint8)
    return view


out_area = mmap.mmap(-1, ROOM + PAGE)
out_base = ctypes.addressof(ctypes.c_char.from_buffer(out_area))
assert libc.mprotect(out_base + ROOM, PAGE, 0) == 0
out_whole = np.frombuffer(out_area, np.uint8, count=ROOM)


def guarded_out(n):
    """A writable view of n bytes whose last byte is the last one before a guard page: a write
    one byte too far faults."""
    assert 0 <= n <= ROOM
    return out_whole[ROOM - n:]


def ones_out(n):
    out = guarded_out(n)
    out[:] = 1
    return out


def survives(fn):
    try:
        fn()
    except (PmError, ParquetFormatError, ValueError, OverflowError, MemoryError, UnicodeDecodeError):
        pass  # an error is this test's pass too: only a fault fails it


def calls(buf, bw, count, rng):
    yield lambda: _pages.rle_hybrid(buf, 0, len(buf), bw, count, np.empty(count, np.int32), 1 << 33)
    yield lambda: _pages.rle_all(buf, 0, len(buf), bw, count, (1 << bw) - 1)
    yield lambda: _pages.rle_lookup_and(buf, 0, len(buf), bw, count, np.ones(1 << min(bw, 12), np.uint8),
                                        ones_out(count), 1 << min(bw, 12))  # its 8-byte stores guarded too
    picks = np.sort(rng.choice(count, min(count, 40), replace=False)).astype(np.int64)
    yield lambda: _pages.rle_pick(buf, 0, len(buf), bw, count, picks, np.empty(len(picks), np.int32), 1 << 33)
    yield lambda: _pages.byte_array_index(buf, 0, len(buf), count, np.empty(count, np.int64),
                                          np.empty(count, np.int32))


rng = np.random.default_rng(7)
runs = 0
for case in range(400):
    bw = [0, 1, 3, 8, 13, 32][case % 6]
    raw, made = random_runs(rng, bw, int(rng.integers(1, 300)))
    raw = raw.tobytes()
    for cut in {len(raw), int(rng.integers(0, len(raw) + 1))}:  # whole, and truncated at random
        data = raw[:cut]
        if not 0 < len(data) <= PAGE:
            continue
        buf = guarded(data)
        for count in {made, int(rng.integers(1, made + 1))}:  # all values, or a run cut by the count
            for call in calls(buf, bw, count, rng):
                survives(call)
                runs += 1

# a real file: its footer, page headers and _pm, whole, cut short and mutated
import os
import pyarrow as pa, pyarrow.parquet as pq
import qdbpm
path = os.path.join(sys.argv[2], "data.parquet")
n = 4000
t = pa.table({"i": pa.array(rng.integers(-1000, 1000, n)), "s": pa.array([f"v{x}" for x in rng.integers(0, 50, n)]),
              "f": pa.array(rng.normal(0, 1, n)), "d": pa.array(rng.integers(0, 10 ** 6, n), pa.int32()).cast(pa.date32())})
pq.write_table(t, path, row_group_size=500, compression="snappy")
qdbpm.generate(path)
raw = open(path, "rb").read()
flen = int.from_bytes(raw[-8:-4], "little")
footer = raw[-8 - flen:-8]
md = pq.ParquetFile(path).metadata
headers = [raw[md.row_group(r).column(c).data_page_offset:][:80] for r in range(md.num_row_groups) for c in range(4)]
pm = open(os.path.join(sys.argv[2], "_pm"), "rb").read()


def variants(b, k):
    yield b
    for _ in range(k):
        cut = bytearray(b[:int(rng.integers(1, len(b) + 1))])
        for _ in range(int(rng.integers(0, 4))):
            cut[int(rng.integers(0, len(cut)))] = int(rng.integers(0, 256))
        yield bytes(cut)


# Snappy blocks, whole, cut short and mutated: input and output each end at a guard page
import pyarrow as pa
codec = pa.Codec("snappy")
for case in range(300):
    n = int(rng.integers(1, 8 * PAGE))
    data = [rng.integers(0, 256, n, dtype=np.uint8), np.zeros(n, np.uint8),
            np.tile(rng.integers(0, 256, 3, dtype=np.uint8), n)[:n],
            (np.arange(n, dtype=np.int64) * int(rng.integers(1, 999))).view(np.uint8)[:n]][case % 4]
    block = codec.compress(np.ascontiguousarray(data), asbytes=True)
    _, head = _snappy.decoded_length(np.frombuffer(block, np.uint8))
    short = max(0, n - int(rng.integers(1, 40)))  # a preamble that claims less than the elements write
    lie = bytes([(short & 0x7F) | 0x80, (short >> 7) & 0x7F | 0x80, short >> 14]) + block[head:]
    for b in list(variants(block, 3)) + [lie]:
        try:
            said = _snappy.decoded_length(np.frombuffer(b, np.uint8))[0]
        except ParquetFormatError:
            said = n
        for size in {n, said if 0 <= said <= ROOM else n, int(rng.integers(0, n + 1))}:
            for want in (-1, int(rng.integers(0, size + 1))):  # all of it, and a prefix
                survives(lambda: _snappy.decode(guarded(b), guarded_out(size), want))
                runs += 1

def blocks(codec, decode, cases):
    """Blocks of pyarrow's `codec`, whole, cut short and mutated, decoded by `decode(src, out)`
    into pages of their size, smaller and larger: input and output each end at a guard page."""
    global runs
    arrow = pa.Codec(codec)
    for case in range(cases):
        n = int(rng.integers(1, 8 * PAGE))
        data = [rng.integers(0, 256, n, dtype=np.uint8), np.zeros(n, np.uint8),
                np.tile(rng.integers(0, 256, int(rng.integers(1, 20)), dtype=np.uint8), n)[:n],
                (np.arange(n, dtype=np.int64) * int(rng.integers(1, 999))).view(np.uint8)[:n]][case % 4]
        block = arrow.compress(np.ascontiguousarray(data), asbytes=True)
        for b in variants(block, 3):
            for size in {n, int(rng.integers(0, n + 1)), min(ROOM, n + int(rng.integers(1, 64)))}:
                survives(lambda: decode(guarded(b), guarded_out(size)))
                runs += 1


blocks("lz4_raw", _lz4.decode, 300)  # QuestDB's codec
blocks("zstd", _zstd.decode, 200)  # zstandard's libzstd, through _zstd

for b in variants(footer, 300):
    survives(lambda: _thrift.parse_file_metadata(guarded(b), len(raw) - 8 - flen))
    survives(lambda: _thrift.scan_struct(guarded(b), 0))
    runs += 2
for h in headers:
    for b in variants(h, 40):
        survives(lambda: _thrift.page_header(guarded(b), 0))
        runs += 1
# whole chunks for the chunk walk (_split): headers and Snappy pages read, decoded bytes written
for r in range(md.num_row_groups):
    for c in range(4):
        col = md.row_group(r).column(c)
        start = col.dictionary_page_offset or col.data_page_offset
        chunk = raw[start:start + col.total_compressed_size]
        for b in variants(chunk, 20):
            if len(b) <= ROOM:
                survives(lambda: _split.split_table(guarded(b), col.num_values, 1))
                runs += 1
        if c in (0, 3):  # the filter pass over a split chunk (lookup_split_c) with a memo of every value
            known = np.arange(-1000, 1000) if c == 0 else np.arange(0, 10 ** 6, dtype=np.int32)
            answers = rng.integers(0, 2, len(known)).astype(np.uint8)
            for b in variants(chunk, 20):
                if len(b) <= ROOM:
                    survives(lambda: _split.lookup_table(guarded(b), col.num_values, 1, 2 if c == 0 else 1, 1, known,
                                                         answers))
                    runs += 1
def chunk_walks(compression, codec):
    """The chunk walk (_split) over the chunks of `t` written with `compression`, every other row
    group's, each whole, cut short and mutated."""
    global runs
    p = os.path.join(sys.argv[2], f"{compression}.parquet")
    pq.write_table(t, p, row_group_size=500, compression=compression, data_page_size=1500)
    data, meta = open(p, "rb").read(), pq.ParquetFile(p).metadata
    for r in range(0, meta.num_row_groups, 2):
        for c in range(4):
            col = meta.row_group(r).column(c)
            start = col.dictionary_page_offset or col.data_page_offset
            for b in variants(data[start:start + col.total_compressed_size], 20):
                if len(b) <= ROOM:
                    survives(lambda: _split.split_table(guarded(b), col.num_values, codec))
                    runs += 1


chunk_walks("lz4", 7)  # pyarrow's "lz4" is Parquet's LZ4_RAW
chunk_walks("zstd", 6)
for b in variants(pm, 300):
    survives(lambda: _validate.check_open(guarded(b)))
    survives(lambda: _validate.check_open(guarded(b), len(raw)))
    runs += 2
print("ok", runs)
'''


def test_no_kernel_reads_past_its_buffer(tmp_path):
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(repo, "tests", "table"), os.path.join(repo, "tests"),
                                                       repo]))
    got = subprocess.run([sys.executable, "-c", CHILD, repo, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=600)
    assert got.returncode == 0, f"child ended {got.returncode} (-11: a read past the buffer)\n{got.stderr[-2000:]}"
    assert got.stdout.startswith("ok ") and int(got.stdout.split()[1]) > 2000
