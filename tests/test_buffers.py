"""qdbpm/buffers.py: a read's large arrays live in Arrow's pool, and reads of local ranges land
there too (table/ranges.py), with the same bytes and errors as before."""

import os

import numpy as np
import pyarrow as pa
import pytest

import qdbpm
from qdbpm import buffers
from qdbpm.table.ranges import Range, fetch_range
from fsspec.implementations.local import LocalFileSystem


def test_large_arrays_come_from_the_arrow_pool():
    before = pa.total_allocated_bytes()
    a = buffers.empty(1 << 17, np.int64)  # 1 MiB
    assert pa.total_allocated_bytes() - before >= a.nbytes
    assert a.flags.writeable and a.flags.c_contiguous and a.ctypes.data % 64 == 0
    a[:] = np.arange(len(a))  # writable through and through
    assert int(a[-1]) == len(a) - 1 and a.dtype == np.int64 and a.shape == (1 << 17,)
    del a
    assert pa.total_allocated_bytes() == before  # handed back when the array goes


def test_small_arrays_stay_with_numpy():
    before = pa.total_allocated_bytes()
    a = buffers.empty(100, np.int32)
    assert pa.total_allocated_bytes() == before and a.shape == (100,) and a.dtype == np.int32
    assert buffers.empty(0, np.uint8).shape == (0,)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64, np.uint8])
@pytest.mark.parametrize("n", [0, 7, 100_000])
def test_take_checked_equals_fancy_indexing(dtype, n):
    rng = np.random.default_rng(n)
    values = rng.integers(0, 100, 50).astype(dtype)
    for idx_type in (np.int32, np.int64):
        idx = rng.integers(0, len(values), n).astype(idx_type)
        got = buffers.take_checked(values, idx)
        assert got.dtype == values.dtype and np.array_equal(got, values[idx])


def _range(start, end):
    return Range(start, end - start, [(0, 0, start, end - start)])


def test_local_ranges_are_read_into_the_pool(tmp_path):
    data = np.random.default_rng(1).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    before = pa.total_allocated_bytes()
    got = fetch_range(LocalFileSystem(), str(path), _range(1000, 250_000))[(0, 0)]
    assert pa.total_allocated_bytes() - before >= 249_000  # a pooled buffer, not a bytes object
    assert bytes(got) == data[1000:250_000] and got.readonly


def test_local_short_or_missing_file_is_a_storage_error(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 100_000)
    with pytest.raises(qdbpm.StorageError, match="shorter than its _pm snapshot"):
        fetch_range(LocalFileSystem(), str(path), _range(50_000, 150_000))
    os.unlink(path)
    with pytest.raises(qdbpm.StorageError, match="cannot read bytes") as info:
        fetch_range(LocalFileSystem(), str(path), _range(0, 10))
    assert isinstance(info.value, FileNotFoundError)  # gone where it was expected: a VanishedError


def test_a_fifo_in_place_of_the_file_fails_instead_of_hanging(tmp_path):
    path = tmp_path / "data.parquet"
    os.mkfifo(path)  # nobody writes: a blocking open would wait forever
    with pytest.raises(qdbpm.StorageError, match="cannot read bytes"):
        fetch_range(LocalFileSystem(), str(path), _range(0, 10))
