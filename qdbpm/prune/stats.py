"""Typed per-column statistics over all row groups of a `_pm` snapshot, decoded once and cached.

The slot bytes are Parquet-native; the comparison domain comes from the physical type and the
QuestDB type code. Anything whose order qdbpm cannot be sure of gets KIND_NONE: no min/max
pruning for it, only null-count rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..pm import layout as L

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


class _LazyTypes(Sequence):
    """ColumnType of column i built on first access: binding a predicate on 2 columns of a
    1,000-column file decodes 2 descriptors, not 1,000."""

    __slots__ = ("_columns", "_names", "_types")

    def __init__(self, columns, names):
        self._columns, self._names = columns, names
        self._types = [None] * len(names)

    def __len__(self):
        return len(self._types)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        t = self._types[i]
        if t is None:
            t = self._types[i] = column_type(self._columns, self._names, range(len(self._types))[i])
        return t


# Schema.of results by (descriptor bytes, names): the partitions of a table share one Schema
# object, so grouping them and binding a predicate (cached per Schema) cost one lookup each.
_SCHEMAS: dict = {}
_SCHEMAS_MAX = 256


class Schema:
    """Column name -> ColumnType for binding predicates; equal schemas bind identically."""

    def __init__(self, types):
        self._init(list(types))

    def _init(self, types, names=None):
        self.types = types
        names = names if names is not None else [t.name for t in types]
        self._names = names
        self._lookup = None  # expr.Names, built on first lookup
        self._key = None
        self._hash = None
        self.bound = {}  # prune.bind's cache: (expr, literal types) -> bound predicate

    @classmethod
    def of(cls, pm):
        names = tuple(pm.column_names)
        key = (pm.columns.tobytes(), names)
        sch = _SCHEMAS.get(key)
        if sch is None:
            sch = cls.__new__(cls)
            sch._init(_LazyTypes(np.array(pm.columns), list(names)), list(names))
            if len(_SCHEMAS) >= _SCHEMAS_MAX:
                _SCHEMAS.clear()
            _SCHEMAS[key] = sch
        return sch

    def column(self, name, exact=True) -> ColumnType:
        """The column `name` refers to, by expr.Names' rules (exact=False: an unquoted SQL name)."""
        if self._lookup is None:
            from .expr import Names

            self._lookup = Names(self._names)
        return self.types[self._lookup.index(name, exact)]

    def key(self):
        if self._key is None:
            self._key = tuple((t.name, t.physical_type, t.type_code, t.fixed_byte_len, t.kind, t.nullable,
                               t.repeated) for t in self.types)
        return self._key

    def __eq__(self, other):
        return isinstance(other, Schema) and (self is other or self.key() == other.key())

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(self.key())
        return self._hash


BYTE_OPS = {"<": 0, "<=": 1, ">": 2, ">=": 3, "==": 4}  # _prune.compare_literal operator codes


def _index_array(a, what, n=None):
    arr = np.ascontiguousarray(a, np.int64)
    if arr.ndim != 1 or (n is not None and len(arr) != n):
        raise ValueError(f"{what} must be 1-D of length {n}, got shape {arr.shape}")
    return arr


