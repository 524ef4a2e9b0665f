"""What pruning can read from a residual (prune.residual): plain predicates on one column that
bound it (LIKE 'abc%' and substring(s, 1, 3) = 'abc' as a byte range, year(ts) = 2024 as a time
range), or a comparison of two columns. bind.py binds what these return; rules.py evaluates them.
"""

from __future__ import annotations

import datetime as dt

from . import expr as E
from .residual import (TEMPORAL, Compare, Const, Func, InList, Like, Negated, Ref, StartsWith, add_months, like_tokens,
                       substring_args, substring_slice)


# --- approximations for pruning -------------------------------------------------------------


def approx(e, typer):
    """(maybe, always) plain predicates on one column for residual `e`: where `e` is TRUE `maybe`
    is TRUE, where `always` is TRUE `e` is TRUE; None where there is none. Both are null exactly
    where that column is (and so is `e`), which makes NOT e's pair (NOT always, NOT maybe); an IN
    list, never null, has an `always` that is FALSE (not null) there for the same reason."""
    if isinstance(e, Negated):
        m, a = approx(e.child, typer)
        return (None if a is None else E.Not(a)), (None if m is None else E.Not(m))
    if isinstance(e, StartsWith):
        e = Like(e.arg, e.prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",
                 False, "\\")
    if isinstance(e, Like) and isinstance(e.arg, Ref) and not e.ignore_case and typer(e.arg.column,
                                                                                      e.arg.exact) == "str":
        prefix, rest = _prefix(like_tokens(e.pattern, e.escape))
        c = e.arg
        if rest == "exact":
            p = E.Cmp(c.column, "==", prefix, c.exact)
            return p, p
        m = _starts(c, prefix)
        return m, (m if rest == "rest" else None)
    if isinstance(e, Compare):
        return _substring_compare(e, typer) or _trunc_compare(e, typer)
    if isinstance(e, InList):
        return _substring_in(e, typer)
    return None, None


def _starts(c, prefix):
    """c starts with prefix, as the byte range [prefix, next) (None for an empty prefix): a
    truncated min is still <= every value and a truncated max still >= every value (Parquet), so
    min/max bounds stay sound for both sides."""
    if not prefix:
        return None
    lo = prefix.encode("utf-8")
    hi = next_prefix(lo)
    m = E.Cmp(c.column, ">=", lo, c.exact)
    return m if hi is None else E.And((m, E.Cmp(c.column, "<", hi, c.exact)))


_NEVER = object()


def _substring_equals(v, lit, typer):
    """substring(c, ...) = lit as a plain predicate on c where the substring is c's first n
    characters: c starts with lit (n characters), c is lit (fewer), _NEVER (more); else None."""
    if not (isinstance(v, Func) and v.name == "substring" and isinstance(v.args[0], Ref)) or not isinstance(lit, str):
        return None
    c = v.args[0]
    begin, n = substring_slice(*substring_args(v.args))
    if begin != 0 or n is None or typer(c.column, c.exact) != "str":
        return None
    if len(lit) > n:
        return _NEVER
    return _starts(c, lit) if len(lit) == n else E.Cmp(c.column, "==", lit, c.exact)


def _substring_compare(e, typer):
    left, op, right = e.left, e.op, e.right
    if isinstance(left, Const):
        left, op, right = right, _FLIP[op], left
    if op not in ("==", "!=") or not isinstance(right, Const):
        return None
    p = _substring_equals(left, right.value, typer)
    if p is None or p is _NEVER:
        return None
    return (p, p) if op == "==" else (E.Not(p), E.Not(p))


def _substring_in(e, typer):
    """substring(c, ...) IN (...): the OR of its equalities; `always` is FALSE where c is null."""
    if None in e.values:
        return None, None
    ps = [_substring_equals(e.arg, v, typer) for v in e.values]
    ps = [p for p in ps if p is not _NEVER]
    if not ps or any(p is None for p in ps):
        return None, None
    m = ps[0] if len(ps) == 1 else E.Or(tuple(ps))
    c = e.arg.args[0]
    return m, E.And((m, E.IsNotNull(c.column, c.exact)))


_FLIP = E.FLIP_OP


