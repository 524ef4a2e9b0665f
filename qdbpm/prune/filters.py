"""Predicates as pyarrow users write them: DNF filter lists (pyarrow.parquet's `filters=`) and
pyarrow.compute expressions, read into `expr` trees that mean what pyarrow.dataset means by the
same filter; and `as_predicate`, the one entry point of every call that takes a predicate.

pyarrow offers no public walker of an Expression, and its text form is ambiguous (a binary
literal prints like a string, a decimal or float32 like a double, a string_view like a field,
field names unescaped, time zones dropped). So `from_arrow` reads the Expression the way pickle
does: Arrow serializes it as an IPC record batch whose schema metadata lists the tree in prefix
order (`call`, `field_ref`, `nested_field_ref`, `literal`, `options`, `end`) and whose columns hold
the literals and options with their exact types.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
import sys
from functools import lru_cache

import numpy as np

from .expr import FLIP_OP, And, Cmp, Expr, In, IsNotNull, IsNull, Literal, Not, Or
from .sql import parse
from ..errors import PredicateError

# --- DNF filter lists ------------------------------------------------------------------------

_DNF_OPS = {"=": "==", "==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">=",
            "in": "in", "not in": "not in"}
_COLLECTIONS = (list, tuple, set, frozenset, np.ndarray)


def from_filters(filters) -> Expr:
    """A DNF filter list as pyarrow.parquet documents it: a list of (column, op, value) tuples is
    their AND; a list of such lists is the OR of their ANDs. Ops `=, ==, !=, <, <=, >, >=, in,
    not in`; `in` / `not in` take a list, tuple or set. Means what pyarrow.dataset does with
    `pyarrow.parquet.filters_to_expression(filters)`: a comparison with a null is null, `in`
    never yields null (a null matches only a listed None), NaN listed in `in` matches NaN."""
    if not isinstance(filters, (list, tuple)):
        raise PredicateError(f"DNF filters are a list of (column, op, value) tuples or a list of such lists, "
                             f"not {type(filters).__name__}")
    if not filters:
        raise PredicateError("DNF filters: the list is empty (pass None for no filter)")
    if _is_term(filters):
        raise PredicateError(f"DNF filters: a single predicate must be wrapped in a list: [{tuple(filters)!r}]")
    first = filters[0]
    if isinstance(first, (list, tuple)) and first and isinstance(first[0], str) and not _is_term(first):
        raise PredicateError(f"DNF filters: filters[0] is not a (column, op, value) predicate: {first!r}")
    if _is_term(first):  # pyarrow's own rule: the first element decides the nesting
        return _conjunction(filters, "filters")
    kids = []
    for i, conj in enumerate(filters):
        if not isinstance(conj, (list, tuple)):
            raise PredicateError(f"DNF filters: filters[{i}] is neither a (column, op, value) predicate nor a "
                                 f"list of them: {conj!r}")
        if _is_term(conj):
            raise PredicateError(f"DNF filters: filters[0] is a list of predicates, so filters[{i}] must be one "
                                 f"too (not {conj!r}); a flat list of predicates is one AND")
        kids.append(_conjunction(conj, f"filters[{i}]"))
    return kids[0] if len(kids) == 1 else Or(tuple(kids))


def _is_term(x) -> bool:
    # (column, op, value): the op is a string, where a list of three predicates has a predicate.
    return isinstance(x, (list, tuple)) and len(x) == 3 and isinstance(x[1], str)


def _conjunction(terms, where) -> Expr:
    if not terms:
        raise PredicateError(f"DNF filters: {where} is an empty list")
    kids = []
    for j, t in enumerate(terms):
        if not _is_term(t):
            raise PredicateError(f"DNF filters: {where}[{j}] is not a (column, op, value) predicate: {t!r}"
                                 + (" (nested too deeply?)" if isinstance(t, (list, tuple)) else ""))
        kids.append(_term(t, f"{where}[{j}]"))
    return kids[0] if len(kids) == 1 else And(tuple(kids))


def _term(t, where) -> Expr:
    column, op, value = t
    if not isinstance(column, str):
        raise PredicateError(f"DNF filters: {where}: the column must be a name (str), not {column!r}")
    if op not in _DNF_OPS:
        raise PredicateError(f"DNF filters: {where}: unknown operator {op!r}; operators: {', '.join(_DNF_OPS)}")
    op = _DNF_OPS[op]
    if op in ("in", "not in"):
        if not isinstance(value, _COLLECTIONS):
            raise PredicateError(f"DNF filters: {where}: {op!r} takes a list, tuple or set of values, "
                                 f"not {type(value).__name__} {value!r}")
        e = _isin(column, value)
        return Not(e) if op == "not in" else e
    if value is None:
        raise PredicateError(f"DNF filters: {where}: ({column!r}, {t[1]!r}, None) is never true (a comparison "
                             f"with null is null); ({column!r}, 'in', [None]) matches nulls")
    if isinstance(value, (_COLLECTIONS, dict)):
        raise PredicateError(f"DNF filters: {where}: {t[1]!r} compares with one value, not {value!r}")
    return Cmp(column, op, value)


def _isin(column, values, exact=True) -> Expr:
    """pyarrow's `isin` (null_matching_behavior MATCH): never null, a null matches only a listed
    None, and, unlike `==`, a listed NaN matches NaN."""
    if isinstance(values, (set, frozenset)):
        values = sorted(values, key=lambda v: (type(v).__name__, repr(v)))  # a stable order
    values = tuple(values)
    kept = tuple(v for v in values if not (isinstance(v, (float, np.floating)) and math.isnan(v)))
    e = In(column, kept, exact)
    if len(kept) == len(values):
        return e
    # NaN is the non-null value that `>= -inf` finds FALSE; never null, as In is.
    is_nan = And((Not(Cmp(column, ">=", float("-inf"), exact)), IsNotNull(column, exact)))
    return Or((e, is_nan))


# --- pyarrow.compute expressions -------------------------------------------------------------

_CMP = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}
_SET_LOOKUP_FIELDS = {"value_set", "null_matching_behavior", "_type_name"}
_MATCH, _SKIP = 0, 1  # arrow::compute::SetLookupOptions::NullMatchingBehavior
_HINTS = {"and_": "use & (and_kleene); and_ is not Kleene logic", "or_": "use | (or_kleene); or_ is not Kleene logic"}


def from_arrow(expression) -> Expr:
    """A pyarrow.compute.Expression built from `pc.field` (names, nested names), scalars,
    comparisons, `isin`, `is_null`, `is_valid`, `&`, `|`, `~` and `pc.scalar(True / False)`, with
    pyarrow's semantics; literals keep their exact value (a timestamp becomes numpy.datetime64 in
    its own unit: the instant, as pyarrow compares it). Anything else is a PredicateError naming it."""
    pa, pc = _pyarrow()
    if pc is None or not isinstance(expression, pc.Expression):
        raise PredicateError(f"expected a pyarrow.compute.Expression, not {type(expression).__name__}")
    return _ArrowReader(pa, expression).predicate()


def _pyarrow():
    """(pyarrow, pyarrow.compute), or (None, None) before pyarrow.compute is imported: a
    pc.Expression implies it is, so this module does not import it, and `import qdbpm.meta` (the
    command line's inspect and verify) stays free of pyarrow's import time."""
    return sys.modules.get("pyarrow"), sys.modules.get("pyarrow.compute")


class _ArrowReader:
    """One Expression's serialized tree, read into an `expr` tree."""

    def __init__(self, pa, expression):
        self.pa, self.expression = pa, expression
        try:
            reader = pa.ipc.open_file(expression.__reduce__()[1][0])
            self.batch = reader.read_all()
            self.items = _metadata_pairs(reader.schema)
        except pa.ArrowNotImplementedError as e:  # pc.field(0): a positional reference
            raise self.error(f"{e} (name columns: pc.field('name'))") from None

    def error(self, why):
        return PredicateError(f"pyarrow expression {self.expression}: {why}")

    def predicate(self) -> Expr:
        node, end = self.node(0)
        if end != len(self.items):
            raise self.error("cannot read its serialized form")
        return self.condition(node)

    def node(self, i):
        """(node, next index): ("lit", Scalar) | ("field", (names...)) | ("call", name, [args], options)."""
        if i >= len(self.items):
            raise self.error("cannot read its serialized form")
        key, val = self.items[i]
        if key == "literal":
            return ("lit", self.batch.column(int(val))[0]), i + 1
        if key == "field_ref":
            return ("field", (val,)), i + 1
        if key == "nested_field_ref":
            names, i = [], i + 1
            for _ in range(int(val)):
                sub, i = self.node(i)
                if sub[0] != "field":
                    raise self.error("cannot read its serialized form")
                names += sub[1]
            return ("field", tuple(names)), i
        if key == "call":
            args, options, i = [], None, i + 1
            while i < len(self.items) and self.items[i][0] not in ("end", "options"):
                arg, i = self.node(i)
                args.append(arg)
            if i < len(self.items) and self.items[i][0] == "options":
                options, i = self.batch.column(int(self.items[i][1]))[0], i + 1
            if i >= len(self.items) or self.items[i] != ("end", val):
                raise self.error("cannot read its serialized form")
            return ("call", val, args, options), i + 1
        raise self.error("cannot read its serialized form")

    def column(self, node) -> str:
        names = node[1]
        if len(names) > 1 and any("." in n for n in names):
            raise self.error(f"nested field {names} has a name with '.'; qdbpm names a nested field by its "
                             f"dotted path")
        return ".".join(names)

    def condition(self, node) -> Expr:
        kind = node[0]
        if kind == "lit":
            s = node[1]
            if self.pa.types.is_boolean(s.type) and s.is_valid:
                return Literal(s.as_py())
            raise self.error(f"the literal {s} is not a condition (only pc.scalar(True) / pc.scalar(False) "
                             f"stand alone)")
        if kind == "field":  # a bare column is a condition: a BOOLEAN column, as `flag` in SQL
            return Cmp(self.column(node), "==", True)
        name, args, options = node[1:]
        if name in ("and_kleene", "or_kleene"):
            cls = And if name == "and_kleene" else Or
            kids = []
            for a in args:
                k = self.condition(a)
                kids += k.children if isinstance(k, cls) else (k,)
            return cls(tuple(kids))
        if name == "invert" and len(args) == 1:
            return Not(self.condition(args[0]))
        if name in _CMP and len(args) == 2:
            return self.comparison(name, *args)
        if name in ("is_null", "is_valid", "is_in") and len(args) == 1 and args[0][0] == "field":
            return self.lookup(name, self.column(args[0]), options)
        hint = _HINTS.get(name, "supported: comparisons, isin, is_null, is_valid, &, |, ~")
        raise self.error(f"{name}({', '.join(_describe(a) for a in args)}) is not supported in a qdbpm "
                         f"predicate ({hint})")

    def comparison(self, name, a, b) -> Expr:
        op = _CMP[name]
        if a[0] == "lit" and b[0] == "field":
            a, b, op = b, a, FLIP_OP[op]
        if a[0] != "field" or b[0] != "lit":
            raise self.error(f"{name} must compare a field with a literal, not {_describe(a)} with {_describe(b)}")
        column = self.column(a)
        if not b[1].is_valid:
            raise self.error(f"{column} {op} null is never true; use is_null() / is_valid()")
        return Cmp(column, op, self.value(b[1]))

    def lookup(self, name, column, options) -> Expr:
        if name == "is_valid":
            return IsNotNull(column)
        opts = {} if options is None else \
            {options.type.field(k).name: options[k] for k in range(options.type.num_fields)}
        plain = {k: v.as_py() for k, v in opts.items() if k != "value_set"}
        if name == "is_null":
            if plain != {"nan_is_null": False, "_type_name": b"NullOptions"}:
                raise self.error("is_null(nan_is_null=True) is not supported; use is_null() (NaN is a value, "
                                 "not a null)")
            return IsNull(column)
        if set(opts) != _SET_LOOKUP_FIELDS or plain["_type_name"] != b"SetLookupOptions" \
                or plain["null_matching_behavior"] not in (_MATCH, _SKIP):
            raise self.error(f"is_in options {options} are not supported")
        arr = opts["value_set"].values
        values = [self.value(arr[k]) if arr[k].is_valid else None for k in range(len(arr))]
        if plain["null_matching_behavior"] == _SKIP:  # skip_nulls=True: a null never matches
            values = [v for v in values if v is not None]
        return _isin(column, values)

    def value(self, s):
        """The exact Python literal of a non-null Arrow scalar, in the forms prune.literals reads."""
        t, types = s.type, self.pa.types
        if types.is_floating(t):
            return float(s.as_py())  # a float32 or float16 is exactly a double
        if types.is_date64(t):
            ms = s.value
            return dt.date(1970, 1, 1) + dt.timedelta(days=ms // 86_400_000) if ms % 86_400_000 == 0 \
                else np.datetime64(ms, "ms")
        if types.is_timestamp(t):
            # The instant in the scalar's unit; a zone only says how it prints (pyarrow compares instants).
            return np.datetime64(s.value, t.unit)
        if any(is_(t) for is_ in (types.is_boolean, types.is_integer, types.is_decimal, types.is_date32,
                                  types.is_string, types.is_large_string, types.is_string_view, types.is_binary,
                                  types.is_large_binary, types.is_fixed_size_binary, types.is_binary_view)):
            return s.as_py()
        raise self.error(f"a literal of type {t} ({s}) is not supported; literals: booleans, numbers, "
                         f"decimals, strings, binary, dates, timestamps")


def _metadata_pairs(schema) -> list:
    """The schema's metadata as ordered (key, value) pairs, duplicates kept (Schema.metadata is a
    dict). Read from the schema's IPC flatbuffer: Message.header (a Schema) .custom_metadata."""
    raw = schema.serialize().to_pybytes()
    size = struct.unpack_from("<i", raw, 4)[0]  # after the 0xFFFFFFFF continuation marker
    fb = memoryview(raw)[8 : 8 + size]

    def u32(p):
        return struct.unpack_from("<I", fb, p)[0]

    def field(table, i):  # position of field i of a table, None when absent
        vt = table - struct.unpack_from("<i", fb, table)[0]
        if 4 + 2 * i >= struct.unpack_from("<H", fb, vt)[0]:
            return None
        off = struct.unpack_from("<H", fb, vt + 4 + 2 * i)[0]
        return table + off if off else None

    def ref(p):
        return p + u32(p)

    def text(p):
        p = ref(p)
        return bytes(fb[p + 4 : p + 4 + u32(p)]).decode("utf-8")

    message = u32(0)
    if fb[field(message, 1)] != 1:  # MessageHeader.Schema
        raise PredicateError("pyarrow expression: unexpected serialized form (not a Schema message)")
    meta = field(ref(field(message, 2)), 2)
    if meta is None:
        return []
    meta = ref(meta)
    out = []
    for k in range(u32(meta)):
        kv = ref(meta + 4 + 4 * k)
        out.append((text(field(kv, 0)), text(field(kv, 1))))
    return out


def _describe(node) -> str:
    if node[0] == "lit":
        return f"literal {node[1]}"
    if node[0] == "field":
        return f"field {'.'.join(node[1])}"
    return f"{node[1]}(...)"


# --- the one entry point ---------------------------------------------------------------------


def as_predicate(where) -> Expr | None:
    """The predicate `where` means: None (no filter), SQL WHERE text (`parse`), an expression
    (`col(...)`), a DNF filter list (`from_filters`) or a pyarrow.compute.Expression (`from_arrow`)."""
    if where is None or isinstance(where, Expr):
        return where
    if isinstance(where, str):
        return _parsed(where)
    if isinstance(where, (list, tuple)):
        return from_filters(where)
    pc = _pyarrow()[1]
    if pc is not None and isinstance(where, pc.Expression):
        return from_arrow(where)
    raise PredicateError(f"a predicate is SQL text, an expression (col(...)), a DNF filter list or a "
                         f"pyarrow.compute.Expression, not {type(where).__name__} {where!r}")


@lru_cache(maxsize=256)
def _parsed(text: str) -> Expr:
    """parse(text), kept for the last texts: the tree is immutable, and a one-shot reader asking
    the same query again parsed it each time (~0.2 ms for TPC-H Q6's)."""
    return parse(text)


def where_text(text) -> Expr | None:
    """A `--where` argument: a DNF filter list as JSON when it starts with `[`, else SQL text."""
    if text is None:
        return None
    if text.lstrip().startswith("["):
        try:
            filters = json.loads(text)
        except json.JSONDecodeError as e:
            raise PredicateError(f"--where {text!r} starts with '[' but is not JSON: {e}") from None
        return from_filters(filters)
    return parse(text)