class ByteValues:
    """R optional byte strings packed in one buffer (the stats of a BYTE_ARRAY / FLBA column):
    value i is data[offsets[i] : offsets[i] + lengths[i]], absent where lengths[i] < 0. Ordered
    as Python orders bytes (unsigned lexicographic, a proper prefix first); the comparisons run
    in the _prune kernels. Every reference is checked here, once, so the kernels need no checks.
    """

    __slots__ = ("data", "offsets", "lengths")

    def __init__(self, data, offsets, lengths):
        data = np.ascontiguousarray(data, np.uint8).view()  # own view: made read-only below
        if data.ndim != 1:
            raise ValueError(f"data must be 1-D uint8, got shape {data.shape}")
        offsets = _index_array(offsets, "offsets")
        lengths = _index_array(lengths, "lengths", len(offsets))
        present = lengths >= 0
        bad = present & ((offsets < 0) | (offsets > len(data) - lengths))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"value {i}: (offset {int(offsets[i])}, length {int(lengths[i])}) is outside the "
                             f"{len(data)}-byte buffer")
        self.data = data
        self.offsets = np.where(present, offsets, 0)
        self.lengths = np.where(present, lengths, -1)
        for a in (self.data, self.offsets, self.lengths):
            a.flags.writeable = False  # validated above: keep it so

    def __len__(self):
        return len(self.offsets)

    def __getitem__(self, i):
        n = int(self.lengths[i])
        if n < 0:
            return None
        o = int(self.offsets[i])
        return self.data[o : o + n].tobytes()

    def tolist(self):
        return [self[i] for i in range(len(self))]

    @property
    def present(self) -> np.ndarray:
        return self.lengths >= 0

    def _where(self, where):
        w = np.ascontiguousarray(where, np.bool_)
        if w.shape != self.offsets.shape:
            raise ValueError(f"mask of shape {w.shape} for {len(self)} values")
        return w.view(np.uint8)

    def compare(self, op, literal, where) -> np.ndarray:
        """bool[R]: value_i op literal where `where` (and the value is present), True elsewhere."""
        from . import _bytes as _prune

        lit = np.frombuffer(bytes(literal), np.uint8)
        out = np.empty(len(self), np.bool_)
        w = self._where(np.asarray(where, bool) & self.present)
        _prune.compare_literal(self.data, self.offsets, self.lengths, lit, BYTE_OPS[op], w, 1, out.view(np.uint8))
        return out

    def equals(self, literal) -> np.ndarray:
        """bool[R]: value_i == literal (False where absent)."""
        from . import _bytes as _prune

        lit = np.frombuffer(bytes(literal), np.uint8)
        out = np.empty(len(self), np.bool_)
        _prune.compare_literal(self.data, self.offsets, self.lengths, lit, BYTE_OPS["=="], self._where(self.present),
                               0, out.view(np.uint8))
        return out

    def compare_pairs(self, other) -> np.ndarray:
        """int8[R]: sign(self_i vs other_i) where both are present, 0 elsewhere."""
        from . import _bytes as _prune

        if len(other) != len(self):
            raise ValueError(f"{len(self)} values compared with {len(other)}")
        out = np.empty(len(self), np.int8)
        _prune.compare_pairs(self.data, self.offsets, self.lengths, other.data, other.offsets, other.lengths, out)
        return out

    @classmethod
    def concat(cls, parts):
        parts = list(parts)
        if len(parts) == 1:
            return parts[0]
        shift = np.concatenate([[0], np.cumsum([len(p.data) for p in parts])[:-1]]).astype(np.int64)
        data = np.concatenate([p.data for p in parts]) if parts else np.zeros(0, np.uint8)
        offsets = np.concatenate([p.offsets + k for p, k in zip(parts, shift)]) if parts else np.zeros(0, np.int64)
        lengths = np.concatenate([p.lengths for p in parts]) if parts else np.zeros(0, np.int64)
        return cls(data, offsets, lengths)

    def __eq__(self, other):
        return isinstance(other, ByteValues) and self.tolist() == other.tolist()

    def __repr__(self):
        return f"ByteValues({self.tolist()!r})"


@dataclass
class ColumnStats:
    """One column over R row groups (one file, or several files concatenated).

    The bounds are used one-sided: a present min bounds `<`, `<=` from below even when the max
    is absent (an absent stat is an infinite bound, never a wrong one). The derived masks below
    are computed once: treat a ColumnStats as immutable.
    """

    kind: str
    lo: np.ndarray  # int64 / float64 / object (Python ints, KIND_BIGDEC) / ByteValues (KIND_BYTES)
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

    @cached_property
    def _all_null(self) -> np.ndarray:
        return self.nulls_known & (self.nulls == self.num_values)

    @cached_property
    def _no_nulls(self) -> np.ndarray:
        return self.nulls_known & (self.nulls == 0)

    @property
    def all_null(self) -> np.ndarray:
        return self._all_null.copy()

    @property
    def no_nulls(self) -> np.ndarray:
        return self._no_nulls.copy()

    @cached_property
    def any_all_null(self) -> bool:
        return bool(self._all_null.any())

    @cached_property
    def some_value(self) -> np.ndarray:
        """~all_null, read-only: a chunk that may hold a non-null value."""
        m = ~self._all_null
        m.flags.writeable = False
        return m

    @cached_property
    def all_has_lo(self) -> bool:
        return bool(self.has_lo.all())

    @cached_property
    def all_has_hi(self) -> bool:
        return bool(self.has_hi.all())

    @classmethod
    def concat(cls, parts):
        kind = parts[0].kind
        fields = ["lo", "hi", "has_lo", "has_hi", "exact_eq", "nulls_known", "nulls", "num_values"]
        if parts[0].ulo is not None:
            fields += ["ulo", "uhi"]

        def cat(f):
            vals = [getattr(p, f) for p in parts]
            if isinstance(vals[0], ByteValues):
                return ByteValues.concat(vals)
            return np.concatenate(vals)

        return cls(kind, *(cat(f) for f in fields))


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


