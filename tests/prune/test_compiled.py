"""The process-wide cache of compiled filter expressions (qdbpm/prune/compiled.py): one compile per
(predicate, literal types, schema), never an answer compiled for an equal-looking predicate
that compiles differently (1 / 1.0 / True, an exact and a case-insensitive name)."""

import decimal

import pyarrow as pa
import pytest

from qdbpm.errors import PredicateError
from qdbpm.prune import compiled as C
from qdbpm.prune import expr as E
from qdbpm.prune.arrow import to_arrow

SCHEMA = pa.schema([("x", pa.int64()), ("b", pa.bool_()), ("Name", pa.string()), ("d", pa.decimal128(9, 2))])


@pytest.fixture(autouse=True)
def fresh():
    C._kept.clear()
    yield
    C._kept.clear()


def test_a_predicate_asked_again_is_compiled_once():
    p = E.Cmp("x", ">", 5) & E.In("Name", ("a", "b"))
    first = C.compiled(p, SCHEMA)
    again = C.compiled(E.Cmp("x", ">", 5) & E.In("Name", ("a", "b")), pa.schema(list(SCHEMA)))  # equal, new objects
    assert again is first and first.equals(to_arrow(p, SCHEMA))
    other = C.compiled(p, pa.schema([("x", pa.int32()), ("Name", pa.string())]))  # another schema: its own
    assert other is not first and other.equals(to_arrow(p, pa.schema([("x", pa.int32()), ("Name", pa.string())])))


def test_equal_literals_of_other_types_are_not_one_entry():
    C.compiled(E.Cmp("x", "==", 1), SCHEMA)
    with pytest.raises(PredicateError, match="not BOOLEAN"):  # True == 1, yet a LONG column refuses it
        C.compiled(E.Cmp("x", "==", True), SCHEMA)
    one = C.compiled(E.Cmp("d", "==", 1), SCHEMA)
    dec = C.compiled(E.Cmp("d", "==", decimal.Decimal("1")), SCHEMA)
    assert one is not dec and one.equals(dec)  # two entries, the same filter


def test_an_exact_name_and_a_case_insensitive_one_are_not_one_entry():
    loose = E.Cmp("name", "==", "a", exact=False)
    assert C.compiled(loose, SCHEMA).equals(to_arrow(loose, SCHEMA))
    with pytest.raises(PredicateError):
        C.compiled(E.Cmp("name", "==", "a", exact=True), SCHEMA)  # equal as nodes: `exact` is not compared


def test_literals_that_cannot_key_it_are_left_to_the_caller():
    class Odd(int):
        pass

    assert C.compiled(E.Cmp("x", "==", Odd(3)), SCHEMA) is None  # a subclass: not known to be immutable
    assert C.compiled(E.In("x", ([1, 2],)), SCHEMA) is None  # unhashable: never reaches the dict
    assert not C._kept


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(C, "MAX", 4)
    for k in range(10):
        C.compiled(E.Cmp("x", "<", k), SCHEMA)
        assert len(C._kept) <= 4


def test_schemas_that_differ_only_in_an_unscaled_fields_scale_are_two_entries():
    """pyarrow's Schema equality ignores field metadata, which holds an unscaled DECIMAL's scale:
    the same int64 column is 0.05 at scale 2 and 0.005 at scale 3, so `d >= 0.05` compiles to
    `d >= 5` and to `d >= 50`. One entry for both read the second partition with the first's
    literal (a scan over partitions whose decimal scales differ kept wrong rows)."""
    from qdbpm.prune.rows import unscaled_field

    p = E.Cmp("d", ">=", decimal.Decimal("0.05"))
    two, three = (pa.schema([unscaled_field("d", pa.decimal128(9, s))]) for s in (2, 3))
    assert two == three  # pyarrow's view: why the key adds the metadata
    got2, got3 = C.compiled(p, two), C.compiled(p, three)
    assert got2.equals(to_arrow(p, two)) and got3.equals(to_arrow(p, three))
    assert not got2.equals(got3)
    assert C.arrow_key(two) != C.arrow_key(three) and C.arrow_key(two) == C.arrow_key(pa.schema(list(two)))
