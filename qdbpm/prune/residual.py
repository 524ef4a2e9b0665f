"""Residual predicates: the parts of a SQL WHERE clause that are not `column op literal`.

Column-vs-column comparisons, arithmetic, CAST, LIKE, scalar functions, IS [NOT] DISTINCT FROM,
CASE. Nodes are immutable, hashable and picklable like expr.py's; `Value` nodes compute a value
per row, `Residual` nodes are predicates (expr.Expr, so &, |, ~, columns() and resolve() work).

A residual is evaluated exactly by prune.arrow (pyarrow.compute, SQL three-valued logic) and
prunes nothing on its own (MAYBE, never ALWAYS), except where prune.approx gives a provable
range or a column pair. `check` types a residual against a column typer: the one
set of rules deciding what the exact filter can evaluate, run by bind (before any I/O) and by
arrow, so an unsupported function or cast is one PredicateError.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from dataclasses import dataclass, fields, replace

from . import expr as E
from .names import Names
from ..errors import PredicateError

# Abstract value types shared by the checker, the binder (from _pm column types) and arrow.py.
NUMERIC = ("int", "decimal", "float")
TEMPORAL = ("date", "timestamp")
TRUNC_UNITS = ("year", "quarter", "month", "week", "day", "hour", "minute", "second")
DATE_TRUNC_UNITS = TRUNC_UNITS[:5]  # a DATE has no time of day to truncate
# CAST target -> source types the exact filter converts as DuckDB does.
CASTS = {"DOUBLE": ("int", "float", "decimal"), "BIGINT": ("int", "bool", "float"),
         "VARCHAR": ("str", "int", "bool", "date"), "DATE": ("date", "timestamp", "str"),
         "TIMESTAMP": ("date", "timestamp", "str"), "BOOLEAN": ("bool",)}
INT_BITS = {"BIGINT": 64, "INTEGER": 32, "SMALLINT": 16, "TINYINT": 8}  # a value outside raises, as in DuckDB
CASTS.update(dict.fromkeys(("INTEGER", "SMALLINT", "TINYINT"), CASTS["BIGINT"]))
FUNCTIONS = {"year": 1, "month": 1, "day": 1, "date_trunc": 2, "lower": 1, "upper": 1, "abs": 1, "length": 1,
             "coalesce": None}
# substring(s, start[, length]) (alias substr): start and length are literal integers in the range
# DuckDB accepts (it refuses others), so the exact filter slices every row alike.
SUBSTRING_NAMES = ("substring", "substr")
SUBSTRING_RANGE = (-(1 << 32), (1 << 32) - 1)


class Node:
    """Walks the dataclass fields of a residual or value node (columns, resolve)."""

    __slots__ = ()

    def columns(self) -> set:
        out = set()
        _collect(self, out)
        return out

    def resolve(self, names):
        return _resolve(self, names if isinstance(names, Names) else Names(names))


class Value(Node):
    """A value computed per row (not a predicate)."""

    __slots__ = ()


@dataclass(frozen=True)
class Ref(Value):
    column: str
    exact: bool = E.exact_name()


@dataclass(frozen=True)
class Const(Value):
    """A literal: int, float, decimal.Decimal (a SQL `1.5`), str, bool, date, datetime, None."""

    value: object


@dataclass(frozen=True)
class Arith(Value):
    op: str  # + - * /
    left: Value
    right: Value


@dataclass(frozen=True)
class Neg(Value):
    arg: Value


@dataclass(frozen=True)
class Func(Value):
    name: str  # lower case, one of FUNCTIONS
    args: tuple


@dataclass(frozen=True)
class Cast(Value):
    arg: Value
    to: str  # a CASTS key, or "DECIMAL(p,s)"


@dataclass(frozen=True)
class Condition(Value):
    """A condition as a BOOLEAN value (a CASE result): TRUE, FALSE or NULL."""

    cond: E.Expr


@dataclass(frozen=True)
class Case(Value):
    whens: tuple  # ((condition Expr, Value), ...)
    default: Value  # Const(None) without ELSE


class Residual(Node, E.Expr):
    """A predicate the pruning rules do not read directly."""

    __slots__ = ()
    residual = True

    def negated(self) -> E.Expr:
        return Negated(self)


@dataclass(frozen=True)
class Compare(Residual):
    left: Value
    op: str  # expr.OPS
    right: Value


@dataclass(frozen=True)
class Like(Residual):
    arg: Value
    pattern: str
    ignore_case: bool = False
    escape: str | None = None


@dataclass(frozen=True)
class StartsWith(Residual):
    arg: Value
    prefix: str


@dataclass(frozen=True)
class Distinct(Residual):
    """left IS DISTINCT FROM right: never null (NaN is distinct from everything, as with !=)."""

    left: Value
    right: Value


@dataclass(frozen=True)
class InList(Residual):
    """value IN (literals), with expr.In's semantics: never null."""

    arg: Value
    values: tuple


