"""QuestDB type codes: the one table of what each type tag means, and lookups into it.

A column's full TYPE code (docs/format.md#questdb-type-codes) is a tag in its low byte plus
flags and parameters (decimal precision / scale, nanosecond timestamps, geohash bits). Every
consumer asks here rather than decoding the code itself: the readable name (inspect, errors),
the units of temporal values, the decimal parameters, how stats compare (pruning), the Parquet
logical type a footer-less reader gives the column, the Spark SQL type, the string form of a
value (display, literals). Bit positions live in `layout`; nothing here knows a file offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import layout as L

# How a column's min/max stats compare, from its physical type and QuestDB type. Anything whose
# order qdbpm cannot be sure of is KIND_NONE: no min/max pruning, only null-count rules.
KIND_NONE = "none"  # order unknown (INT96, untyped FLBA(2)/(12), unknown FLBA types, repeated leaves)
KIND_INT = "int"  # signed integers as int64 (INT32 sign-extended; BOOLEAN as 0/1)
KIND_UINT = "uint"  # IPv4: INT32 compared unsigned, as int64 0..2^32-1
KIND_FLOAT = "float"  # FLOAT / DOUBLE as float64
KIND_BYTES = "bytes"  # BYTE_ARRAY / FLBA: unsigned lexicographic, Python bytes
KIND_BIGDEC = "bigdec"  # FLBA / BYTE_ARRAY decimals: signed big-endian, Python ints
KIND_ANYSIGN = "anysign"  # INT32 / INT64 with no QuestDB type (e.g. unsigned 64-bit): signed or unsigned

UNITS = ("days", "ms", "us", "ns")  # temporal values: these units since 1970-01-01 UTC

# Spark SQL type of each physical type for a QuestDB type with no Spark type of its own.
_SPARK_DEFAULT = {L.PT_BOOLEAN: "boolean", L.PT_INT32: "int", L.PT_INT64: "long", L.PT_INT96: "timestamp",
                  L.PT_FLOAT: "float", L.PT_DOUBLE: "double", L.PT_BYTE_ARRAY: "binary",
                  L.PT_FIXED_LEN_BYTE_ARRAY: "binary"}


@dataclass(frozen=True, eq=False)
class QdbType:
    """One row of the table: what a type tag means on each physical type it is stored as."""

    name: str
    units: dict = field(default_factory=dict)  # physical type -> unit of the stored values
    logical: dict = field(default_factory=dict)  # physical type -> Parquet LogicalType (schema_element)
    spark: dict = field(default_factory=dict)  # physical type -> Spark SQL type, else _SPARK_DEFAULT
    form: str | None = None  # string form of a value: "text" (UTF-8), "ipv4", "uuid", "char"
    unsigned: bool = False  # INT32 values compare unsigned
    ordered_bytes: bool = False  # FIXED_LEN_BYTE_ARRAY values compare as unsigned bytes
    decimal_bytes: int = 0  # DECIMALn: its width in bytes (precision and scale are in the code)
    max_precision: int = 0  # DECIMALn: the most digits it holds
    geohash: bool = False  # GEOxxx: the bit count is in the code


_TEXT = {"logical": {L.PT_BYTE_ARRAY: ("STRING",)}, "spark": {L.PT_BYTE_ARRAY: "string"}, "form": "text"}

TYPES = {
    L.QDB_BOOLEAN: QdbType("BOOLEAN"),
    L.QDB_BYTE: QdbType("BYTE", logical={L.PT_INT32: ("INTEGER", 8, True)}, spark={L.PT_INT32: "byte"}),
    L.QDB_SHORT: QdbType("SHORT", logical={L.PT_INT32: ("INTEGER", 16, True)}, spark={L.PT_INT32: "short"}),
    L.QDB_CHAR: QdbType("CHAR", form="char"),
    L.QDB_INT: QdbType("INT"),
    L.QDB_LONG: QdbType("LONG"),
    L.QDB_DATE: QdbType("DATE", units={L.PT_INT32: "days", L.PT_INT64: "ms"},
                        logical={L.PT_INT32: ("DATE",), L.PT_INT64: ("TIMESTAMP", "MILLIS", True)},
                        spark={L.PT_INT32: "date", L.PT_INT64: "timestamp"}),
    # Microseconds; QDB_FLAG_TIMESTAMP_NANOS in the code makes them nanoseconds (see `unit`).
    L.QDB_TIMESTAMP: QdbType("TIMESTAMP", units={L.PT_INT64: "us"},
                             logical={L.PT_INT64: ("TIMESTAMP", "MICROS", True)}, spark={L.PT_INT64: "timestamp"}),
    L.QDB_FLOAT: QdbType("FLOAT"),
    L.QDB_DOUBLE: QdbType("DOUBLE"),
    L.QDB_STRING: QdbType("STRING", **_TEXT),
    L.QDB_SYMBOL: QdbType("SYMBOL", **_TEXT),
    L.QDB_LONG256: QdbType("LONG256", ordered_bytes=True),
    L.QDB_GEOBYTE: QdbType("GEOBYTE", geohash=True),
    L.QDB_GEOSHORT: QdbType("GEOSHORT", geohash=True),
    L.QDB_GEOINT: QdbType("GEOINT", geohash=True),
    L.QDB_GEOLONG: QdbType("GEOLONG", geohash=True),
    L.QDB_BINARY: QdbType("BINARY"),
    # The UUID logical type needs FLBA(16): schema_element checks the width.
    L.QDB_UUID: QdbType("UUID", logical={L.PT_FIXED_LEN_BYTE_ARRAY: ("UUID",)}, form="uuid", ordered_bytes=True),
    L.QDB_LONG128: QdbType("LONG128", ordered_bytes=True),
    L.QDB_IPV4: QdbType("IPv4", logical={L.PT_INT32: ("INTEGER", 32, False)}, spark={L.PT_INT32: "long"},
                        form="ipv4", unsigned=True),
    L.QDB_VARCHAR: QdbType("VARCHAR", **_TEXT),
    L.QDB_ARRAY: QdbType("ARRAY"),
}
for _tag, _width, _digits in ((L.QDB_DECIMAL8, 1, 2), (L.QDB_DECIMAL16, 2, 4), (L.QDB_DECIMAL32, 4, 9),
                              (L.QDB_DECIMAL64, 8, 18), (L.QDB_DECIMAL128, 16, 38), (L.QDB_DECIMAL256, 32, 76)):
    TYPES[_tag] = QdbType(f"DECIMAL{8 * _width}", decimal_bytes=_width, max_precision=_digits)
_DECIMALS = sorted((t.decimal_bytes, g) for g, t in TYPES.items() if t.decimal_bytes)  # (width, tag), narrowest first

_UNKNOWN = QdbType("")  # a tag this table does not know: stats compare by physical type alone


def qdb_type(type_code: int) -> QdbType | None:
    """The table row of a full TYPE code; None for "no QuestDB type" (a negative code)."""
    if type_code < 0:
        return None
    return TYPES.get(L.qdb_type_tag(type_code), _UNKNOWN)


# --- decimals ---------------------------------------------------------------------------------

_PRECISION_MASK, _SCALE_MASK = 0x3FF, 0x3F


def is_decimal(type_code: int) -> bool:
    t = qdb_type(type_code)
    return t is not None and t.decimal_bytes > 0


def decimal_params(type_code: int) -> tuple[int, int] | None:
    """(precision, scale) of a DECIMALn code, None for any other."""
    if not is_decimal(type_code):
        return None
    return ((type_code >> L.QDB_DECIMAL_PRECISION_SHIFT) & _PRECISION_MASK,
            (type_code >> L.QDB_DECIMAL_SCALE_SHIFT) & _SCALE_MASK)


def decimal_code(decimal_tag: int, precision: int, scale: int) -> int:
    """The full TYPE code of a DECIMALn tag with its precision and scale; -1 for tag -1."""
    if decimal_tag < 0:
        return -1
    return (decimal_tag | (precision & _PRECISION_MASK) << L.QDB_DECIMAL_PRECISION_SHIFT
            | (scale & _SCALE_MASK) << L.QDB_DECIMAL_SCALE_SHIFT)


def decimal_tag(precision: int, width: int | None = None) -> int:
    """The DECIMALn tag of `width` bytes when one has that width, else the narrowest holding
    `precision` digits; -1 when none does."""
    for w, g in _DECIMALS:
        if w == width:
            return g
    for _, g in _DECIMALS:
        if precision <= TYPES[g].max_precision:
            return g
    return -1


# --- per-consumer lookups ---------------------------------------------------------------------


def type_name(type_code: int) -> str:
    """Readable name of a full TYPE code, e.g. 'TIMESTAMP_NS', 'DECIMAL64(18,3)', 'GEOINT(20b)'."""
    t = qdb_type(type_code)
    if t is None:
        return "UNKNOWN"
    tag = L.qdb_type_tag(type_code)
    name = t.name or f"TYPE{tag}"
    if tag == L.QDB_TIMESTAMP and type_code & L.QDB_FLAG_TIMESTAMP_NANOS:
        name = "TIMESTAMP_NS"
    elif t.decimal_bytes:
        precision, scale = decimal_params(type_code)
        if precision:
            name += f"({precision},{scale})"
    elif t.geohash:
        bits = (type_code >> L.QDB_GEOHASH_BITS_SHIFT) & 0xFF
        if bits:
            name += f"({bits}b)"
    return name


def unit(type_code: int, physical_type: int) -> str | None:
    """Units of a temporal column's stored values since the epoch (one of UNITS), else None."""
    t = qdb_type(type_code)
    u = None if t is None else t.units.get(physical_type)
    if u == "us" and type_code & L.QDB_FLAG_TIMESTAMP_NANOS:
        return "ns"
    return u


