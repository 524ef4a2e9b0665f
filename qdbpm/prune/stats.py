"""Typed per-column statistics over all row groups of a `_pm` snapshot, decoded once and cached.

The slot bytes are Parquet-native (pm.stat_decode reads them); how they compare comes from the
physical type and the QuestDB type code (pm.qdb_types.comparison_kind, whose KIND_* names are
used here). A column whose order qdbpm cannot be sure of gets KIND_NONE: no min/max pruning for
it, only null-count rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from . import _bounds, _bytes
from .names import Names
from .literals import Domain
from ..pm import layout as L
from ..pm import qdb_types as Q
from ..pm import stat_decode as SD
from ..pm.description import ByteRefs
from ..pm.qdb_types import KIND_ANYSIGN, KIND_BIGDEC, KIND_BYTES, KIND_FLOAT, KIND_INT, KIND_NONE, KIND_UINT


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

    @cached_property
    def domain(self) -> Domain:
        """What binding a literal to this column needs (prune.literals)."""
        return Domain(self.name, f"{Q.type_name(self.type_code)} on {L.PHYSICAL_TYPE_NAMES[self.physical_type]}",
                      self.kind, self.unit, self.scale, Q.value_form(self.type_code),
                      self.physical_type == L.PT_BOOLEAN)


def column_type(pm_columns, names, i) -> ColumnType:
    c = pm_columns[i]
    pt, tc, flba = int(c["physical_type"]), int(c["type"]), int(c["fixed_byte_len"])
    rep = int(c["max_rep_level"]) > 0
    # Only definition levels encode nulls: a column with none (max_def_level 0) holds no null,
    # whatever its repetition flag or null count say (QuestDB records OPTIONAL and counts its
    # zero bytes as nulls on REQUIRED BYTE / SHORT / CHAR columns).
    nullable = int(c["max_def_level"]) > 0
    kind = Q.comparison_kind(tc, pt, flba)
    if rep:
        kind = KIND_NONE  # a predicate on a list leaf is not a predicate on its values one by one
    dec = Q.decimal_params(tc)
    return ColumnType(names[i], i, pt, tc, flba, kind, Q.unit(tc, pt), None if dec is None else dec[1], nullable, rep)


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
        self._lookup = None  # names.Names, built on first lookup
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
        """The column `name` refers to, by names.Names' rules (exact=False: an unquoted SQL name)."""
        if self._lookup is None:
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


BYTE_OPS = {"<": 0, "<=": 1, ">": 2, ">=": 3, "==": 4}  # _bytes.compare_literal operator codes


def _index_array(a, what, n=None):
    arr = np.ascontiguousarray(a, np.int64)
    if arr.ndim != 1 or (n is not None and len(arr) != n):
        raise ValueError(f"{what} must be 1-D of length {n}, got shape {arr.shape}")
    return arr