@dataclass(frozen=True)
class IsNullOf(Residual):
    arg: Value


@dataclass(frozen=True)
class Truth(Residual):
    """A BOOLEAN value as a condition (a CASE, coalesce(flag, FALSE), ...)."""

    arg: Value


@dataclass(frozen=True)
class Negated(Residual):
    child: Residual

    def negated(self):
        return self.child


def _collect(x, out):
    if isinstance(x, Ref):
        out.add(x.column)
    elif isinstance(x, Node):
        for f in fields(x):
            _collect(getattr(x, f.name), out)
    elif isinstance(x, E.Expr):
        out |= x.columns()
    elif isinstance(x, tuple):
        for y in x:
            _collect(y, out)


def _resolve(x, names):
    if isinstance(x, Ref):
        return Ref(names.names[names.index(x.column, x.exact)])
    if isinstance(x, Node):
        return replace(x, **{f.name: _resolve(getattr(x, f.name), names) for f in fields(x) if f.compare})
    if isinstance(x, E.Expr):
        return x.resolve(names)
    if isinstance(x, tuple):
        return tuple(_resolve(y, names) for y in x)
    return x


# --- types ----------------------------------------------------------------------------------


def const_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, decimal.Decimal):
        return "decimal"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, dt.datetime):
        return "timestamp"
    if isinstance(v, dt.date):
        return "date"
    if isinstance(v, bytes):
        return "bytes"
    return "other"


def unify(a: str, b: str, what) -> str:
    """The type two values are compared (or combined) in, else a PredicateError."""
    if a == "null":
        return b
    if b == "null" or a == b:
        return a
    if a in NUMERIC and b in NUMERIC:
        return "float" if "float" in (a, b) else "decimal"
    if a in TEMPORAL and b in TEMPORAL:
        return "timestamp"
    raise PredicateError(f"{what}: cannot compare or combine {a.upper()} with {b.upper()}")


def parse_temporal(s: str, t: str):
    """A string literal meeting a DATE / TIMESTAMP value (as DuckDB casts it)."""
    try:
        if t == "date" and len(s.strip()) == 10:
            return dt.date.fromisoformat(s.strip())
        return dt.datetime.fromisoformat(s.strip().replace("Z", "+00:00"))
    except ValueError:
        raise PredicateError(f"{s!r} is not an ISO-8601 {t.upper()}") from None


def check(e, typer, check_expr=lambda e: None) -> str | None:
    """The type of value `e` ("bool" for a predicate), raising PredicateError where the exact
    filter cannot evaluate it. typer(name, exact) -> the column's type (NUMERIC, TEMPORAL, "str",
    "bytes", "bool" or "other"); check_expr(e) validates a plain predicate inside a residual."""
    if isinstance(e, Ref):
        return typer(e.column, e.exact)
    if isinstance(e, Const):
        return const_type(e.value)
    if isinstance(e, Residual):
        _check_pred(e, typer, check_expr)
        return "bool"
    if isinstance(e, E.Expr):
        check_expr(e)
        return "bool"
    if isinstance(e, (Arith, Neg)):
        ts = [check(a, typer, check_expr) for a in ((e.left, e.right) if isinstance(e, Arith) else (e.arg,))]
        for t in ts:
            if t not in NUMERIC and t != "null":
                raise PredicateError(f"arithmetic on {t.upper()} is not supported (INTERVAL arithmetic folds on "
                                     f"DATE / TIMESTAMP literals only): {e!r}")
        if isinstance(e, Arith) and e.op == "/":
            return "float"  # SQL / on numbers is a DOUBLE division (as DuckDB)
        out = ts[0]
        for t in ts[1:]:
            out = unify(out, t, e)
        return "int" if out == "null" else out
    if isinstance(e, Func):
        return _check_func(e, typer, check_expr)
    if isinstance(e, Cast):
        src = check(e.arg, typer, check_expr)
        if e.to.startswith("DECIMAL"):
            ok = src in ("int", "decimal", "null")
        else:
            ok = src in CASTS[e.to] or src == "null"
        if not ok:
            raise PredicateError(f"CAST of {src.upper()} AS {e.to} is not supported by the exact filter")
        if e.to.startswith("DECIMAL") or e.to in INT_BITS:
            return "decimal" if e.to.startswith("DECIMAL") else "int"
        return {"DOUBLE": "float", "VARCHAR": "str", "DATE": "date", "TIMESTAMP": "timestamp", "BOOLEAN": "bool"}[e.to]
    if isinstance(e, Condition):
        return check(e.cond, typer, check_expr)
    if isinstance(e, Case):
        for cond, _ in e.whens:
            check(cond, typer, check_expr)
        return _common([v for _, v in e.whens] + [e.default], typer, check_expr, "CASE")
    raise PredicateError(f"not a value: {e!r}")


