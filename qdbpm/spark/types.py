"""Spark SQL types of `_pm` columns and the Arrow types Spark expects for them."""

from __future__ import annotations

import datetime as dt
import re

import pyarrow as pa
from pyspark.sql import types as T

from ..pm import qdb_types as Q
from ..table.listing import keys

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


# Spark's partition column type inference (PartitioningUtils.inferPartitionColumnValue): each
# value is the first of int, long, decimal (no fraction), double, date, string that parses it;
# a key takes the widest of its values' types, string when they do not widen into one another.
_INT = re.compile(r"[+-]?\d+")
_DOUBLE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?|[+-]?(NaN|Infinity)")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_NUMERIC = ("int", "long", "decimal", "double")


def _value_type(raw):
    """(Spark type, decimal precision) of one partition value as Spark infers it; None for null."""
    if raw is None:
        return None
    if _INT.fullmatch(raw):
        v = int(raw)
        if -(1 << 31) <= v < (1 << 31):
            return "int", 0
        if -(1 << 63) <= v < (1 << 63):
            return "long", 0
        digits = len(raw.lstrip("+-").lstrip("0")) or 1
        return ("decimal", digits) if digits <= 38 else ("double", 0)
    if _DOUBLE.fullmatch(raw):
        return "double", 0
    if _DATE.fullmatch(raw):
        try:
            dt.date.fromisoformat(raw)
            return "date", 0
        except ValueError:
            pass
    return "string", 0


def _wider(a, b):
    if a is None or a == b:
        return b
    if b is None:
        return a
    if a[0] in _NUMERIC and b[0] in _NUMERIC:
        rank = max(_NUMERIC.index(a[0]), _NUMERIC.index(b[0]))
        if _NUMERIC[rank] != "decimal":
            return _NUMERIC[rank], 0
        # int / long as decimals of 10 / 20 digits, as Spark widens them
        digits = {"int": 10, "long": 20}
        return "decimal", max(digits.get(a[0], a[1]), digits.get(b[0], b[1]))
    return "string", 0


_KEY_ARROW = {"int": pa.int32(), "long": pa.int64(), "double": pa.float64(), "date": pa.date32(),
              "string": pa.string()}


def key_schema(partitions) -> pa.Schema:
    """The Arrow schema of the hive keys of `partitions` (paths relative to the table root) with
    the types Spark infers for them (spark.read.parquet of the same directories); a key whose every
    value is null is a string, as in Spark."""
    found = {}
    for p in partitions:
        for k, v in keys(p).items():
            found[k] = _wider(found.get(k), _value_type(v))
    out = []
    for k, t in found.items():
        t = t or ("string", 0)
        out.append(pa.field(k, pa.decimal128(t[1], 0) if t[0] == "decimal" else _KEY_ARROW[t[0]]))
    return pa.schema(out)


def ddl_of(arrow_type) -> str:
    """The Spark DDL type of a key column's Arrow type (key_schema's)."""
    if pa.types.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    return next(k for k, v in _KEY_ARROW.items() if v == arrow_type)


_SPARK_TYPES = {"boolean": T.BooleanType, "byte": T.ByteType, "short": T.ShortType, "int": T.IntegerType,
                "long": T.LongType, "date": T.DateType, "timestamp": T.TimestampType, "float": T.FloatType,
                "double": T.DoubleType, "string": T.StringType, "binary": T.BinaryType}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def spark_type(ddl: str) -> T.DataType:
    """The pyspark DataType of a DDL type spark_field / ddl_of give (parsed here: a planning
    worker has no JVM to parse DDL)."""
    m = _DECIMAL.fullmatch(ddl)
    return T.DecimalType(int(m[1]), int(m[2])) if m else _SPARK_TYPES[ddl]()