def _byte_values(pm, col):
    """(min, max) ByteValues sharing one buffer: the verbatim stat bytes, as _slot_bytes reads them
    (inline: the slot's first STAT_SIZES-nibble bytes, 8 when 0; out-of-line: the referenced
    bytes of the block's OOL region), gathered by one kernel call instead of a loop per row."""
    from . import _bytes as _prune

    ch = pm.chunks[:, col]
    R = len(ch)
    flags = ch["stat_flags"]
    sizes = ch["stat_sizes"]
    raw = np.empty((2, R), L.U64)
    raw[0] = ch["min_stat"]
    raw[1] = ch["max_stat"]
    offsets = np.zeros((2, R), np.int64)
    lengths = np.full((2, R), -1, np.int64)
    src = np.zeros((2, R), np.int64)
    ool = np.zeros((2, R), bool)
    base = None
    rows = np.arange(R, dtype=np.int64)
    for k, (flag_present, flag_inlined, shift) in enumerate(
        ((L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, 0), (L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED, 4))
    ):
        present = (flags & flag_present) != 0
        inl = present & ((flags & flag_inlined) != 0)
        nib = ((sizes >> shift) & 0xF).astype(np.int64)
        lengths[k] = np.where(inl, np.where(nib == 0, 8, nib), -1)
        offsets[k] = (k * R + rows) * 8  # the slot's bytes in raw
        o = present & ~inl
        if o.any():
            if base is None:
                base = np.asarray(pm.block_offsets, np.int64) + L.block_size(pm.column_count)
            ref = raw[k]
            lengths[k] = np.where(o, (ref & np.uint64(L.OOL_MAX_LENGTH)).astype(np.int64), lengths[k])
            src[k] = np.where(o, base + (ref >> np.uint64(L.OOL_LENGTH_BITS)).astype(np.int64), 0)
            ool[k] = o
    head = raw.view(np.uint8).reshape(-1)
    if ool.any():
        src_o, len_o = src[ool], lengths[ool]
        dst_o = len(head) + np.concatenate([[0], np.cumsum(len_o)[:-1]]).astype(np.int64)
        buf = pm._buf
        if ((src_o < 0) | (src_o > len(buf) - len_o)).any():
            raise ValueError(f"{pm.path}: column {col}: out-of-line stat reference outside the file")  # checked on open
        data = np.empty(len(head) + int(len_o.sum()), np.uint8)
        data[: len(head)] = head
        _prune.gather(buf, src_o, len_o, data, dst_o)
        offsets[ool] = dst_o
    else:
        data = head
    return ByteValues(data, offsets[0], lengths[0]), ByteValues(data, offsets[1], lengths[1])


def _fixed_width_values(ch, width, dtype):
    """Inline fixed-width stats decoded vectorised; entries not of the right width are unusable."""
    flags = ch["stat_flags"]
    stat_sizes = ch["stat_sizes"]
    out = []
    for slot, present, inlined, shift in (
        ("min_stat", L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, 0),
        ("max_stat", L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED, 4),
    ):
        size = (stat_sizes >> shift) & 0xF
        ok = ((flags & (present | inlined)) == (present | inlined)) & ((size == width) | (size == 0))
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
    if ctype.kind in (KIND_BYTES, KIND_BIGDEC):
        return _variable_stats(pm, col, ctype)
    return chunk_stats(pm.chunks[:, col], ctype)


