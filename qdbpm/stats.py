"""Typed per-column statistics over all row groups of a `_pm` snapshot, decoded once and cached.

The slot bytes are Parquet-native; the comparison domain comes from the physical type and the
QuestDB type code. Anything whose order qdbpm cannot be sure of gets KIND_NONE: no min/max
pruning for it, only null-count rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import layout as L

KIND_NONE = "none"  # order unknown (INT96, unsigned 64-bit, FLOAT16, unknown types, repeated leaves)
KIND_INT = "int"  # signed integers as int64 (INT32 sign-extended; BOOLEAN as 0/1)
KIND_UINT = "uint"  # IPv4: INT32 compared unsigned, as int64 0..2^32-1
KIND_FLOAT = "float"  # FLOAT / DOUBLE as float64
KIND_BYTES = "bytes"  # BYTE_ARRAY / FLBA: unsigned lexicographic, Python bytes
KIND_BIGDEC = "bigdec"  # FLBA / BYTE_ARRAY decimals: signed big-endian, Python ints
KIND_ANYSIGN = "anysign"  # INT32 / INT64 with no QuestDB type (e.g. unsigned 64-bit): signed or unsigned


@dataclass(frozen=True)
class ColumnType:
    """What binding a literal to a column needs to know."""

    name: str
    index: int
    physical_type: int
    type_code: int
    fixed_byte_len: int
    kind: str
    unit: str | None  # "days", "ms", "us", "ns" for temporal columns
    scale: int | None  # decimal scale
    nullable: bool
    repeated: bool

    @property
    def tag(self) -> int:
        return L.qdb_type_tag(self.type_code)


def column_type(pm_columns, names, i) -> ColumnType:
    c = pm_columns[i]
    pt, tc = int(c["physical_type"]), int(c["type"])
    rep = int(c["max_rep_level"]) > 0
    nullable = L.flags_repetition(int(c["flags"])) != L.REPETITION_REQUIRED or int(c["max_def_level"]) > 0
    tag = L.qdb_type_tag(tc)
    unit = scale = None
    kind = KIND_NONE
    is_dec = L.QDB_DECIMAL8 <= tag <= L.QDB_DECIMAL256
    if is_dec:
        scale = (tc >> L.QDB_DECIMAL_SCALE_SHIFT) & 0x3F
    if tc < 0:
        if pt in (L.PT_FLOAT, L.PT_DOUBLE):
            kind = KIND_FLOAT
        elif pt == L.PT_BYTE_ARRAY or (pt == L.PT_FIXED_LEN_BYTE_ARRAY and int(c["fixed_byte_len"]) not in (2, 12)):
            # Plain binary orders as unsigned bytes. FLBA(2) may be FLOAT16 and FLBA(12) INTERVAL,
            # whose orders differ, and the _pm cannot tell: those get no min/max pruning.
            kind = KIND_BYTES
        elif pt in (L.PT_INT32, L.PT_INT64):
            # No type: signedness unknown (unsigned 64-bit maps here). Pruning evaluates both
            # readings and keeps a row group if either may match, which is sound either way.
            kind = KIND_ANYSIGN
    elif pt == L.PT_BOOLEAN:
        kind = KIND_INT
    elif pt in (L.PT_INT32, L.PT_INT64):
        kind = KIND_UINT if tag == L.QDB_IPV4 and pt == L.PT_INT32 else KIND_INT
        if tag == L.QDB_DATE:
            unit = "days" if pt == L.PT_INT32 else "ms"
        elif tag == L.QDB_TIMESTAMP:
            unit = "ns" if tc & L.QDB_FLAG_TIMESTAMP_NANOS else "us"
    elif pt in (L.PT_FLOAT, L.PT_DOUBLE):
        kind = KIND_FLOAT
    elif pt == L.PT_FIXED_LEN_BYTE_ARRAY:
        if is_dec:
            kind = KIND_BIGDEC
        elif tag in (L.QDB_UUID, L.QDB_LONG128, L.QDB_LONG256):
            kind = KIND_BYTES
    elif pt == L.PT_BYTE_ARRAY:
        kind = KIND_BIGDEC if is_dec else KIND_BYTES
    # INT96 stays KIND_NONE: Parquet leaves its sort order undefined, so its stats are not bounds.
    if rep:
        kind = KIND_NONE  # a predicate on a list leaf is not a predicate on its values one by one
    return ColumnType(names[i], i, pt, tc, int(c["fixed_byte_len"]), kind, unit, scale, nullable, rep)


class Schema:
    """Column name -> ColumnType for binding predicates; equal schemas bind identically."""

    def __init__(self, types):
        self.types = list(types)
        self._by_name = {t.name: t for t in reversed(self.types)}

    @classmethod
    def of(cls, pm):
        return cls(column_type(pm.columns, pm.column_names, i) for i in range(pm.column_count))

    def column(self, name) -> ColumnType:
        from .errors import PredicateError

        try:
            return self._by_name[name]
        except KeyError:
            raise PredicateError(f"no column {name!r}; columns: {[t.name for t in self.types]}") from None

    def key(self):
        return tuple((t.name, t.physical_type, t.type_code, t.fixed_byte_len, t.kind, t.nullable, t.repeated)
                     for t in self.types)

    def __eq__(self, other):
        return isinstance(other, Schema) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())


@dataclass
class ColumnStats:
    """One column over R row groups (one file, or several files concatenated).

    The bounds are used one-sided: a present min bounds `<`, `<=` from below even when the max
    is absent (an absent stat is an infinite bound, never a wrong one).
    """

    kind: str
    lo: np.ndarray  # int64 / float64 / object
    hi: np.ndarray
    has_lo: np.ndarray  # bool: lo is a usable lower bound of the non-null values
    has_hi: np.ndarray  # bool: hi is a usable upper bound
    exact_eq: np.ndarray  # bool: min == max, both exact: every non-null value equals lo
    nulls_known: np.ndarray  # bool
    nulls: np.ndarray  # uint64
    num_values: np.ndarray  # uint64
    ulo: np.ndarray | None = None  # KIND_ANYSIGN: the same bounds read unsigned (uint64)
    uhi: np.ndarray | None = None

    @property
    def has(self) -> np.ndarray:
        return self.has_lo & self.has_hi

    @property
    def all_null(self) -> np.ndarray:
        return self.nulls_known & (self.nulls == self.num_values)

    @property
    def no_nulls(self) -> np.ndarray:
        return self.nulls_known & (self.nulls == 0)

    @classmethod
    def concat(cls, parts):
        kind = parts[0].kind
        fields = ["lo", "hi", "has_lo", "has_hi", "exact_eq", "nulls_known", "nulls", "num_values"]
        if parts[0].ulo is not None:
            fields += ["ulo", "uhi"]
        return cls(kind, *(np.concatenate([getattr(p, f) for p in parts]) for f in fields))


def _slot_bytes(pm, col, slot, flag_present, flag_inlined, shift):
    """Verbatim stat bytes for every row group (None where absent), as an object array."""
    ch = pm.chunks[:, col]
    R = len(ch)
    out = np.empty(R, object)
    flags = ch["stat_flags"]
    present = (flags & flag_present) != 0
    if not present.any():
        return out
    inl = present & ((flags & flag_inlined) != 0)
    sizes = (ch["stat_sizes"] >> shift) & 0xF
    slots = ch[slot].astype(L.U64)
    raw = slots.view(np.uint8).reshape(R, 8)
    for r in np.nonzero(inl)[0]:
        out[r] = raw[r, : int(sizes[r]) or 8].tobytes()
    ool = present & ~inl
    if ool.any():
        base = pm.block_offsets + L.block_size(pm.column_count)
        buf = pm._buf
        for r in np.nonzero(ool)[0]:
            ref = int(slots[r])
            at = int(base[r]) + (ref >> L.OOL_LENGTH_BITS)
            out[r] = buf[at : at + (ref & L.OOL_MAX_LENGTH)].tobytes()
    return out


def _fixed_width_values(pm, col, width, dtype):
    """Inline fixed-width stats decoded vectorised; entries not of the right width are unusable."""
    ch = pm.chunks[:, col]
    flags = ch["stat_flags"]
    out = []
    for slot, present, inlined, shift in (
        ("min_stat", L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, 0),
        ("max_stat", L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED, 4),
    ):
        size = (ch["stat_sizes"] >> shift) & 0xF
        ok = ((flags & present) != 0) & ((flags & inlined) != 0) & ((size == width) | (size == 0))
        vals = ch[slot].astype(L.U64)
        if width == 4:
            vals = (vals & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(dtype)
        elif width == 1:
            vals = (vals & np.uint64(0xFF)).astype(np.uint8).view(dtype)
        else:
            vals = vals.view(dtype)
        out.append((vals, ok))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def column_stats(pm, col: int, ctype: ColumnType) -> ColumnStats:
    ch = pm.chunks[:, col]
    flags = ch["stat_flags"]
    R = len(ch)
    nulls_known = (flags & L.STAT_NULL_COUNT_PRESENT) != 0
    nulls = np.where(nulls_known, ch["null_count"], 0).astype(np.uint64)
    num_values = ch["num_values"].astype(np.uint64)
    if not ctype.nullable:
        # A REQUIRED column has no nulls whatever the footer says.
        nulls_known = np.ones(R, bool)
        nulls = np.zeros(R, np.uint64)
    exact = ((flags & L.STAT_MIN_EXACT) != 0) & ((flags & L.STAT_MAX_EXACT) != 0)
    kind, pt = ctype.kind, ctype.physical_type
    if kind == KIND_ANYSIGN:
        width, sdt, udt = (4, np.int32, np.uint32) if pt == L.PT_INT32 else (8, np.int64, np.uint64)
        lo, hi, has_lo, has_hi = _fixed_width_values(pm, col, width, sdt)
        ulo, uhi = lo.view(udt).astype(np.uint64), hi.view(udt).astype(np.uint64)
        lo, hi = lo.astype(np.int64), hi.astype(np.int64)
        # Bounds that are disordered in both readings come from no sane writer.
        bad = has_lo & has_hi & (lo > hi) & (ulo > uhi)
        has_lo, has_hi = has_lo & ~bad, has_hi & ~bad
        eq = has_lo & has_hi & exact & (lo == hi)
        return ColumnStats(kind, lo, hi, has_lo, has_hi, eq, nulls_known, nulls, num_values, ulo, uhi)
    if kind in (KIND_INT, KIND_UINT, KIND_FLOAT):
        if pt == L.PT_BOOLEAN:
            lo, hi, has_lo, has_hi = _fixed_width_values(pm, col, 1, np.uint8)
        elif pt in (L.PT_INT32, L.PT_FLOAT):
            lo, hi, has_lo, has_hi = _fixed_width_values(
                pm, col, 4, np.float32 if pt == L.PT_FLOAT else (np.uint32 if kind == KIND_UINT else np.int32))
        else:
            lo, hi, has_lo, has_hi = _fixed_width_values(pm, col, 8, np.float64 if pt == L.PT_DOUBLE else np.int64)
        if kind == KIND_FLOAT:
            lo, hi = lo.astype(np.float64), hi.astype(np.float64)
            # NaN in stats: the writer's ordering is unknown, so neither bound means anything.
            nan = (has_lo & np.isnan(lo)) | (has_hi & np.isnan(hi))
            has_lo, has_hi = has_lo & ~nan, has_hi & ~nan
        else:
            lo, hi = lo.astype(np.int64), hi.astype(np.int64)
        # min > max cannot come from a sane writer: trust neither.
        bad = has_lo & has_hi & (lo > hi)
        has_lo, has_hi = has_lo & ~bad, has_hi & ~bad
        eq = has_lo & has_hi & exact & (lo == hi)
        return ColumnStats(kind, lo, hi, has_lo, has_hi, eq, nulls_known, nulls, num_values)
    if kind in (KIND_BYTES, KIND_BIGDEC):
        mins = _slot_bytes(pm, col, "min_stat", L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, 0)
        maxs = _slot_bytes(pm, col, "max_stat", L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED, 4)
        if kind == KIND_BIGDEC:
            width = ctype.fixed_byte_len if pt == L.PT_FIXED_LEN_BYTE_ARRAY else None

            def conv(b):
                if b is None or (width is not None and len(b) != width) or not b:
                    return None
                return int.from_bytes(b, "big", signed=True)

            mins = np.array([conv(b) for b in mins] + [0], object)[:-1]
            maxs = np.array([conv(b) for b in maxs] + [0], object)[:-1]
        has_lo = np.fromiter((v is not None for v in mins), bool, R)
        has_hi = np.fromiter((v is not None for v in maxs), bool, R)
        bad = np.fromiter((a is not None and b is not None and a > b for a, b in zip(mins, maxs)), bool, R)
        has_lo, has_hi = has_lo & ~bad, has_hi & ~bad
        eq = has_lo & has_hi & exact & np.fromiter((a == b for a, b in zip(mins, maxs)), bool, R)
        return ColumnStats(kind, mins, maxs, has_lo, has_hi, eq, nulls_known, nulls, num_values)
    z = np.zeros(R, np.int64)
    f = np.zeros(R, bool)
    return ColumnStats(KIND_NONE, z, z, f, f, f, nulls_known, nulls, num_values)