class ByteValues(ByteRefs):
    """1-D ByteRefs of R optional byte strings (the stats of a BYTE_ARRAY / FLBA column), checked
    and read-only, ordered as Python orders bytes (unsigned lexicographic, a proper prefix
    first); the comparisons run in the _bytes kernels. Every reference is checked here, once,
    so the kernels need no checks."""

    def __init__(self, data, start, length):
        data = np.ascontiguousarray(data, np.uint8).view()  # own view: made read-only below
        if data.ndim != 1:
            raise ValueError(f"data must be 1-D uint8, got shape {data.shape}")
        start = _index_array(start, "start")
        length = _index_array(length, "length", len(start))
        present = length >= 0
        bad = present & ((start < 0) | (start > len(data) - length))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"value {i}: (start {int(start[i])}, length {int(length[i])}) is outside the "
                             f"{len(data)}-byte buffer")
        super().__init__(data, np.where(present, start, 0), np.where(present, length, -1))
        for a in (self.data, self.start, self.length):
            a.flags.writeable = False  # validated above: keep it so

    @classmethod
    def of(cls, refs: ByteRefs) -> "ByteValues":
        return cls(refs.data, refs.start, refs.length)

    def __len__(self):
        return len(self.start)

    def __getitem__(self, i):
        return self.get(i)

    def tolist(self):
        return [self.get(i) for i in range(len(self))]

    @property
    def present(self) -> np.ndarray:
        return self.length >= 0

    def _where(self, where):
        w = np.ascontiguousarray(where, np.bool_)
        if w.shape != self.start.shape:
            raise ValueError(f"mask of shape {w.shape} for {len(self)} values")
        return w.view(np.uint8)

    def compare(self, op, literal, where) -> np.ndarray:
        """bool[R]: value_i op literal where `where` (and the value is present), True elsewhere."""
        lit = np.frombuffer(bytes(literal), np.uint8)
        out = np.empty(len(self), np.bool_)
        w = self._where(np.asarray(where, bool) & self.present)
        _bytes.compare_literal(self.data, self.start, self.length, lit, BYTE_OPS[op], w, 1, out.view(np.uint8))
        return out

    def equals(self, literal) -> np.ndarray:
        """bool[R]: value_i == literal (False where absent)."""
        lit = np.frombuffer(bytes(literal), np.uint8)
        out = np.empty(len(self), np.bool_)
        _bytes.compare_literal(self.data, self.start, self.length, lit, BYTE_OPS["=="], self._where(self.present),
                               0, out.view(np.uint8))
        return out

    def compare_pairs(self, other) -> np.ndarray:
        """int8[R]: sign(self_i vs other_i) where both are present, 0 elsewhere."""
        if len(other) != len(self):
            raise ValueError(f"{len(self)} values compared with {len(other)}")
        out = np.empty(len(self), np.int8)
        _bytes.compare_pairs(self.data, self.start, self.length, other.data, other.start, other.length, out)
        return out

    @classmethod
    def concat(cls, parts):
        parts = list(parts)
        if len(parts) == 1:
            return parts[0]
        shift = np.concatenate([[0], np.cumsum([len(p.data) for p in parts])[:-1]]).astype(np.int64)
        data = np.concatenate([p.data for p in parts]) if parts else np.zeros(0, np.uint8)
        start = np.concatenate([p.start + k for p, k in zip(parts, shift)]) if parts else np.zeros(0, np.int64)
        length = np.concatenate([p.length for p in parts]) if parts else np.zeros(0, np.int64)
        return cls(data, start, length)

    def __eq__(self, other):
        return isinstance(other, ByteValues) and self.tolist() == other.tolist()

    __hash__ = None

    def __repr__(self):
        return f"ByteValues({self.tolist()!r})"


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


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
    def all_null(self) -> np.ndarray:
        """Read-only: chunks known to hold nulls only."""
        return _read_only(self.nulls_known & (self.nulls == self.num_values))

    @cached_property
    def no_nulls(self) -> np.ndarray:
        """Read-only: chunks known to hold no null."""
        return _read_only(self.nulls_known & (self.nulls == 0))

    @cached_property
    def any_all_null(self) -> bool:
        return bool(self.all_null.any())

    @cached_property
    def some_value(self) -> np.ndarray:
        """~all_null, read-only: a chunk that may hold a non-null value."""
        return _read_only(~self.all_null)

    @cached_property
    def all_has_lo(self) -> bool:
        return bool(self.has_lo.all())

    @cached_property
    def all_has_hi(self) -> bool:
        return bool(self.has_hi.all())

    @classmethod
    def unknown(cls, kind, n, num_values=None) -> "ColumnStats":
        """Nothing known of a `kind` column over n row groups: no bounds, nulls unknown (prunes
        nothing), with chunk_stats' / column_stats' dtypes; num_values: per row group (default 0)."""
        f = np.zeros(n, bool)
        nv = np.zeros(n, np.uint64) if num_values is None else np.asarray(num_values, np.uint64)
        ulo = uhi = None
        if kind == KIND_BYTES:
            lo = hi = ByteValues(np.zeros(0, np.uint8), np.zeros(n, np.int64), np.full(n, -1, np.int64))
        elif kind == KIND_BIGDEC:
            lo = hi = np.full(n, None, object)
        else:
            lo = hi = np.zeros(n, np.float64 if kind == KIND_FLOAT else np.int64)
            if kind == KIND_ANYSIGN:
                ulo = uhi = np.zeros(n, np.uint64)
        return cls(kind, lo, hi, f, f, f, f, np.zeros(n, np.uint64), nv, ulo, uhi)

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


def column_stats(pm, col: int, ctype: ColumnType) -> ColumnStats:
    """Stats of column `col` of an open `_pm` (pm.chunks, block_offsets, column_count, buffer)."""
    if ctype.kind in (KIND_BYTES, KIND_BIGDEC):
        return _variable_stats(pm, col, ctype)
    return chunk_stats(pm.chunks[:, col], ctype)