def _common(values, typer, check_expr, what) -> str:
    ts = [check(v, typer, check_expr) for v in values]
    known = [t for t, v in zip(ts, values) if not (isinstance(v, Const) and isinstance(v.value, str))]
    out = "null"
    for t in known:
        out = unify(out, t, what)
    for t, v in zip(ts, values):
        if t == "str" and isinstance(v, Const):
            if out in TEMPORAL:
                parse_temporal(v.value, out)
            else:
                out = unify(out, "str", what)
    return out


def _check_func(e, typer, check_expr):
    ts = [check(a, typer, check_expr) for a in e.args]
    n = e.name
    if n in ("year", "month", "day"):
        _want(e, ts[0], TEMPORAL)
        return "int"
    if n == "date_trunc":
        unit = e.args[0].value if isinstance(e.args[0], Const) else None
        _want(e, ts[1], TEMPORAL)
        if not isinstance(unit, str) or unit.lower() not in (DATE_TRUNC_UNITS if ts[1] == "date" else TRUNC_UNITS):
            raise PredicateError(f"date_trunc takes a literal unit, one of {', '.join(TRUNC_UNITS)} "
                                 f"(a DATE: {', '.join(DATE_TRUNC_UNITS)}): {e!r}")
        return ts[1]
    if n in ("lower", "upper"):
        return _want(e, ts[0], ("str",))
    if n == "length":
        _want(e, ts[0], ("str",))
        return "int"
    if n == "abs":
        return _want(e, ts[0], NUMERIC)
    if n == "coalesce":
        return _common(list(e.args), typer, check_expr, "coalesce")
    if n == "substring":
        substring_args(e.args)
        return _want(e, ts[0], ("str",))
    raise PredicateError(f"unknown function {n}")


def substring_args(args) -> tuple:
    """(start, length or None) of substring(s, start[, length]), else PredicateError."""
    lo, hi = SUBSTRING_RANGE
    if len(args) not in (2, 3):
        raise PredicateError(f"substring() takes 2 or 3 arguments, not {len(args)}")
    out = [a.value if isinstance(a, Const) else None for a in args[1:]]
    if any(type(v) is not int or not lo <= v <= hi for v in out):
        raise PredicateError(f"substring() takes a string, then a start and an optional length that are "
                             f"literal integers from {lo} to {hi}: {args!r}")
    return out[0], (out[1] if len(out) == 2 else None)


def substring_slice(start: int, length: int | None) -> tuple:
    """substring(s, start[, length]) as the Python slice s[begin:end] (end None: to the end), as
    DuckDB computes it: the characters at 1-based positions [start, start + length) ([start +
    length, start) for a negative length), a negative start counting from the end (-1 is the
    last character); positions outside the string are dropped. Python's negative indices count
    from the end the same way and clamp at the start as the window is clipped."""
    if length is None:
        length = SUBSTRING_RANGE[1]  # DuckDB's own: past the end of any string from any start but the least
    lo, hi = (start, start + length) if length >= 0 else (start + length, start)
    if start >= 0:
        lo = max(lo, 1)
        return (lo - 1, hi - 1) if hi > lo else (0, 0)
    # from the end: position n + 1 + k is Python's index k (k < 0); hi >= 0 is past the end
    return (lo, hi if hi < 0 else None) if hi > lo else (0, 0)


def _want(e, t, allowed):
    if t not in allowed and t != "null":
        raise PredicateError(f"{e.name}() takes {' or '.join(a.upper() for a in allowed)}, not {t.upper()}: {e!r}")
    return t


