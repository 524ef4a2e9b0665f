"""Spark SQL types of `_pm` columns and the Arrow types Spark expects for them."""

from __future__ import annotations

import pyarrow as pa

from ..pm import qdb_types as Q

# The Arrow type Spark expects for each Spark SQL type (decimals: pa.decimal128 of the column).
_SPARK_ARROW = {"boolean": pa.bool_(), "byte": pa.int8(), "short": pa.int16(), "int": pa.int32(), "long": pa.int64(),
                "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "float": pa.float32(),
                "double": pa.float64(), "string": pa.string(), "binary": pa.binary()}


def spark_field(pm, c):
    """(Spark DDL type, Arrow type Spark expects) of a `_pm` column, or None when unsupported."""
    d = pm.columns[c]
    pt, tc = int(d["physical_type"]), int(d["type"])
    if int(d["max_rep_level"]) > 0 or int(d["max_def_level"]) > 1:
        return None
    ddl = Q.spark_type(tc, pt)
    if ddl is None:
        return None
    dec = Q.decimal_params(tc)
    return ddl, pa.decimal128(*dec) if dec is not None else _SPARK_ARROW[ddl]


def to_spark_arrow(table: pa.Table, fields) -> pa.Table:
    """`table`'s columns `fields` ([(name, (ddl, Arrow type))]) as Spark expects them."""
    cols = []
    for name, (_, at) in fields:
        col = table.column(name)
        if pa.types.is_timestamp(col.type) and pa.types.is_timestamp(at) and col.type.tz is None:
            col = col.cast(pa.timestamp(col.type.unit, tz="UTC"))  # naive instants are UTC
        if isinstance(col.type, pa.BaseExtensionType):
            col = pa.chunked_array([c.storage for c in col.chunks], col.type.storage_type)
        cols.append(col.cast(at, safe=False) if col.type != at else col)
    return pa.Table.from_arrays(cols, names=[n for n, _ in fields])
