"""SQL WHERE text -> predicate trees (expr's nodes where they fit, residual's otherwise).

One hand-written recursive-descent grammar for conditions and values, so "(a + b) * 2 > c" and
"(a = 1 OR b)" both parse: or_ / and_ / not_ / atom return a value (a column, a CASE, ...) when
nothing made it a condition, and `cond` turns it into one where one is needed. The clause
`column op literal` takes a fast path straight to a Cmp. INTERVAL arithmetic and CASTs of
literals fold into literals here.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re

from . import residual as R
from .expr import FLIP_OP, And, Between, Cmp, Expr, In, IsNotNull, IsNull, Literal, Not, Or
from .intervals import questdb_interval
from ..errors import PredicateError

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
      | (?P<str>'(?:[^']|'')*')
      | (?P<qid>"(?:[^"]|"")+")
      | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,|\+|-|\*|/)
      | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "TRUE", "FALSE", "TIMESTAMP", "DATE", "NAN",
             "LIKE", "ILIKE", "ESCAPE", "DISTINCT", "FROM", "CAST", "AS", "CASE", "WHEN", "THEN", "ELSE", "END",
             "INTERVAL"}
_CMP_OPS = {"=": "==", "==": "==", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_STOP = (("kw", "AND"), ("kw", "OR"), ("op", ")"))  # what may follow a whole comparison
_ARITH = ("+", "-", "*", "/")


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

    def fail(self, what, t=None):
        t = t or self.peek()
        raise ParseError(f"{what} at character {t[2]} of {self.text!r}, found {t[1]!r}")

    def parse(self):
        e = self.cond(self.or_())
        if self.peek()[0] != "end":
            t = self.peek()
            raise ParseError(f"unexpected {t[1]!r} at character {t[2]} of {self.text!r}")
        return e

    def or_(self):
        kids = [self.and_()]
        while self.accept("kw", "OR"):
            kids.append(self.and_())
        return kids[0] if len(kids) == 1 else Or(tuple(self.cond(k) for k in kids))

    def and_(self):
        kids = [self.not_()]
        while self.accept("kw", "AND"):
            kids.append(self.not_())
        return kids[0] if len(kids) == 1 else And(tuple(self.cond(k) for k in kids))

    def not_(self):
        if self.accept("kw", "NOT"):
            return Not(self.cond(self.not_()))
        return self.atom()

    def cond(self, x):
        if isinstance(x, Expr):
            return x
        if isinstance(x, R.Ref):
            # A bare column is a condition: `flag` is `flag = TRUE` (binding refuses a column
            # that is not BOOLEAN), so NOT flag is FALSE, not TRUE, for a null flag.
            return Cmp(x.column, "==", True, x.exact)
        if isinstance(x, R.Const):
            if isinstance(x.value, bool):
                return Literal(x.value)
            raise ParseError(f"the literal {x.value!r} is not a condition in {self.text!r}")
        if isinstance(x, (R.Case, R.Condition)) or isinstance(x, R.Func) and x.name == "coalesce" \
                or isinstance(x, R.Cast) and x.to == "BOOLEAN":
            return R.Truth(x)  # may be BOOLEAN: binding checks
        raise ParseError(f"{x!r} is not a condition in {self.text!r}")

    def atom(self):
        toks, i = self.toks, self.i
        t0, t1, t2 = toks[i:i + 3] if i + 3 <= len(toks) else (None, None, None)
        # The commonest clause, `column op literal`, straight to a Cmp (parse-time fast path).
        if t0 is not None and t0[0] in ("word", "qid") and t1[0] == "op" and t1[1] in _CMP_OPS \
                and t2[0] in ("num", "str") and (toks[i + 3][0] == "end" or toks[i + 3][:2] in _STOP):
            self.i += 3
            name = t0[1] if t0[0] == "word" else t0[1][1:-1].replace('""', '"')
            return Cmp(name, _CMP_OPS[t1[1]], _plain(self.number_or_string(t2)), t0[0] == "qid")
        left = self.additive()
        if isinstance(left, Expr):  # a parenthesised condition, starts_with(...)
            return left
        name, exact = (left.column, left.exact) if isinstance(left, R.Ref) else (None, None)
        if self.accept("kw", "IS"):
            neg = self.accept("kw", "NOT") is not None
            t = self.next()
            if t[:2] == ("kw", "NULL"):
                if name is None:
                    e = R.IsNullOf(left)
                    return Not(e) if neg else e
                return IsNotNull(name, exact) if neg else IsNull(name, exact)
            if t[0] == "kw" and t[1] in ("TRUE", "FALSE"):
                # IS TRUE / IS FALSE are never null: exactly IN's rule (a null matches only a
                # listed None), so IS NOT TRUE is TRUE for null as SQL says.
                e = In(name, (t[1] == "TRUE",), exact) if name is not None else R.InList(left, (t[1] == "TRUE",))
                return Not(e) if neg else e
            if t[:2] == ("kw", "DISTINCT"):
                self.expect("kw", "FROM")
                e = R.Distinct(left, self.value())
                return Not(e) if neg else e
            self.fail("expected NULL, TRUE, FALSE or DISTINCT FROM after IS", t)
        neg = self.accept("kw", "NOT") is not None
        if self.accept("kw", "BETWEEN"):
            lo = self.value()
            self.expect("kw", "AND")
            hi = self.value()
            e = self.between(left, lo, hi)
            return Not(e) if neg else e
        if name is None and self.peek()[:2] == ("kw", "IN") and self.toks[self.i + 1][0] == "str":
            self.fail("an interval string after IN needs a column on the left")
        if self.accept("kw", "IN"):
            t = self.accept("str")
            if t is not None:  # QuestDB's `ts IN '2024-01'`: start <= ts < end, OR over the intervals
                kids = tuple(And((Cmp(name, ">=", lo, exact), Cmp(name, "<", hi, exact)))
                             for lo, hi in questdb_interval(t[1][1:-1].replace("''", "'")))
                e = kids[0] if len(kids) == 1 else Or(kids)
                return Not(e) if neg else e
            self.expect("op", "(")
            vals = [self.literal(allow_null=True)]
            while self.accept("op", ","):
                vals.append(self.literal(allow_null=True))
            self.expect("op", ")")
            e = In(name, tuple(vals), exact) if name is not None else R.InList(left, tuple(vals))
            return Not(e) if neg else e
        t = self.accept("kw", "LIKE") or self.accept("kw", "ILIKE")
        if t is not None:
            pattern, escape = self.literal(), None
            if self.accept("kw", "ESCAPE"):
                escape = self.literal()
                if not isinstance(escape, str) or len(escape) != 1:
                    self.fail("ESCAPE takes one character", self.toks[self.i - 1])
            if not isinstance(pattern, str):
                self.fail(f"{t[1]} takes a string pattern", t)
            R.like_tokens(pattern, escape)  # a pattern ending in its escape character is an error now
            e = R.Like(left, pattern, t[1] == "ILIKE", escape)
            return Not(e) if neg else e
        if neg:
            self.fail("expected BETWEEN, IN or LIKE after NOT")
        t = self.peek()
        if t[0] != "op" or t[1] not in _CMP_OPS:
            if t[0] == "end" or t[:2] in _STOP or t[0] == "kw" and t[1] in ("THEN", "ELSE", "END", "WHEN"):
                return left  # a value standing alone: the caller decides (a condition, or a value in ())
            self.fail(f"expected a comparison, IS, IN, BETWEEN, LIKE, AND, OR or ')' after {left!r}")
        self.next()
        return self.compare(left, _CMP_OPS[t[1]], self.value())

    def compare(self, left, op, right):
        """left op right: a Cmp when it is `column op literal` (either way round), else a residual."""
        for v in (left, right):
            if isinstance(v, Expr):
                raise ParseError(f"a condition where a value is expected in {self.text!r}")
            if isinstance(v, R.Const) and v.value is None:
                raise ParseError(f"a comparison with NULL is never true; use IS [NOT] NULL ({self.text!r})")
        if isinstance(left, R.Ref) and isinstance(right, R.Const):
            return Cmp(left.column, op, _plain(right.value), left.exact)
        if isinstance(left, R.Const) and isinstance(right, R.Ref):
            return Cmp(right.column, FLIP_OP[op], _plain(left.value), right.exact)
        return R.Compare(left, op, right)

    def between(self, v, lo, hi):
        if isinstance(v, R.Ref) and isinstance(lo, R.Const) and isinstance(hi, R.Const):
            return Between(v.column, _plain(lo.value), _plain(hi.value), v.exact)
        if isinstance(lo, R.Const) and isinstance(hi, R.Const):
            try:
                if lo.value > hi.value:
                    lo, hi = hi, lo  # reversed literal bounds are swapped, as Between's
            except TypeError:
                pass
        return And((self.compare(v, ">=", lo), self.compare(v, "<=", hi)))

    def literal(self, allow_null=False):
        t = self.toks[self.i]
        if t[0] in ("num", "str") and not (self.toks[self.i + 1][0] == "op" and self.toks[self.i + 1][1] in _ARITH):
            self.i += 1  # a plain literal: no value tree
            return _plain(self.number_or_string(t))
        v = self.value()
        if not isinstance(v, R.Const) or (v.value is None and not allow_null):
            self.fail("expected a literal", t)
        return _plain(v.value)

    # --- values: arithmetic, literals, functions, CAST, CASE ----------------------------------

    def value(self):
        v = self.additive()
        if isinstance(v, Expr):
            raise ParseError(f"a condition where a value is expected in {self.text!r}")
        return v

    def additive(self):
        v = self.multiplicative()
        toks = self.toks
        while toks[self.i][0] == "op" and toks[self.i][1] in ("+", "-"):
            self.i += 1
            v = self.arith(toks[self.i - 1][1], v, self.multiplicative())
        if isinstance(v, _Interval):
            raise ParseError(f"INTERVAL is added to or subtracted from a DATE / TIMESTAMP literal ({self.text!r})")
        return v

    def multiplicative(self):
        v = self.unary()
        toks = self.toks
        while toks[self.i][0] == "op" and toks[self.i][1] in ("*", "/"):
            self.i += 1
            v = self.arith(toks[self.i - 1][1], v, self.unary())
        return v

    def unary(self):
        if self.toks[self.i][0] != "op":
            return self.primary()
        if self.accept("op", "-"):
            v = self.unary()
            if isinstance(v, R.Const) and isinstance(v.value, (int, float, decimal.Decimal)) \
                    and not isinstance(v.value, bool):
                return R.Const(-v.value)
            return R.Neg(self.operand(v))
        if self.accept("op", "+"):
            return self.operand(self.unary())
        return self.primary()

    def operand(self, v):
        if isinstance(v, (Expr, _Interval)):
            raise ParseError(f"{'INTERVAL' if isinstance(v, _Interval) else 'a condition'} cannot be an operand "
                             f"of arithmetic here ({self.text!r})")
        return v

    def arith(self, op, a, b):
        if isinstance(a, _Interval) or isinstance(b, _Interval):
            if isinstance(a, _Interval) and op == "+":
                a, b = b, a
            if not (isinstance(b, _Interval) and op in "+-" and isinstance(a, R.Const)
                    and isinstance(a.value, dt.date)):
                raise ParseError(f"INTERVAL arithmetic folds on DATE / TIMESTAMP literals only ({self.text!r})")
            return R.Const(b.add(a.value, -1 if op == "-" else 1))
        a, b = self.operand(a), self.operand(b)
        if op != "/" and all(isinstance(x, R.Const) and type(x.value) is int for x in (a, b)):
            return R.Const({"+": a.value + b.value, "-": a.value - b.value, "*": a.value * b.value}[op])
        return R.Arith(op, a, b)

    def number_or_string(self, t):
        if t[0] == "num":
            s = t[1]
            if "e" in s or "E" in s:
                return float(s)
            return decimal.Decimal(s) if "." in s else int(s)
        return t[1][1:-1].replace("''", "'")

    def primary(self):
        t = self.next()
        kind, val = t[0], t[1]
        if kind in ("num", "str"):
            return R.Const(self.number_or_string(t))
        if kind == "op" and val == "(":
            e = self.or_()
            self.expect("op", ")")
            return e
        if kind == "qid":
            return R.Ref(val[1:-1].replace('""', '"'), True)  # a quoted name matches exactly
        if kind == "word":
            if self.peek()[:2] == ("op", "("):
                return self.call(val, t)
            return R.Ref(val, False)  # an unquoted name matches case-insensitively (Names)
        if kind == "kw":
            if val in ("TRUE", "FALSE"):
                return R.Const(val == "TRUE")
            if val == "NAN":
                return R.Const(float("nan"))
            if val == "NULL":
                return R.Const(None)
            if val in ("TIMESTAMP", "DATE"):
                s = self.expect("str")[1][1:-1]
                try:
                    return R.Const(dt.date.fromisoformat(s) if val == "DATE" else _parse_ts(s))
                except ValueError as e:
                    raise ParseError(f"bad {val} literal {s!r}: {e}") from None
            if val == "INTERVAL":
                return self.interval()
            if val == "CAST":
                return self.cast()
            if val == "CASE":
                return self.case()
        self.fail("expected a column name or a value", t)

    def call(self, name, t):
        self.expect("op", "(")
        if name.lower() in R.SUBSTRING_NAMES:
            return self.substring(t)
        args = [] if self.accept("op", ")") else None
        if args is None:
            args = [self.value()]
            while self.accept("op", ","):
                args.append(self.value())
            self.expect("op", ")")
        fn = name.lower()
        if fn == "starts_with":
            if len(args) != 2 or not (isinstance(args[1], R.Const) and isinstance(args[1].value, str)):
                self.fail("starts_with takes a value and a literal string prefix", t)
            return R.StartsWith(args[0], args[1].value)
        if fn not in R.FUNCTIONS:
            self.fail(f"unknown function {name}(): supported are starts_with, substring, {', '.join(R.FUNCTIONS)}", t)
        n = R.FUNCTIONS[fn]
        if (n is not None and len(args) != n) or not args:
            self.fail(f"{fn}() takes {n or 'at least 1'} argument(s), not {len(args)}", t)
        if fn == "date_trunc" and not (isinstance(args[0], R.Const) and isinstance(args[0].value, str)
                                       and args[0].value.lower() in R.TRUNC_UNITS):
            self.fail(f"date_trunc takes a literal unit first: one of {', '.join(R.TRUNC_UNITS)}", t)
        return R.Func(fn, tuple(args))

    def substring(self, t):
        """substring(s, start[, length]), or SQL's substring(s FROM start [FOR length])."""
        args = [self.value()]
        if self.accept("kw", "FROM"):
            args.append(self.value())
            if self.peek()[0] == "word" and self.peek()[1].upper() == "FOR":
                self.i += 1
                args.append(self.value())
        else:
            while self.accept("op", ","):
                args.append(self.value())
        self.expect("op", ")")
        try:
            R.substring_args(args)
        except PredicateError as e:
            self.fail(str(e), t)
        return R.Func("substring", tuple(args))

    def cast(self):
        self.expect("op", "(")
        v = self.value()
        self.expect("kw", "AS")
        words = []
        while self.peek()[0] in ("word", "kw") and self.peek()[1] != "AS":
            words.append(self.next()[1])
        if self.accept("op", "("):
            nums = [self.expect("num")[1]]
            while self.accept("op", ","):
                nums.append(self.expect("num")[1])
            self.expect("op", ")")
            words[-1:] = [f"{words[-1] if words else ''}({','.join(nums)})"]
        self.expect("op", ")")
        to = R.cast_type(" ".join(words))
        if isinstance(v, R.Const):
            folded = _fold_cast(v.value, to)
            if folded is not None:
                return R.Const(folded)
        return R.Cast(v, to)

    def case(self):
        operand = None if self.peek()[:2] == ("kw", "WHEN") else self.value()
        whens = []
        while self.accept("kw", "WHEN"):
            c = self.or_()
            c = self.compare(operand, "==", c) if operand is not None else self.cond(c)
            self.expect("kw", "THEN")
            whens.append((c, self.result()))
        if not whens:
            self.fail("expected WHEN")
        default = self.result() if self.accept("kw", "ELSE") else R.Const(None)
        self.expect("kw", "END")
        return R.Case(tuple(whens), default)

    def result(self):
        """A CASE result: a value, or a condition as a BOOLEAN value."""
        v = self.or_()
        return R.Condition(v) if isinstance(v, Expr) else v

    def interval(self):
        t = self.next()
        if t[0] == "str":
            text = t[1][1:-1].strip()
        elif t[0] == "num":
            text = t[1]
        else:
            self.fail("expected INTERVAL 'n' UNIT", t)
        parts = text.split()
        if len(parts) == 1:
            u = self.next()
            if u[0] != "word":
                self.fail("expected an INTERVAL unit (DAY, MONTH, YEAR, HOUR, MINUTE, SECOND)", u)
            parts.append(u[1])
        if len(parts) != 2 or not re.fullmatch(r"[-+]?\d+", parts[0]) or parts[1].lower().rstrip("s") not in _UNITS:
            self.fail(f"expected INTERVAL 'n' UNIT with an integer n and a unit of {', '.join(_UNITS)}", t)
        return _Interval(int(parts[0]), parts[1].lower().rstrip("s"))


