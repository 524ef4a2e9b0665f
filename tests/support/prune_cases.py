"""Random Parquet tables and predicates over them, for the pruning property tests
(tests/prune/test_prune_property.py, tests/prune/test_classify.py): every type qdbpm prunes,
nulls, NaN, +-0.0, extremes and long strings, clustered so that pruning means something; and
the truncated string stats a writer with a stats length limit writes."""

import dataclasses
import datetime as dt
import decimal
import uuid

import numpy as np
import pyarrow as pa
from hypothesis import strategies as st

from qdbpm import col
from qdbpm.pm import layout as L
from qdbpm.pm.description import ByteRefs

# --- column types and their values ------------------------------------------------------------

I = lambda bits: st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)  # noqa: E731
U = lambda bits: st.integers(0, (1 << bits) - 1)  # noqa: E731
floats64 = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1.5, -1.5]))
floats32 = st.one_of(st.floats(width=32, allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0]))
base_ts = st.integers(-(10 ** 12), 10 ** 12)
text = st.one_of(st.text(max_size=6), st.text(min_size=20, max_size=80), st.sampled_from(["", "a", "ab", "b", "é", "zz"]))
blobs = st.one_of(st.binary(max_size=6), st.binary(min_size=20, max_size=60), st.sampled_from([b"", b"\x00", b"\xff"]))


def _dec(p, s):
    return st.integers(-(10 ** p) + 1, 10 ** p - 1).map(lambda v: decimal.Decimal(v).scaleb(-s, decimal.Context(prec=100)))


TYPES = {
    "int8": (pa.int8(), I(8)),
    "int16": (pa.int16(), I(16)),
    "int32": (pa.int32(), I(32)),
    "int64": (pa.int64(), I(64)),
    "uint8": (pa.uint8(), U(8)),
    "uint16": (pa.uint16(), U(16)),
    "uint32": (pa.uint32(), U(32)),
    "uint64": (pa.uint64(), U(64)),
    "float32": (pa.float32(), floats32),
    "float64": (pa.float64(), floats64),
    "ts_ms": (pa.timestamp("ms"), base_ts),
    "ts_us_utc": (pa.timestamp("us", tz="UTC"), base_ts),
    "ts_ns": (pa.timestamp("ns"), base_ts),
    "ts_s": (pa.timestamp("s"), st.integers(-(10 ** 9), 10 ** 9)),
    "date32": (pa.date32(), st.integers(-100_000, 100_000)),
    "dec9_2": (pa.decimal128(9, 2), _dec(9, 2)),
    "dec30_4": (pa.decimal128(30, 4), _dec(30, 4)),
    "dec50_0": (pa.decimal256(50, 0), _dec(50, 0)),
    "string": (pa.string(), text),
    "binary": (pa.binary(), blobs),
    "fixed4": (pa.binary(4), st.binary(min_size=4, max_size=4)),
    "bool": (pa.bool_(), st.booleans()),
    "uuid": (pa.uuid(), st.uuids().map(lambda u: u.bytes)),
}


def _literal_for(tname, v):
    """A predicate literal in the user's vocabulary for a raw column value."""
    t = TYPES[tname][0]
    if pa.types.is_timestamp(t):
        unit = t.unit
        return np.datetime64(int(v), unit) if unit != "s" else np.datetime64(int(v), "s")
    if pa.types.is_date32(t):
        return dt.date(1970, 1, 1) + dt.timedelta(days=int(v))
    if tname == "uuid":
        return uuid.UUID(bytes=v)
    return v


