"""The filter pass over a split chunk without the GIL (`parquet/_split.pyx` `lookup_split_c`, which
the offload worker's filter job runs) against its reference, the Python pass: the chunk split by
`pages.split_chunk`, its dictionary looked up in a Decider-like memo (`Decider.lookup`'s LUT), the
rows by `pages.lookup_and`. Over chunks from pyarrow, DuckDB and Polars it takes every chunk of
dictionary pages without a null whose values the memo holds, and keeps the same rows; it declines
nulls, plain pages and a value the memo lacks; over chunks cut short and mutated, whatever it
takes equals what the Python pass gives (it never keeps a different row)."""

import zlib

import numpy as np
import pyarrow as pa
import pytest

from qdbpm.errors import ParquetFormatError
from qdbpm.parquet import _split, pages
from qdbpm.pm import layout as L

from test_split import WRITERS, _kernel, _python, _variants, chunks, write_all


def _source(seed, n=3000):
    """Few distinct values (dictionary pages), with and without nulls, of each fixed width."""
    rng = np.random.default_rng(seed)
    miss = rng.random(n) < 0.1
    return pa.table({
        "d": pa.array(rng.integers(-40, 40, n)),
        "d32": pa.array(rng.integers(0, 7, n).astype(np.int32)),
        "f": pa.array(rng.choice(rng.normal(size=25), n)),
        "f32": pa.array(rng.choice(rng.normal(size=9), n).astype(np.float32)),
        "dn": pa.array(rng.integers(0, 12, n), mask=miss),
        "wide": pa.array(rng.integers(-10**12, 10**12, n)),
    })


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_all(tmp_path_factory.mktemp("lookup"), _source, 80)


def _entries(blob, ptype, codec, max_def, n):
    """The Python split of the chunk and its dictionary values as signed integers, or (split, None)."""
    sp = _python(blob, ptype, codec, max_def, n)
    got = None if sp is None else pages.dictionary_entries(sp)
    if not isinstance(got, pages.Fixed) or got.values.dtype.itemsize not in (4, 8):
        return sp, None
    return sp, got.values.view(f"<i{got.values.dtype.itemsize}")


def _memo(bits, rng, lacking=False):
    """(sorted values, a random 0 / 1 answer each): the chunk's dictionary, one value left out if `lacking`."""
    known = np.unique(bits)
    if lacking:
        known = np.delete(known, int(rng.integers(0, len(known))))
    return known, rng.integers(0, 2, len(known)).astype(np.uint8)


def _reference(sp, bits, known, answers, n):
    """The Python pass's keep mask with the memo's LUT; None where the memo lacks a value or the pass raises."""
    if sp is None or bits is None or not len(known):
        return None
    pos = np.minimum(np.searchsorted(known, bits), len(known) - 1)
    if not (known[pos] == bits).all():
        return None
    keep = np.ones(n, np.uint8)
    try:
        pages.lookup_and(sp, answers[pos], 0, keep)
    except (ParquetFormatError, pages.Unsupported):
        return None
    return keep


def _dictionary_chunks(path, rng):
    """(blob, ptype, codec, max_def, rows, Python split, dictionary values as signed integers, a
    memo of them) of each chunk of rows whose pages are all dictionary-encoded."""
    for blob, ptype, codec, max_def, n in chunks(path):
        sp, bits = _entries(blob, ptype, codec, max_def, n)
        if bits is not None and n and len(bits):
            yield blob, ptype, codec, max_def, n, sp, bits, _memo(bits, rng)


def _no_nulls(sp):
    return all(pg.levels is None for pg in sp.pages)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_the_lookup_takes_every_dictionary_chunk_without_nulls_and_keeps_the_python_rows(files, writer):
    rng = np.random.default_rng(len(writer))
    taken = declined_nulls = 0
    for blob, ptype, codec, max_def, n, sp, bits, (known, answers) in _dictionary_chunks(files[writer], rng):
        got = _split.lookup_table(blob, n, codec, ptype, max_def, known, answers)
        ref = _reference(sp, bits, known, answers, n)
        eligible = _kernel(blob, ptype, codec, max_def, n) is not None and _no_nulls(sp) and ref is not None
        assert (got is not None) == eligible, (writer, ptype, codec, max_def)
        if got is not None:
            assert bytes(got) == ref.tobytes()
            taken += 1
        declined_nulls += not _no_nulls(sp)
        # a memo lacking one of the chunk's values: the Python pass decides that value
        if len(np.unique(bits)) > 1:
            assert _split.lookup_table(blob, n, codec, ptype, max_def, *_memo(bits, rng, lacking=True)) is None
    if writer not in ("pyarrow-snappy-v2", "pyarrow-zstd", "pyarrow-snappy-plain"):
        assert taken > 0 and declined_nulls > 0


@pytest.mark.parametrize("writer", ["pyarrow-snappy", "pyarrow-none-small-pages", "duckdb", "polars-snappy"])
def test_what_the_lookup_takes_of_corrupt_chunks_equals_the_python_pass(files, writer):
    rng = np.random.default_rng(zlib.crc32(writer.encode()))  # str hash() differs per process
    checked = taken = 0
    for blob, ptype, codec, max_def, n, _, _, (known, answers) in _dictionary_chunks(files[writer], rng):
        for b in _variants(blob, rng, 12):
            got = _split.lookup_table(b, n, codec, ptype, max_def, known, answers)
            checked += 1
            if got is not None:  # taken: the Python pass over the same bytes keeps the same rows
                sp2, bits2 = _entries(b, ptype, codec, max_def, n)
                ref = _reference(sp2, bits2, known, answers, n)
                assert ref is not None and bytes(got) == ref.tobytes()
                taken += 1
    assert checked > 50 and taken > 0


def test_a_memo_of_another_width_or_none_at_all_is_declined(files):
    blob, ptype, codec, max_def, n, _, _, (known, answers) = next(
        c for c in _dictionary_chunks(files["pyarrow-snappy"], np.random.default_rng(3)) if c[1] == L.PT_INT64)
    assert _split.lookup_table(blob, n, codec, ptype, max_def, known, answers) is not None
    assert _split.lookup_table(blob, n, codec, ptype, max_def, known.astype(np.int32), answers) is None
    assert _split.lookup_table(blob, n, codec, ptype, max_def, known[:0], answers[:0]) is None
    assert _split.lookup_table(blob, n - 1, codec, ptype, max_def, known, answers) is None  # rows it does not hold
