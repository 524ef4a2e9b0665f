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

from dataclasses import dataclass, field, replace

from .names import Names
from ..errors import PredicateError

OPS = ("==", "!=", "<", "<=", ">", ">=")
NEGATE_OP = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
FLIP_OP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class Expr:
    """Base of every predicate node. Combine with &, |, ~."""

    __slots__ = ()
    residual = False  # prune.residual's nodes: they walk, resolve and negate themselves

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
def exact_name():
    """The `exact` field of a node naming a column (quoted: exact; bare: resolved case-insensitively),
    not part of equality."""
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
    exact: bool = exact_name()

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
    exact: bool = exact_name()

    def __post_init__(self):
        if self.lo is None or self.hi is None:
            raise PredicateError(f"BETWEEN bounds of {self.column} must not be NULL")


@dataclass(frozen=True)
class In(Expr):
    column: str
    values: tuple
    exact: bool = exact_name()


@dataclass(frozen=True)
class IsNull(Expr):
    column: str
    exact: bool = exact_name()


@dataclass(frozen=True)
class IsNotNull(Expr):
    column: str
    exact: bool = exact_name()


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
    elif e.residual:
        out |= e.columns()
    elif not isinstance(e, Literal):
        out.add(e.column)


def _resolve(e, names):
    if isinstance(e, (And, Or)):
        return type(e)(tuple(_resolve(c, names) for c in e.children))
    if isinstance(e, Not):
        return Not(_resolve(e.child, names))
    if isinstance(e, Literal):
        return e
    if e.residual:
        return e.resolve(names)
    return replace(e, column=names.names[names.index(e.column, e.exact)], exact=True)


# --- negation normal form -------------------------------------------------------------------


@dataclass(frozen=True)
class NotCmp(Expr):
    """TRUE when the column is non-null and the comparison is FALSE (differs from the negated
    operator only for NaN, which compares FALSE to everything)."""

    column: str
    op: str
    value: object
    exact: bool = exact_name()


@dataclass(frozen=True)
class NotBetween(Expr):
    column: str
    lo: object
    hi: object
    exact: bool = exact_name()


@dataclass(frozen=True)
class NotIn(Expr):
    """NOT of In: TRUE for a non-null value not listed, and for null unless None is listed."""

    column: str
    values: tuple
    exact: bool = exact_name()


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
    if e.residual:
        return e.negated() if negate else e
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


def atoms(e) -> list:
    """The leaves of `e` (every node but And / Or / Not / Literal), in order, each node once."""
    out = []
    _atoms(e, out, set())
    return out


def _atoms(n, out, seen):
    # a module function, not a closure calling itself: that closure and its cell form a cycle
    # left to the cycle collector on every call
    if isinstance(n, (And, Or)):
        for c in n.children:
            _atoms(c, out, seen)
    elif isinstance(n, Not):
        _atoms(n.child, out, seen)
    elif not isinstance(n, Literal) and id(n) not in seen:
        seen.add(id(n))
        out.append(n)
