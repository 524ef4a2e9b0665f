"""Hive partition keys of a table's partition paths, typed as `pyarrow.dataset` types them.

A partition path such as `day=01/sym=a` carries the keys `day` and `sym`. `listing.keys` reads them as
text; `discover` gives the partition schema, one `pyarrow.compute` expression per partition and
the typed key values (one row per partition), exactly what `pyarrow.dataset.dataset(root,
partitioning="hive")` infers: pyarrow itself does the inference and parses the values, from the
paths alone (its dataset factory over file infos, no fragment inspected, so no I/O). pyarrow's
rules are its own (a key is int32 when every value parses as one, "007" and "0x10" included, else
string: a date stays a string), which is why they are not rewritten here; an explicit schema
types them instead, as `pyarrow.dataset.partitioning(schema, flavor="hive")` does. Two
departures, where pyarrow refuses the table: a key whose every value is the null fallback
("couldn't infer type") makes every key a string; a key named like a column of the files
(`ts=2024-01-01` over a `ts` column, "Unable to merge") is left out (`HivePartitions.without`),
so the file's column stands.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from ..errors import PmError
from .listing import NULL_FALLBACK, keys

_ROOT = "/t"  # the base the discovery paths hang from; never opened
_FILE = "data.parquet"


class HivePartitions:
    """The partition schema of a set of partition paths, each one's partition expression and
    the key values: `values`, a pyarrow.Table with one row per partition (in the order given)
    and one column per key of `schema`, null where the path has no such key."""

    def __init__(self, partitions, schema: pa.Schema, expressions: dict, values: pa.Table):
        self.partitions = partitions
        self.schema = schema
        self.expressions = expressions  # partition -> pyarrow.compute.Expression
        self.values = values

    def expression(self, partition: str):
        """What every row of `partition` satisfies (`true` for a path without keys)."""
        return self.expressions[partition]

    def without(self, names) -> HivePartitions:
        """These partitions without the keys in `names` (a file's columns: there the column stands)."""
        drop = set(names) & set(self.schema.names)
        if not drop:
            return self
        return _typed(self.partitions, pa.schema([f for f in self.schema if f.name not in drop]))


def _path(partition: str) -> str:
    return f"{_ROOT}/{partition}/{_FILE}" if partition else f"{_ROOT}/{_FILE}"


def _factory(partitions, partitioning):
    infos = [pafs.FileInfo(_path(p), pafs.FileType.File, size=0) for p in partitions]
    opts = pads.FileSystemFactoryOptions(partition_base_dir=_ROOT, partitioning=partitioning)
    # A local filesystem that is never touched: file infos need no listing, fragments=0 no read.
    return pads.FileSystemDatasetFactory(pafs.LocalFileSystem(), infos, pads.ParquetFileFormat(), opts)


def discover(partitions, exclude=(), schema=None) -> HivePartitions:
    """pyarrow's hive partitioning of `partitions` (paths relative to the table root), typed by
    `schema` (a pyarrow.Schema) or else as pyarrow infers them, without the keys named in
    `exclude` (the files' column names: there the column stands)."""
    partitions = list(partitions)
    if schema is None:
        schema = _infer(partitions)
    elif not isinstance(schema, pa.Schema):
        raise PmError(f"a hive partitioning schema must be a pyarrow.Schema, not {schema!r}")
    exclude = set(exclude)
    return _typed(partitions, pa.schema([f for f in schema if f.name not in exclude]))


def _infer(partitions) -> pa.Schema:
    if not partitions:
        return pa.schema([])
    try:
        return _factory(partitions, pads.HivePartitioning.discover()).inspect(fragments=0)
    except pa.ArrowInvalid:
        # A key whose every value is null: pyarrow cannot type it. All keys as strings instead.
        names = list(dict.fromkeys(k for p in partitions for k in keys(p)))
        return pa.schema([(k, pa.string()) for k in names])


def _typed(partitions, schema) -> HivePartitions:
    """The expressions and values of `partitions` under the hive partitioning `schema`."""
    part = pads.HivePartitioning(schema, null_fallback=NULL_FALLBACK, segment_encoding="uri")
    try:
        # parse() ignores path keys not in the schema
        by_path = {f.path: f.partition_expression for f in _factory(partitions, part).finish(schema).get_fragments()}
    except pa.ArrowInvalid as e:
        raise PmError(f"hive partition keys do not fit {schema}: {_culprit(partitions, part, schema)}{e}") from None
    expressions = {p: by_path[_path(p)] for p in partitions}
    found = [pads.get_partition_keys(expressions[p]) for p in partitions]  # pyarrow's own parse of each value
    values = pa.table([pa.array([f.get(k.name) for f in found], k.type) for k in schema], schema=schema) \
        if len(schema) else pa.table({"_": pa.nulls(len(partitions))}).drop(["_"])
    return HivePartitions(partitions, schema, expressions, values)


def _culprit(partitions, part, schema) -> str:
    """'partition "p": ' for the first partition pyarrow cannot parse under `schema` (error path)."""
    for p in partitions:
        try:
            list(_factory([p], part).finish(schema).get_fragments())
        except pa.ArrowInvalid:
            return f"partition {p!r}: "
    return ""