_UNITS = ("year", "quarter", "month", "week", "day", "hour", "minute", "second")


class _Interval:
    """INTERVAL 'n' UNIT while parsing: folded into the DATE / TIMESTAMP literal it is added to."""

    __slots__ = ("n", "unit")

    def __init__(self, n, unit):
        self.n, self.unit = n, unit

    def add(self, v, sign):
        n = self.n * sign
        try:
            if self.unit in ("year", "quarter", "month"):
                return R.add_months(v, n * {"year": 12, "quarter": 3, "month": 1}[self.unit])
            step = dt.timedelta(**{self.unit + "s": n}) if self.unit != "quarter" else None
            if isinstance(v, dt.datetime) or self.unit in ("day", "week"):
                return v + step
            return dt.datetime(v.year, v.month, v.day) + step  # a DATE plus hours is a TIMESTAMP
        except (OverflowError, ValueError) as e:
            raise ParseError(f"{v} {'+' if sign > 0 else '-'} INTERVAL {self.n} {self.unit}: {e}") from None


def _plain(v):
    """A literal as Cmp / In / Between take it: a SQL `1.5` (decimal.Decimal while parsing, as
    DuckDB types it in arithmetic) is the float 1.5 there."""
    return float(v) if isinstance(v, decimal.Decimal) else v


def _fold_cast(v, to):
    """CAST of a literal, done now where it is plainly exact (else None: cast per row)."""
    t = R.const_type(v)
    if to in ("DATE", "TIMESTAMP") and t in ("str", "date", "timestamp"):
        x = R.parse_temporal(v, to.lower()) if t == "str" else v
        if to == "DATE":
            return x if not isinstance(x, dt.datetime) else x.date()
        return x if isinstance(x, dt.datetime) else dt.datetime(x.year, x.month, x.day)
    if to == "DOUBLE" and t in ("int", "decimal", "float"):
        return float(v)
    if to in R.INT_BITS and t == "int" or to == "VARCHAR" and t == "str" or to == "BOOLEAN" and t == "bool":
        return R.cast_int(v, to) if to in R.INT_BITS else v
    return None


def _parse_ts(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def parse(text: str) -> Expr:
    """A SQL WHERE clause (the grammar above, docs/api.md) as a tree: expr's nodes where they fit
    (`a = 1` is a Cmp), residual's otherwise. An unquoted name matches a column as SQL does
    (case-insensitively, an exact-case match first, several an error), a "quoted" one exactly."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("empty WHERE clause")
    return _Parser(text).parse()
