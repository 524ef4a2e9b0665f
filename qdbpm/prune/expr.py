"""Predicates: an immutable, picklable expression tree, built with `col(...)` or `parse(text)`.

Semantics (what `read_table` filters by and what pruning must never contradict) are those of a
pyarrow dataset filter: Kleene three-valued logic, a comparison with a null is null, and a row
matches only when the whole predicate is TRUE. `isin` never yields null: a null matches only when
None is among the values (so NOT IN is TRUE for nulls otherwise). Comparisons are exact: the
stored value against the literal's exact value (2.5 between integers 2 and 3, a sub-unit
timestamp between two ticks). BETWEEN with reversed bounds swaps them (as QuestDB's reference
pruning does). NaN compares FALSE with everything except !=. TRUE / FALSE compare only with a
BOOLEAN column (a bare column `flag` means `flag = TRUE`); a BOOLEAN column compares with a number
as 0 / 1. Column names: see `names.Names`.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field, replace

from .names import Names
from ..errors import PredicateError

OPS = ("==", "!=", "<", "<=", ">", ">=")
NEGATE_OP = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
FLIP_OP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class Expr:
    """Base of every predicate node. Combine with &, |, ~."""

    __slots__ = ()

    def __and__(self, other):
        return And(_flat(And, self, _as_expr(other)))

    def __rand__(self, other):
        return And(_flat(And, _as_expr(other), self))

    def __or__(self, other):
        return Or(_flat(Or, self, _as_expr(other)))

    def __ror__(self, other):
        return Or(_flat(Or, _as_expr(other), self))

    def __invert__(self):
        return Not(self)

    def __bool__(self):
        raise TypeError("a qdbpm predicate has no truth value; combine predicates with &, | and ~")

    def columns(self) -> set:
        """Column names as written (see `resolve` for the schema's names)."""
        out = set()
        _collect_columns(self, out)
        return out

    def resolve(self, names) -> Expr:
        """This predicate with every column name replaced by the one of `names` (a schema's
        column names, or a `Names`) it refers to, matched exactly from then on."""
        return _resolve(self, names if isinstance(names, Names) else Names(names))


def _flat(cls, a, b):
    """Children of a & b (or a | b) with nested nodes of the same kind flattened."""
    return (a.children if isinstance(a, cls) else (a,)) + (b.children if isinstance(b, cls) else (b,))


def _as_expr(x):
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        return Literal(x)
    raise TypeError(f"cannot combine a predicate with {type(x).__name__}")


# Every leaf carries `exact`: True for a name matched as written (a double-quoted SQL identifier,
# or any `col()` name), False for an unquoted SQL identifier (see `Names`). It is not part of
# equality or hashing, so `parse("a = 1") == (col("a") == 1)`; prune.bind keys its cache on it.
def _exact_name():
    return field(default=True, compare=False)


@dataclass(frozen=True, eq=True)
class Literal(Expr):
    """TRUE or FALSE."""

    value: bool


@dataclass(frozen=True)
class Cmp(Expr):
    column: str
    op: str
    value: object
    exact: bool = _exact_name()

    def __post_init__(self):
        if self.op not in OPS:
            raise PredicateError(f"unknown comparison {self.op!r}")
        if self.value is None:
            raise PredicateError(f"{self.column} {self.op} NULL is never true; use is_null() / is_not_null()")


@dataclass(frozen=True)
class Between(Expr):
    column: str
    lo: object
    hi: object
    exact: bool = _exact_name()

    def __post_init__(self):
        if self.lo is None or self.hi is None:
            raise PredicateError(f"BETWEEN bounds of {self.column} must not be NULL")


@dataclass(frozen=True)
class In(Expr):
    column: str
    values: tuple
    exact: bool = _exact_name()


@dataclass(frozen=True)
class IsNull(Expr):
    column: str
    exact: bool = _exact_name()


@dataclass(frozen=True)
class IsNotNull(Expr):
    column: str
    exact: bool = _exact_name()


@dataclass(frozen=True)
class And(Expr):
    children: tuple


@dataclass(frozen=True)
class Or(Expr):
    children: tuple


@dataclass(frozen=True)
class Not(Expr):
    child: Expr


class Col:
    """`col("px") > 5` and friends. Comparisons build Cmp nodes. The name is exact: it matches
    only the column spelled exactly so (as a double-quoted SQL identifier does)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, v):
        return Cmp(self.name, "==", v)

    def __ne__(self, v):
        return Cmp(self.name, "!=", v)

    def __lt__(self, v):
        return Cmp(self.name, "<", v)

    def __le__(self, v):
        return Cmp(self.name, "<=", v)

    def __gt__(self, v):
        return Cmp(self.name, ">", v)

    def __ge__(self, v):
        return Cmp(self.name, ">=", v)

    __hash__ = None

    def between(self, lo, hi):
        return Between(self.name, lo, hi)

    def isin(self, values):
        if isinstance(values, (str, bytes)):
            raise TypeError("isin takes a collection of values, not a single string")
        return In(self.name, tuple(values))

    def is_null(self):
        return IsNull(self.name)

    def is_not_null(self):
        return IsNotNull(self.name)

    def __repr__(self):
        return f"col({self.name!r})"


def col(name: str) -> Col:
    """A column by its exact name, case included (`parse` matches unquoted names case-insensitively)."""
    return Col(name)


def _collect_columns(e, out):
    if isinstance(e, (And, Or)):
        for c in e.children:
            _collect_columns(c, out)
    elif isinstance(e, Not):
        _collect_columns(e.child, out)
    elif not isinstance(e, Literal):
        out.add(e.column)


def _resolve(e, names):
    if isinstance(e, (And, Or)):
        return type(e)(tuple(_resolve(c, names) for c in e.children))
    if isinstance(e, Not):
        return Not(_resolve(e.child, names))
    if isinstance(e, Literal):
        return e
    return replace(e, column=names.names[names.index(e.column, e.exact)], exact=True)


# --- negation normal form -------------------------------------------------------------------


@dataclass(frozen=True)
class NotCmp(Expr):
    """TRUE when the column is non-null and the comparison is FALSE (differs from the negated
    operator only for NaN, which compares FALSE to everything)."""

    column: str
    op: str
    value: object
    exact: bool = _exact_name()


@dataclass(frozen=True)
class NotBetween(Expr):
    column: str
    lo: object
    hi: object
    exact: bool = _exact_name()


@dataclass(frozen=True)
class NotIn(Expr):
    """NOT of In: TRUE for a non-null value not listed, and for null unless None is listed."""

    column: str
    values: tuple
    exact: bool = _exact_name()


def nnf(e: Expr, negate: bool = False) -> Expr:
    """Push NOT down to the leaves with three-valued logic (De Morgan holds for Kleene logic)."""
    if isinstance(e, Not):
        return nnf(e.child, not negate)
    if isinstance(e, And):
        kids = tuple(nnf(c, negate) for c in e.children)
        return Or(kids) if negate else And(kids)
    if isinstance(e, Or):
        kids = tuple(nnf(c, negate) for c in e.children)
        return And(kids) if negate else Or(kids)
    if not negate:
        return e
    if isinstance(e, Literal):
        return Literal(not e.value)
    if isinstance(e, Cmp):
        return NotCmp(e.column, e.op, e.value, e.exact)
    if isinstance(e, NotCmp):
        return Cmp(e.column, e.op, e.value, e.exact)
    if isinstance(e, Between):
        return NotBetween(e.column, e.lo, e.hi, e.exact)
    if isinstance(e, NotBetween):
        return Between(e.column, e.lo, e.hi, e.exact)
    if isinstance(e, In):
        return NotIn(e.column, e.values, e.exact)
    if isinstance(e, NotIn):
        return In(e.column, e.values, e.exact)
    if isinstance(e, IsNull):
        return IsNotNull(e.column, e.exact)
    if isinstance(e, IsNotNull):
        return IsNull(e.column, e.exact)
    raise TypeError(f"not a predicate: {e!r}")


# --- SQL WHERE text -------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
      | (?P<str>'(?:[^']|'')*')
      | (?P<qid>"(?:[^"]|"")+")
      | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,)
      | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "TRUE", "FALSE", "TIMESTAMP", "DATE", "NAN"}


ParseError = PredicateError


def _tokenize(text):
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ParseError(f"cannot read WHERE clause at character {pos}: {text[pos:pos + 20]!r}")
        kind = m.lastgroup
        val, start = m.group(kind), m.start(kind)
        if kind == "word" and val.upper() in _KEYWORDS:
            kind, val = "kw", val.upper()
        out.append((kind, val, start))
        pos = m.end()
    out.append(("end", None, len(text)))
    return out


class _Parser:
    def __init__(self, text):
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def peek(self):
        return self.toks[self.i]

    def next(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, kind, val=None):
        t = self.peek()
        if t[0] == kind and (val is None or t[1] == val):
            self.i += 1
            return t
        return None

    def expect(self, kind, val=None):
        t = self.accept(kind, val)
        if t is None:
            got = self.peek()
            raise ParseError(f"expected {val or kind} at character {got[2]} of {self.text!r}, found {got[1]!r}")
        return t

    def parse(self):
        e = self.or_()
        if self.peek()[0] != "end":
            t = self.peek()
            raise ParseError(f"unexpected {t[1]!r} at character {t[2]} of {self.text!r}")
        return e

    def or_(self):
        kids = [self.and_()]
        while self.accept("kw", "OR"):
            kids.append(self.and_())
        return kids[0] if len(kids) == 1 else Or(tuple(kids))

    def and_(self):
        kids = [self.not_()]
        while self.accept("kw", "AND"):
            kids.append(self.not_())
        return kids[0] if len(kids) == 1 else And(tuple(kids))

    def not_(self):
        if self.accept("kw", "NOT"):
            return Not(self.not_())
        return self.atom()

    def atom(self):
        if self.accept("op", "("):
            e = self.or_()
            self.expect("op", ")")
            return e
        if self.accept("kw", "TRUE"):
            return Literal(True)
        if self.accept("kw", "FALSE"):
            return Literal(False)
        t = self.next()
        exact = t[0] == "qid"  # an unquoted name matches case-insensitively (Names)
        if t[0] == "word":
            name = t[1]
        elif t[0] == "qid":
            name = t[1][1:-1].replace('""', '"')
        else:
            raise ParseError(f"expected a column name at character {t[2]} of {self.text!r}, found {t[1]!r}")
        if self.accept("kw", "IS"):
            neg = self.accept("kw", "NOT") is not None
            t = self.next()
            if t[:2] == ("kw", "NULL"):
                return IsNotNull(name, exact) if neg else IsNull(name, exact)
            if t[0] == "kw" and t[1] in ("TRUE", "FALSE"):
                # IS TRUE / IS FALSE are never null: exactly IN's rule (a null matches only a
                # listed None), so IS NOT TRUE is TRUE for null as SQL says.
                e = In(name, (t[1] == "TRUE",), exact)
                return Not(e) if neg else e
            raise ParseError(f"expected NULL, TRUE or FALSE after IS at character {t[2]} of {self.text!r}, "
                             f"found {t[1]!r}")
        neg = self.accept("kw", "NOT") is not None
        if self.accept("kw", "BETWEEN"):
            lo = self.literal()
            self.expect("kw", "AND")
            hi = self.literal()
            e = Between(name, lo, hi, exact)
            return Not(e) if neg else e
        if self.accept("kw", "IN"):
            self.expect("op", "(")
            vals = [self.literal(allow_null=True)]
            while self.accept("op", ","):
                vals.append(self.literal(allow_null=True))
            self.expect("op", ")")
            e = In(name, tuple(vals), exact)
            return Not(e) if neg else e
        if neg:
            t = self.peek()
            raise ParseError(f"expected BETWEEN or IN after NOT at character {t[2]} of {self.text!r}")
        t = self.peek()
        if t[0] == "end" or t[:2] in (("kw", "AND"), ("kw", "OR"), ("op", ")")):
            # A bare column is a condition: `flag` is `flag = TRUE` (binding refuses a column
            # that is not BOOLEAN), so NOT flag is FALSE, not TRUE, for a null flag.
            return Cmp(name, "==", True, exact)
        t = self.next()
        if t[0] != "op" or t[1] not in ("=", "==", "!=", "<>", "<", "<=", ">", ">="):
            raise ParseError(f"expected a comparison, IS, IN, BETWEEN, AND, OR or ')' after {name!r} "
                             f"at character {t[2]} of {self.text!r}, found {t[1]!r}")
        op = {"=": "==", "<>": "!="}.get(t[1], t[1])
        return Cmp(name, op, self.literal(), exact)

    def literal(self, allow_null=False):
        t = self.next()
        if t[0] == "num":
            s = t[1]
            return float(s) if any(ch in s for ch in ".eE") else int(s)
        if t[0] == "str":
            return t[1][1:-1].replace("''", "'")
        if t[0] == "kw":
            if t[1] == "TRUE":
                return True
            if t[1] == "FALSE":
                return False
            if t[1] == "NAN":
                return float("nan")
            if t[1] == "NULL" and allow_null:
                return None
            if t[1] in ("TIMESTAMP", "DATE"):
                s = self.expect("str")[1][1:-1]
                try:
                    return dt.date.fromisoformat(s) if t[1] == "DATE" else _parse_ts(s)
                except ValueError as e:
                    raise ParseError(f"bad {t[1]} literal {s!r}: {e}") from None
        raise ParseError(f"expected a literal at character {t[2]} of {self.text!r}, found {t[1]!r}")


def _parse_ts(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def parse(text: str) -> Expr:
    """Parse a SQL WHERE clause: comparisons, BETWEEN, IN, IS [NOT] NULL, AND, OR, NOT, (), a bare
    BOOLEAN column (`flag` is `flag = TRUE`) and column IS [NOT] TRUE / FALSE.

    Identifiers follow SQL: an unquoted name matches a column case-insensitively when it matches
    one (an exact-case match wins; several matches are an error), a "double-quoted" one exactly."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("empty WHERE clause")
    return _Parser(text).parse()
