"""Small Parquet and byte files for the kernel tests: a one-column table's lone chunk, written to
memory by pyarrow, and a file of random bytes."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def one_chunk(values, **write) -> bytes:
    """The bytes of the one column chunk of {"i": values}, written by pyarrow with `write`."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"i": pa.array(values)}), sink, **write)
    raw = sink.getvalue().to_pybytes()
    c = pq.ParquetFile(pa.py_buffer(raw)).metadata.row_group(0).column(0)
    start = c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset
    return raw[start:start + c.total_compressed_size]


def random_file(path, rng, least, most) -> bytes:
    """Write rng's random bytes, least to most - 1 of them, to `path`; return them."""
    data = rng.integers(0, 256, int(rng.integers(least, most))).astype(np.uint8).tobytes()
    path.write_bytes(data)
    return data