@st.composite
def datasets(draw):
    names = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=4, unique=True))
    n = draw(st.integers(0, 240))
    rg_size = draw(st.integers(1, 60))
    sort_first = draw(st.booleans())
    cols = {}
    for name in names:
        t, values = TYPES[name]
        null_p = draw(st.sampled_from([0.0, 0.0, 0.1, 0.5, 1.0]))
        # Clustered values make pruning meaningful: few distinct values per table.
        pool = draw(st.lists(values, min_size=1, max_size=12))
        vals = [None if draw(st.floats(0, 1)) < null_p else draw(st.sampled_from(pool)) for _ in range(n)] \
            if n <= 40 else _bulk(draw, pool, n, null_p)
        cols[name] = (vals, pool)
    if sort_first and names:
        first = names[0]
        vals = cols[first][0]
        non_null = sorted((v for v in vals if v is not None and v == v), key=_key)
        cols[first] = (non_null + [v for v in vals if v is None or v != v], cols[first][1])
    arrays = {}
    for name in names:
        t, _ = TYPES[name]
        vals = cols[name][0]
        if name == "uuid":
            arrays[name] = pa.ExtensionArray.from_storage(t, pa.array(vals, pa.binary(16)))
        else:
            arrays[name] = pa.array(vals, t)
    table = pa.table(arrays) if arrays else pa.table({})
    truncate = draw(st.booleans())
    return table, rg_size, {k: v[1] for k, v in cols.items()}, truncate


def _key(v):
    return (0, v) if not isinstance(v, (bytes, str)) else (1, v)


def _bulk(draw, pool, n, null_p):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    # runs of equal values, so row groups have narrow ranges
    out, i = [], 0
    while i < n:
        run = int(rng.integers(1, 30))
        v = pool[int(rng.integers(0, len(pool)))]
        out.extend([None if rng.random() < null_p else v for _ in range(min(run, n - i))])
        i += run
    return out


@st.composite
def predicates(draw, names, pools, depth=0):
    if depth < 2 and draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(["and", "or", "not"]))
        if kind == "not":
            return ~draw(predicates(names, pools, depth + 1))
        a = draw(predicates(names, pools, depth + 1))
        b = draw(predicates(names, pools, depth + 1))
        return (a & b) if kind == "and" else (a | b)
    name = draw(st.sampled_from(names))
    t = TYPES[name][0]
    lit = st.one_of(st.sampled_from(pools[name]), TYPES[name][1]).filter(lambda v: v is not None)
    lit = lit.map(lambda v: _literal_for(name, v))
    form = draw(st.sampled_from(["cmp", "cmp", "cmp", "between", "in", "null", "notnull"]))
    c = col(name)
    if form == "null":
        return c.is_null()
    if form == "notnull":
        return c.is_not_null()
    if form == "between":
        return c.between(draw(lit), draw(lit))
    if form == "in":
        vals = draw(st.lists(st.one_of(lit, st.none()) if draw(st.booleans()) else lit, min_size=1, max_size=4))
        return c.isin(vals)
    op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="] if not pa.types.is_boolean(t) else ["==", "!="]))
    v = draw(lit)
    return {"==": c == v, "!=": c != v, "<": c < v, "<=": c <= v, ">": c > v, ">=": c >= v}[op]


def truncate_string_stats(desc, footer, width=8):
    """What a writer with a stats length limit writes: min cut to a prefix, max cut and its last
    byte incremented, both flagged inexact."""
    if desc.stats is None:
        return desc
    objs = np.empty(desc.stats.length.shape, object)
    chunks = desc.chunks.copy()
    for idx in np.ndindex(objs.shape):
        objs[idx] = desc.stats.get(idx)
    for c, leaf in enumerate(footer.leaves):
        if leaf.physical_type != L.PT_BYTE_ARRAY or (leaf.logical_type and leaf.logical_type[0] == "DECIMAL"):
            continue
        for r in range(objs.shape[0]):
            mn, mx = objs[r, c, 0], objs[r, c, 1]
            if mn is not None and len(mn) > width:
                objs[r, c, 0] = mn[:width]
                chunks[r, c]["stat_flags"] &= np.uint8(0xFF & ~L.STAT_MIN_EXACT)
            if mx is not None and len(mx) > width:
                cut = bytearray(mx[:width])
                while cut and cut[-1] == 0xFF:
                    cut.pop()
                if cut:
                    cut[-1] += 1
                    objs[r, c, 1] = bytes(cut)
                else:
                    objs[r, c, 1] = None  # no finite upper bound: drop the max
                chunks[r, c]["stat_flags"] &= np.uint8(0xFF & ~L.STAT_MAX_EXACT)
    return dataclasses.replace(desc, stats=ByteRefs.from_objects(objs), chunks=chunks)