def column_records(chunk_arrays, col: int) -> np.ndarray:
    """Column `col` of (R_i, C) chunk-record arrays (e.g. strided views of several mappings),
    concatenated as one (sum R_i,) CHUNK_DTYPE array: one kernel call, not a view per file."""
    n = sum(len(a) for a in chunk_arrays)
    rec = np.empty((n, L.CHUNK_SIZE), np.uint8)
    _bytes.gather_column(list(chunk_arrays), int(col), L.CHUNK_DTYPE, rec)
    return rec.view(L.CHUNK_DTYPE).reshape(n)


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
        sdt, udt = (np.int32, np.uint32) if pt == L.PT_INT32 else (np.int64, np.uint64)
        lo, hi, has_lo, has_hi = SD.inline_values(ch, pt, sdt)
        ulo, uhi = lo.view(udt).astype(np.uint64), hi.view(udt).astype(np.uint64)
        lo, hi = lo.astype(np.int64), hi.astype(np.int64)
        # Bounds that are disordered in both readings come from no sane writer.
        bad = has_lo & has_hi & (lo > hi) & (ulo > uhi)
        has_lo, has_hi = has_lo & ~bad, has_hi & ~bad
        eq = has_lo & has_hi & exact & (lo == hi)
        return ColumnStats(kind, lo, hi, has_lo, has_hi, eq, nulls_known, nulls, num_values, ulo, uhi)
    if kind in (KIND_INT, KIND_UINT, KIND_FLOAT):
        dtype = {L.PT_BOOLEAN: np.uint8, L.PT_FLOAT: np.float32, L.PT_DOUBLE: np.float64, L.PT_INT64: np.int64,
                 L.PT_INT32: np.uint32 if kind == KIND_UINT else np.int32}[pt]
        lo, hi, has_lo, has_hi = SD.inline_values(ch, pt, dtype)
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


_KERNEL_MODES = {KIND_INT: _bounds.MODE_INT, KIND_UINT: _bounds.MODE_UINT, KIND_FLOAT: _bounds.MODE_FLOAT,
                 KIND_ANYSIGN: _bounds.MODE_ANYSIGN}


def chunk_stats_at(buf, at, ctype: ColumnType) -> ColumnStats | None:
    """chunk_stats of the chunk records at byte addresses `at` (int64) of `buf` (a batch's `_pm`
    bytes), read in place by the kernel (prune/_bounds.pyx) in one pass; None for a type the
    kernel does not read (the caller gathers the records for chunk_stats)."""
    mode = _KERNEL_MODES.get(ctype.kind)
    if mode is None or not _bounds.supports(ctype.physical_type, mode):
        return None
    lo, hi, has_lo, has_hi, eq, known, nulls, num, ulo, uhi = _bounds.fixed_bounds(
        buf, np.ascontiguousarray(at, np.int64), ctype.physical_type, mode, ctype.nullable)
    return ColumnStats(ctype.kind, lo, hi, has_lo, has_hi, eq, known, nulls, num, ulo, uhi)


def _variable_stats(pm, col, ctype):
    ool_at = SD.ool_start(np.asarray(pm.block_offsets, np.int64), pm.column_count)
    return variable_stats(pm.chunks[:, col], ool_at, pm.buffer, ctype)


def variable_stats(ch, ool_at, buf, ctype) -> ColumnStats:
    """Stats of a KIND_BYTES / KIND_BIGDEC column from its chunk records `ch` (of one file or of
    many concatenated) and `ool_at`, where each record's block's out-of-line region starts in
    `buf` (the references were checked against their own file when it was opened)."""
    R = len(ch)
    nulls_known, nulls, num_values, exact = _null_stats(ch, ctype)
    kind, pt = ctype.kind, ctype.physical_type
    mins, maxs = SD.column_stat_bytes(ch, pt, ool_at, buf, _bytes.gather)
    if kind == KIND_BYTES:
        mins, maxs = ByteValues.of(mins), ByteValues.of(maxs)
        has_lo, has_hi = mins.present, maxs.present
        sign = mins.compare_pairs(maxs)  # 0 where either is absent
        bad = sign > 0
        has_lo, has_hi = has_lo & ~bad, has_hi & ~bad
        eq = has_lo & has_hi & exact & (sign == 0)
        return ColumnStats(kind, mins, maxs, has_lo, has_hi, eq, nulls_known, nulls, num_values)
    width = ctype.fixed_byte_len if pt == L.PT_FIXED_LEN_BYTE_ARRAY else None

    def conv(refs, i):
        b = refs.get(i)
        if not b or (width is not None and len(b) != width):
            return None
        return SD.decimal_value(b)

    mins = np.array([conv(mins, i) for i in range(R)] + [0], object)[:-1]
    maxs = np.array([conv(maxs, i) for i in range(R)] + [0], object)[:-1]
    has_lo = np.fromiter((v is not None for v in mins), bool, R)
    has_hi = np.fromiter((v is not None for v in maxs), bool, R)
    bad = np.fromiter((a is not None and b is not None and a > b for a, b in zip(mins, maxs)), bool, R)
    has_lo, has_hi = has_lo & ~bad, has_hi & ~bad
    eq = has_lo & has_hi & exact & np.fromiter((a == b for a, b in zip(mins, maxs)), bool, R)
    return ColumnStats(kind, mins, maxs, has_lo, has_hi, eq, nulls_known, nulls, num_values)
