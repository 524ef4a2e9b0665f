"""Spark data source filters -> qdbpm expressions, only where the meaning is identical.

Spark semantics differ from pyarrow's in places (NaN equals NaN and sorts above every number;
NOT IN / IN with a null never match), so the data source only accepts filters whose Spark
meaning it reproduces exactly, and hands the rest back for Spark to evaluate.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import datasource as D

from ..pm import layout as L
from ..pm import qdb_types as Q
from ..prune import expr as E
from ..prune import residual as R
from .types import spark_field

_SIMPLE = {D.EqualTo: "==", D.GreaterThan: ">", D.GreaterThanOrEqual: ">=", D.LessThan: "<",
           D.LessThanOrEqual: "<="}


def exact_type(pm, name) -> bool:
    """Columns whose Spark comparisons mean exactly what qdbpm's do on the same stored values."""
    c = pm.column_index(name)
    d = pm.columns[c]
    pt, tc = int(d["physical_type"]), int(d["type"])
    if pt in (L.PT_FLOAT, L.PT_DOUBLE):
        return False  # Spark: NaN = NaN and NaN > everything
    if Q.unit(tc, pt) == "ns" or pt == L.PT_INT96:
        return False  # nanoseconds: Spark sees microseconds; compares after truncation
    if spark_field(pm, c) is None or spark_field(pm, c)[0] == "binary":
        return False
    return True


def _literal(v):
    if isinstance(v, dt.datetime) and v.tzinfo is None:
        return v.astimezone(dt.timezone.utc)  # PySpark hands naive datetimes in the worker's local time
    return v


def convert_filter(f, pm):
    """The qdbpm expression with exactly the Spark SQL meaning of `f` on the file columns of `pm`
    (comparisons, <=>, IN, IS [NOT] NULL, NOT), or None: then Spark keeps the filter. The data
    source itself converts with `to_expression`, which also knows its key columns and prefixes."""
    columns = {n: spark_field(pm, c)[0] if exact_type(pm, n) else None for c, n in enumerate(pm.column_names)}
    return to_expression(f, columns, prefixes=False)


def to_expression(f, columns, *, prefixes=True):
    """The qdbpm expression with exactly the Spark SQL meaning of `f` (Kleene logic included), or
    None when there is none: then Spark keeps the filter and evaluates it itself.

    columns: {name: Spark DDL type when comparisons on it are exact, else None} (file and key
    columns alike). prefixes: convert StringStartsWith on string columns (Spark compares UTF-8
    bytes, as pyarrow's starts_with does; null stays null)."""

    def name_of(attr):
        name = ".".join(attr)
        return name if columns.get(name) is not None else None

    # Spark hands a conjunction as a list and pushes no OR: leaves and NOT are all there is.
    if isinstance(f, D.Not):
        inner = to_expression(f.child, columns, prefixes=prefixes)
        return None if inner is None else ~inner  # every converted form is null exactly when SQL's is
    for cls, op in _SIMPLE.items():
        if isinstance(f, cls):
            n = name_of(f.attribute)
            if n is None or f.value is None:
                return None
            return E.Cmp(n, op, _literal(f.value))
    if isinstance(f, D.EqualNullSafe):
        n = name_of(f.attribute)
        if n is None:
            return None
        if f.value is None:
            return E.IsNull(n)
        return E.IsNotNull(n) & E.Cmp(n, "==", _literal(f.value))  # never null, like <=>
    if isinstance(f, D.In):
        n = name_of(f.attribute)
        if n is None or not f.value or any(v is None for v in f.value):
            return None  # SQL: a listed NULL makes non-matches NULL; qdbpm has no such literal
        # SQL IN is null for a null input: an OR of comparisons is too (qdbpm's In is not).
        terms = tuple(E.Cmp(n, "==", _literal(v)) for v in f.value)
        return terms[0] if len(terms) == 1 else E.Or(terms)
    if isinstance(f, (D.IsNull, D.IsNotNull)):
        n = ".".join(f.attribute)
        if n not in columns:
            return None
        return E.IsNull(n) if isinstance(f, D.IsNull) else E.IsNotNull(n)
    if prefixes and isinstance(f, D.StringStartsWith):
        n = name_of(f.attribute)
        if n is None or columns[n] != "string" or not isinstance(f.value, str):
            return None
        return R.StartsWith(R.Ref(n), f.value)  # prunes as the byte range [prefix, next prefix)
    return None