def _trunc_compare(e, typer):
    """year(x) op Y and date_trunc('u', x) op T as ranges of x (T on a unit boundary)."""
    left, op, right = e.left, e.op, e.right
    if isinstance(left, Const):
        left, op, right = right, _FLIP[op], left
    if not (isinstance(left, Func) and isinstance(right, Const)) or op == "!=":
        return None, None
    if left.name == "year" and isinstance(right.value, int) and not isinstance(right.value, bool):
        unit, arg = "year", left.args[0]
        if not 1 <= right.value <= 9998:
            return None, None
        start = dt.datetime(right.value, 1, 1)
    elif left.name == "date_trunc" and isinstance(left.args[0], Const) and isinstance(right.value, dt.date):
        unit, arg, start = left.args[0].value.lower(), left.args[1], right.value
        if not isinstance(start, dt.datetime):
            start = dt.datetime(start.year, start.month, start.day)
        if start.tzinfo is not None:
            start = start.astimezone(dt.timezone.utc).replace(tzinfo=None)
        if _floor(start, unit) != start:
            return None, None
    else:
        return None, None
    if not isinstance(arg, Ref):
        return None, None
    t = typer(arg.column, arg.exact)
    if t not in TEMPORAL:
        return None, None
    try:
        end = _step(start, unit)
    except (OverflowError, ValueError):
        return None, None
    # A TIMESTAMP's fields are read in its time zone, unknown here: a day of slack either way
    # covers every zone offset (a DATE has none).
    slack = dt.timedelta(days=1) if t == "timestamp" else dt.timedelta(0)
    rng = {"==": (start, end), "<": (None, start), "<=": (None, end), ">": (end, None), ">=": (start, None)}[op]
    col = arg

    def between(lo, hi):
        parts = []
        if lo is not None:
            parts.append(E.Cmp(col.column, ">=", _as(lo, t), col.exact))
        if hi is not None:
            parts.append(E.Cmp(col.column, "<", _as(hi, t), col.exact))
        if lo is not None and hi is not None and lo >= hi:
            return None
        return parts[0] if len(parts) == 1 else E.And(tuple(parts))

    lo, hi = rng
    try:
        m = between(lo and lo - slack, hi and hi + slack)
        a = between(lo and lo + slack, hi and hi - slack)
    except OverflowError:
        return None, None
    return m, a


def _as(v, t):
    return v.date() if t == "date" and v.time() == dt.time() else v


def _floor(v: dt.datetime, unit):
    if unit == "year":
        return v.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "quarter":
        return v.replace(month=(v.month - 1) // 3 * 3 + 1, day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "month":
        return v.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "week":
        d = v.replace(hour=0, minute=0, second=0, microsecond=0)
        return d - dt.timedelta(days=d.weekday())  # ISO weeks start on Monday
    keep = {"day": 3, "hour": 4, "minute": 5, "second": 6}[unit]
    parts = [v.year, v.month, v.day, v.hour, v.minute, v.second][:keep] + [0] * (6 - keep)
    return dt.datetime(*parts)


def _step(v: dt.datetime, unit):
    if unit in ("year", "quarter", "month"):
        return add_months(v, {"year": 12, "quarter": 3, "month": 1}[unit])
    return v + {"week": dt.timedelta(weeks=1), "day": dt.timedelta(days=1), "hour": dt.timedelta(hours=1),
                "minute": dt.timedelta(minutes=1), "second": dt.timedelta(seconds=1)}[unit]


def column_pair(e):
    """(left column Ref, op, right column Ref, negated) of `a op b` between two columns, else None."""
    neg = isinstance(e, Negated)
    if neg:
        e = e.child
    if isinstance(e, Compare) and isinstance(e.left, Ref) and isinstance(e.right, Ref):
        return e.left, e.op, e.right, neg
    return None


def _prefix(tokens):
    """(literal prefix, what follows is only '%'s: 'rest' / nothing at all: 'exact' / other)."""
    k = 0
    while k < len(tokens) and tokens[k][0] == "lit":
        k += 1
    prefix = "".join(t[1] for t in tokens[:k])
    rest = tokens[k:]
    return prefix, ("exact" if not rest else "rest" if all(t[0] == "%" for t in rest) else "other")


def next_prefix(b: bytes) -> bytes | None:
    """The least byte string above every string starting with b (None: there is none)."""
    b = b.rstrip(b"\xff")
    return b[:-1] + bytes([b[-1] + 1]) if b else None
