"""Hive partition keys of a table's partition paths, typed as `pyarrow.dataset` types them.

A partition path such as `day=01/sym=a` carries the keys `day` and `sym`. `keys` reads them as
text; `discover` gives the partition schema and one `pyarrow.compute` expression per partition,
exactly what `pyarrow.dataset.dataset(root, partitioning="hive")` infers: pyarrow itself does the
inference, from the paths alone (its dataset factory over file infos, no fragment inspected, so
no I/O). pyarrow's rules are its own (a key is int32 when every value parses as one, "007" and
"0x10" included, else string), which is why they are not rewritten here. Two departures, where
pyarrow refuses the table: a key whose every value is the null fallback ("couldn't infer type")
makes every key a string; a key named like a column of the files (`ts=2024-01-01` over a `ts`
column, "Unable to merge") is left out, so the file's column stands.
"""

from __future__ import annotations

import urllib.parse

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

NULL_FALLBACK = "__HIVE_DEFAULT_PARTITION__"  # pyarrow's (and Hive's) name for a null value
_ROOT = "/t"  # the base the discovery paths hang from; never opened
_FILE = "data.parquet"


def keys(partition: str) -> dict:
    """{key: value} of the `key=value` segments of a `/`-separated partition path, both
    URL-decoded as pyarrow's HivePartitioning (segment_encoding="uri") decodes them; the null
    fallback value is None; other segments are ignored; a repeated key keeps its last value."""
    out = {}
    for seg in partition.split("/"):
        name, eq, value = seg.partition("=")
        if not eq or not name:
            continue
        value = urllib.parse.unquote(value)
        out[urllib.parse.unquote(name)] = None if value == NULL_FALLBACK else value
    return out


class HivePartitions:
    """The partition schema of a set of partition paths and each one's partition expression."""

    def __init__(self, schema: pa.Schema, expressions: dict):
        self.schema = schema
        self.expressions = expressions  # partition -> pyarrow.compute.Expression

    def expression(self, partition: str):
        """What every row of `partition` satisfies (`true` for a path without keys)."""
        return self.expressions[partition]


def _path(partition: str) -> str:
    return f"{_ROOT}/{partition}/{_FILE}" if partition else f"{_ROOT}/{_FILE}"


def _factory(partitions, partitioning):
    infos = [pafs.FileInfo(_path(p), pafs.FileType.File, size=0) for p in partitions]
    opts = pads.FileSystemFactoryOptions(partition_base_dir=_ROOT, partitioning=partitioning)
    # A local filesystem that is never touched: file infos need no listing, fragments=0 no read.
    return pads.FileSystemDatasetFactory(pafs.LocalFileSystem(), infos, pads.ParquetFileFormat(), opts)


def discover(partitions, exclude=()) -> HivePartitions:
    """pyarrow's hive partitioning of `partitions` (paths relative to the table root), without
    the keys named in `exclude` (the files' column names: there the column stands)."""
    partitions = list(partitions)
    if not partitions:
        return HivePartitions(pa.schema([]), {})
    try:
        schema = _factory(partitions, pads.HivePartitioning.discover()).inspect(fragments=0)
    except pa.ArrowInvalid:
        # A key whose every value is null: pyarrow cannot type it. All keys as strings instead.
        names = list(dict.fromkeys(k for p in partitions for k in keys(p)))
        schema = pa.schema([(k, pa.string()) for k in names])
    exclude = set(exclude)
    schema = pa.schema([f for f in schema if f.name not in exclude])  # parse() ignores keys not in it
    part = pads.HivePartitioning(schema, null_fallback=NULL_FALLBACK, segment_encoding="uri")
    ds = _factory(partitions, part).finish(schema)
    by_path = {f.path: f.partition_expression for f in ds.get_fragments()}
    return HivePartitions(schema, {p: by_path[_path(p)] for p in partitions})