def value_form(type_code: int) -> str | None:
    """How a value is written as a string: "text", "ipv4", "uuid", "char", or None."""
    t = qdb_type(type_code)
    return None if t is None else t.form


def comparison_kind(type_code: int, physical_type: int, fixed_byte_len: int = 0) -> str:
    """How the min/max stats of a (non-repeated) column compare: one of the KIND_* above."""
    pt, t = physical_type, qdb_type(type_code)
    if t is None:
        if pt in (L.PT_FLOAT, L.PT_DOUBLE):
            return KIND_FLOAT
        if pt == L.PT_BYTE_ARRAY or (pt == L.PT_FIXED_LEN_BYTE_ARRAY and fixed_byte_len not in (2, 12)):
            # Plain binary orders as unsigned bytes. FLBA(2) may be FLOAT16 and FLBA(12) INTERVAL,
            # whose orders differ, and the _pm cannot tell: those get no min/max pruning.
            return KIND_BYTES
        if pt in (L.PT_INT32, L.PT_INT64):
            # No type: signedness unknown (unsigned 64-bit maps here). Pruning evaluates both
            # readings and keeps a row group if either may match, which is sound either way.
            return KIND_ANYSIGN
        return KIND_NONE
    if pt == L.PT_BOOLEAN:
        return KIND_INT
    if pt in (L.PT_INT32, L.PT_INT64):
        return KIND_UINT if t.unsigned and pt == L.PT_INT32 else KIND_INT
    if pt in (L.PT_FLOAT, L.PT_DOUBLE):
        return KIND_FLOAT
    if pt == L.PT_FIXED_LEN_BYTE_ARRAY:
        if t.decimal_bytes:
            return KIND_BIGDEC
        return KIND_BYTES if t.ordered_bytes else KIND_NONE
    if pt == L.PT_BYTE_ARRAY:
        return KIND_BIGDEC if t.decimal_bytes else KIND_BYTES
    return KIND_NONE  # INT96: Parquet leaves its sort order undefined, so its stats are not bounds


