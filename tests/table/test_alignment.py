"""The direct path's arrays start on 8-byte boundaries. A PLAIN page's values are a view of the page
from where its definition levels end, at any byte; handed to Arrow as they were, a read returned an
int32 column whose data began at an address = 7 (mod 8), and every filter pass over such a table
made Acero print "An input buffer was poorly aligned" to stderr (found by scripts/fuzz_reads.py)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.sync.generate import generate
from qdbpm.table import build


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """One partition whose nullable PLAIN columns sit behind their levels in v1 pages."""
    root = tmp_path_factory.mktemp("aligned")
    (root / "p0").mkdir()
    n = 5000
    t = pa.table({"a": pa.array(np.arange(n, dtype=np.int32)),
                  "b": pa.array(np.arange(n, dtype=np.int64), mask=np.arange(n) % 7 == 0),
                  "f": pa.array(np.linspace(0, 1, n), mask=np.arange(n) % 5 == 0)})
    path = str(root / "p0" / "data.parquet")
    for codec in ("none", "snappy"):
        pq.write_table(t, path, use_dictionary=False, compression=codec, data_page_version="1.0",
                       data_page_size=1 << 20)
    generate(path)
    return str(root), t


def _offsets(t):
    return [b.address % 8 for c in t.columns for ch in c.chunks for b in ch.buffers() if b is not None and b.size]


@pytest.mark.parametrize("columns,where", [(["a"], None), (["a", "b", "f"], None), (["a", "f"], "b > 10"),
                                           (["b"], "coalesce(b, a) > 86"), (["f"], "a + b > 100")])
def test_every_buffer_is_8_byte_aligned_and_acero_stays_quiet(root, capfd, columns, where):
    path, t = root
    got = qdbpm.read_table(path, columns, where)
    assert set(_offsets(got)) == {0}
    if where is None:
        assert got.equals(t.select(columns))
    assert "poorly aligned" not in capfd.readouterr().err


def test_a_misaligned_view_is_copied_once_an_aligned_one_is_not():
    raw = np.zeros(8 * 11, np.uint8)
    view = raw[3:3 + 40].view(np.int32)
    assert view.__array_interface__["data"][0] % 8
    got = build.aligned(view)
    assert got.__array_interface__["data"][0] % 8 == 0 and np.array_equal(got, view)
    aligned = raw[8:48].view(np.int64)
    assert build.aligned(aligned) is aligned