def _check_pred(e, typer, check_expr):
    if isinstance(e, Negated):
        _check_pred(e.child, typer, check_expr)
    elif isinstance(e, (Compare, Distinct)):
        _common([e.left, e.right], typer, check_expr, e)
    elif isinstance(e, InList):
        _common([e.arg] + [Const(v) for v in e.values if v is not None], typer, check_expr, e)
    elif isinstance(e, (Like, StartsWith)):
        t = check(e.arg, typer, check_expr)
        if t not in ("str", "null"):
            raise PredicateError(f"{'LIKE' if isinstance(e, Like) else 'starts_with'} takes a string, not "
                                 f"{t.upper()}: {e!r}")
    elif isinstance(e, IsNullOf):
        check(e.arg, typer, check_expr)
    elif isinstance(e, Truth):
        t = check(e.arg, typer, check_expr)
        if t not in ("bool", "null"):
            raise PredicateError(f"a {t.upper()} value is not a condition: {e.arg!r}")


# --- LIKE patterns --------------------------------------------------------------------------


def like_tokens(pattern: str, escape: str | None) -> list:
    """The pattern as ("lit", ch) / ("%",) / ("_",) tokens (no escape character unless given)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape:
            if i + 1 == len(pattern):
                raise PredicateError(f"LIKE pattern {pattern!r} ends with its ESCAPE character")
            out.append(("lit", pattern[i + 1]))
            i += 2
            continue
        out.append((c,) if c in "%_" else ("lit", c))
        i += 1
    return out


def arrow_like_pattern(pattern: str, escape: str | None) -> str:
    """The pattern in pyarrow's match_like syntax, whose escape character is a backslash."""
    return "".join(("\\" + t[1] if t[1] in "%_\\" else t[1]) if t[0] == "lit" else t[0]
                   for t in like_tokens(pattern, escape))


def add_months(v, n: int):
    """v plus n months, the day clamped to the month's last (as SQL INTERVAL arithmetic)."""
    m = v.month - 1 + n
    y, m = v.year + m // 12, m % 12 + 1
    last = (dt.date(y + (m == 12), m % 12 + 1, 1) - dt.timedelta(days=1)).day
    return v.replace(year=y, month=m, day=min(v.day, last))


_TYPE_NAME = re.compile(r"^(?P<name>[A-Z][A-Z0-9 ]*?)\s*(?:\(\s*(?P<p>\d+)\s*(?:,\s*(?P<s>\d+)\s*)?\))?$")
_CAST_NAMES = {"DOUBLE": "DOUBLE", "FLOAT8": "DOUBLE", "DOUBLE PRECISION": "DOUBLE", "BIGINT": "BIGINT",
               "INT8": "BIGINT", "LONG": "BIGINT", "INTEGER": "INTEGER", "INT": "INTEGER", "INT4": "INTEGER",
               "SMALLINT": "SMALLINT", "INT2": "SMALLINT", "TINYINT": "TINYINT", "INT1": "TINYINT",
               "VARCHAR": "VARCHAR", "TEXT": "VARCHAR", "STRING": "VARCHAR", "DATE": "DATE", "TIMESTAMP": "TIMESTAMP",
               "BOOLEAN": "BOOLEAN", "BOOL": "BOOLEAN"}


def cast_int(v: int, to: str) -> int:
    """An integer literal CAST to integer type `to` (an INT_BITS key): itself, or a PredicateError
    where it lies outside that type, as DuckDB refuses it."""
    half = 1 << (INT_BITS[to] - 1)
    if not -half <= v < half:
        raise PredicateError(f"CAST({v} AS {to}): {v} is out of {to}'s range [{-half}, {half - 1}]")
    return v


def cast_type(text: str) -> str:
    """The CAST target as a CASTS key or DECIMAL(p,s); PredicateError for any other type."""
    m = _TYPE_NAME.match(text.upper().strip())
    name = m and m.group("name").strip()
    if name in ("DECIMAL", "NUMERIC"):
        p, s = int(m.group("p") or 18), int(m.group("s") or 3)
        if not 1 <= p <= 76 or s > p:
            raise PredicateError(f"bad DECIMAL({p},{s}) in CAST")
        return f"DECIMAL({p},{s})"
    if name in _CAST_NAMES and m.group("p") is None:
        return _CAST_NAMES[name]
    raise PredicateError(f"CAST AS {text} is not supported: one of DOUBLE, BIGINT (INTEGER, ...), VARCHAR, DATE, "
                         f"TIMESTAMP, BOOLEAN, DECIMAL(p,s)")
