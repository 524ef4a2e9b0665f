"""The one-call local read (`_pread.read_into`, wrapped by `ranges._read_local`) against its
reference, Python's own file reads: byte ranges anywhere in a file, past its end, and the
errors of a missing file, a directory, a FIFO and a name holding a NUL byte, as os.open /
os.preadv give them (then a StorageError naming the object, through the wrapper)."""

import errno
import os

import numpy as np
import pytest

from qdbpm.errors import StorageError
from qdbpm.table import _pread, ranges
from support.chunk_files import random_file


def _read(path, start, n):
    out = np.full(n, 0xEE, np.uint8)
    got = _pread.read_into(os.fsencode(path), start, out)
    return bytes(out[:got]), out[got:]


@pytest.mark.parametrize("seed", range(20))
def test_read_into_equals_the_file_bytes(tmp_path, seed):
    rng = np.random.default_rng(5200 + seed)
    path = tmp_path / "data.parquet"
    data = random_file(path, rng, 0, 300_000)
    for _ in range(10):
        start = int(rng.integers(0, len(data) + 10))
        n = int(rng.integers(0, 200_000))
        got, rest = _read(path, start, n)
        assert got == data[start:start + n]  # short at the end of the file, never more
        assert (rest == 0xEE).all()  # nothing written past what was read


def test_read_into_errors_as_os_gives_them(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        _read(tmp_path / "missing", 0, 10)
    assert e.value.errno == errno.ENOENT and str(tmp_path / "missing") in str(e.value)
    with pytest.raises(IsADirectoryError):
        _read(tmp_path, 0, 10)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as e:  # opened without blocking, then no seekable bytes: never a hang
        _read(fifo, 0, 10)
    assert e.value.errno == errno.ESPIPE
    with pytest.raises(ValueError, match="null byte"):
        _pread.read_into(b"a\0b", 0, np.empty(4, np.uint8))
    with pytest.raises(ValueError):
        _pread.read_into(os.fsencode(tmp_path / "missing"), -1, np.empty(4, np.uint8))
    (tmp_path / "empty").write_bytes(b"")
    assert _read(tmp_path / "empty", 0, 0)[0] == b"" and _read(tmp_path / "empty", 5, 8)[0] == b""


def test_read_local_names_the_object_and_range(tmp_path):
    from fsspec.implementations.local import LocalFileSystem

    path = tmp_path / "data.parquet"
    path.write_bytes(bytes(range(256)) * 40)
    fs = LocalFileSystem()
    assert bytes(ranges._read_local(fs, str(path), 100, 5000)) == (bytes(range(256)) * 40)[100:5000]
    with pytest.raises(StorageError, match=r"missing: cannot read bytes \[0, 10\)"):
        ranges._read_local(fs, str(tmp_path / "missing"), 0, 10)