def _null_stats(ch, ctype):
    flags = ch["stat_flags"]
    R = len(ch)
    nulls_known = (flags & L.STAT_NULL_COUNT_PRESENT) != 0
    nulls = np.where(nulls_known, ch["null_count"], 0).astype(np.uint64)
    num_values = ch["num_values"].astype(np.uint64)
    if not ctype.nullable:
        # A REQUIRED column has no nulls whatever the footer says.
        nulls_known = np.ones(R, bool)
        nulls = np.zeros(R, np.uint64)
    exact = (flags & (L.STAT_MIN_EXACT | L.STAT_MAX_EXACT)) == (L.STAT_MIN_EXACT | L.STAT_MAX_EXACT)
    return nulls_known, nulls, num_values, exact


def chunk_stats(ch, ctype: ColumnType) -> ColumnStats:
    """Stats of a column whose bounds live in the chunk records alone (every kind but KIND_BYTES
    and KIND_BIGDEC): `ch` may be the records of one file or of many concatenated, decoded in
    one vectorised pass either way."""
    kind, pt = ctype.kind, ctype.physical_type
    if kind in (KIND_BYTES, KIND_BIGDEC):
        raise ValueError(f"column {ctype.name!r}: {kind} stats need the out-of-line bytes (column_stats)")
    R = len(ch)
    nulls_known, nulls, num_values, exact = _null_stats(ch, ctype)
    if kind == KIND_ANYSIGN:
        width, sdt, udt = (4, np.int32, np.uint32) if pt == L.PT_INT32 else (8, np.int64, np.uint64)
        lo, hi, has_lo, has_hi = _fixed_width_values(ch, width, sdt)
        ulo, uhi = lo.view(udt).astype(np.uint64), hi.view(udt).astype(np.uint64)
        lo, hi = lo.astype(np.int64), hi.astype(np.int64)
        # Bounds that are disordered in both readings come from no sane writer.
        bad = has_lo & has_hi & (lo > hi) & (ulo > uhi)
        has_lo, has_hi = has_lo & ~bad, has_hi & ~bad
        eq = has_lo & has_hi & exact & (lo == hi)
        return ColumnStats(kind, lo, hi, has_lo, has_hi, eq, nulls_known, nulls, num_values, ulo, uhi)
    if kind in (KIND_INT, KIND_UINT, KIND_FLOAT):
        if pt == L.PT_BOOLEAN:
            lo, hi, has_lo, has_hi = _fixed_width_values(ch, 1, np.uint8)
        elif pt in (L.PT_INT32, L.PT_FLOAT):
            lo, hi, has_lo, has_hi = _fixed_width_values(
                ch, 4, np.float32 if pt == L.PT_FLOAT else (np.uint32 if kind == KIND_UINT else np.int32))
        else:
            lo, hi, has_lo, has_hi = _fixed_width_values(ch, 8, np.float64 if pt == L.PT_DOUBLE else np.int64)
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
    z = np.zeros(R, np.int64)
    f = np.zeros(R, bool)
    return ColumnStats(KIND_NONE, z, z, f, f, f, nulls_known, nulls, num_values)


def _variable_stats(pm, col, ctype):
    ch = pm.chunks[:, col]
    R = len(ch)
    nulls_known, nulls, num_values, exact = _null_stats(ch, ctype)
    kind, pt = ctype.kind, ctype.physical_type
    if kind == KIND_BYTES:
        mins, maxs = _byte_values(pm, col)
        has_lo, has_hi = mins.present, maxs.present
        sign = mins.compare_pairs(maxs)  # 0 where either is absent
        bad = sign > 0
        has_lo, has_hi = has_lo & ~bad, has_hi & ~bad
        eq = has_lo & has_hi & exact & (sign == 0)
        return ColumnStats(kind, mins, maxs, has_lo, has_hi, eq, nulls_known, nulls, num_values)
    mins = _slot_bytes(pm, col, "min_stat", L.STAT_MIN_PRESENT, L.STAT_MIN_INLINED, 0)
    maxs = _slot_bytes(pm, col, "max_stat", L.STAT_MAX_PRESENT, L.STAT_MAX_INLINED, 4)
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