def parquet_logical_type(type_code: int, physical_type: int, fixed_byte_len: int = 0) -> tuple | None:
    """The Parquet LogicalType (as parquet.compact spells it) that gives a footer-less reader
    this column's values, None when the physical type alone does."""
    dec = decimal_params(type_code)
    if dec is not None:
        return ("DECIMAL", dec[1], dec[0])
    t = qdb_type(type_code)
    lt = None if t is None else t.logical.get(physical_type)
    if lt is None:
        return None
    if lt[0] == "UUID" and fixed_byte_len != 16:
        return None
    if lt[0] == "TIMESTAMP":
        return ("TIMESTAMP", {"ms": "MILLIS", "us": "MICROS", "ns": "NANOS"}[unit(type_code, physical_type)], True)
    return lt


def spark_type(type_code: int, physical_type: int) -> str | None:
    """The Spark SQL type of a flat column's values, None when Spark has none (DECIMAL over 38 digits)."""
    dec = decimal_params(type_code)
    if dec is not None:
        precision, scale = dec
        return f"decimal({precision},{scale})" if precision <= 38 else None
    t = qdb_type(type_code)
    if t is None and physical_type == L.PT_INT32:
        return "long"  # no QuestDB type: possibly unsigned 32-bit
    s = None if t is None else t.spark.get(physical_type)
    if s is None:
        s = _SPARK_DEFAULT.get(physical_type, "binary")
    return s
