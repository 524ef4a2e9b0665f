"""QuestDB interval literals (`ts IN '2024-01-15'`, qdbpm.prune.intervals) equal their explicit ranges.

Each form's intervals are written out by hand below (QuestDB's semantics: a prefix is the whole of
its last field, `;duration` runs from the prefix's start, `;period;count` repeats). Over pyarrow
tables with timestamp[us, tz=UTC], timestamp[ns], naive timestamp[ms] and date32 columns holding
every boundary instant and its neighbours (1 ns / 1 us / 1 ms either side): `c IN '...'` and
`c NOT IN '...'` scan the same rows as the explicit `c >= lo AND c < hi` (OR over the intervals),
prune and classify the same row groups, and both equal DuckDB's rows for the explicit range.
Malformed literals are a PredicateError naming the text and the character.
"""

import datetime as dt
import random
import re

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm import parse
from qdbpm.errors import PredicateError
from qdbpm.prune.expr import In
from qdbpm.prune.intervals import MAX_INTERVALS, questdb_interval
from qdbpm.sync.generate import generate

# text -> its intervals, [start, end) in UTC, written out by hand
FORMS = {
    "2024-01-15": [("2024-01-15", "2024-01-16")],
    "2024-01": [("2024-01-01", "2024-02-01")],
    "2024-02": [("2024-02-01", "2024-03-01")],
    "2024": [("2024-01-01", "2025-01-01")],
    "2024-01-15T09": [("2024-01-15T09:00", "2024-01-15T10:00")],
    "2024-01-15T09:30": [("2024-01-15T09:30", "2024-01-15T09:31")],
    "2024-01-15T09:30:15": [("2024-01-15T09:30:15", "2024-01-15T09:30:16")],
    "2024-01-15T09:30:15.123": [("2024-01-15T09:30:15.123", "2024-01-15T09:30:15.124")],
    "2024-01-15T09:30:15.5": [("2024-01-15T09:30:15.500", "2024-01-15T09:30:15.600")],
    "2024-01-15T09:30:15.123456": [("2024-01-15T09:30:15.123456", "2024-01-15T09:30:15.123457")],
    "2024-01-15T09:30:15.123456789": [("2024-01-15T09:30:15.123456", "2024-01-15T09:30:15.123457")],
    "2024-01-15T09:30:15.123Z": [("2024-01-15T09:30:15.123", "2024-01-15T09:30:15.123001")],
    "2024-01-15T09:30;1h": [("2024-01-15T09:30", "2024-01-15T10:30")],
    "2024-01-15T09:30;6h30m": [("2024-01-15T09:30", "2024-01-15T16:00")],
    "2024-01-15;1d12h": [("2024-01-15", "2024-01-16T12:00")],
    "2024-01-15T09:30:15.123;1_500T": [("2024-01-15T09:30:15.123", "2024-01-15T09:30:16.623")],
    "2024-01-15T09:30:15;250u2000n": [("2024-01-15T09:30:15", "2024-01-15T09:30:15.000252")],
    "2024-01-31;1M": [("2024-01-31", "2024-02-29")],
    "2023-12;2M": [("2023-12-01", "2024-02-01")],
    "2023;1y": [("2023-01-01", "2024-01-01")],
    "2024-01-12;1w": [("2024-01-12", "2024-01-19")],
    "2024-01-15T09:30;1h;1d;3": [("2024-01-15T09:30", "2024-01-15T10:30"), ("2024-01-16T09:30", "2024-01-16T10:30"),
                                 ("2024-01-17T09:30", "2024-01-17T10:30")],
    "2024-01-17T09:30;1h;-1d;3": [("2024-01-15T09:30", "2024-01-15T10:30"), ("2024-01-16T09:30", "2024-01-16T10:30"),
                                  ("2024-01-17T09:30", "2024-01-17T10:30")],
    "2024-01-31;1d;1M;3": [("2024-01-31", "2024-02-01"), ("2024-02-29", "2024-03-01"), ("2024-03-29", "2024-03-30")],
    "2024-01-15T09:00;1h;30m;3": [("2024-01-15T09:00", "2024-01-15T11:00")],  # overlapping: merged
    "2024-01-15;1d;1d;2": [("2024-01-15", "2024-01-17")],  # touching: merged
    "2024-01-15T09:30:15;1s;-2h;2": [("2024-01-15T07:30:15", "2024-01-15T07:30:16"),
                                     ("2024-01-15T09:30:15", "2024-01-15T09:30:16")],
    "2024-W03": [("2024-01-15", "2024-01-22")],
    "2024-W03-2T09": [("2024-01-16T09:00", "2024-01-16T10:00")],
    " 2024-01-15 ": [("2024-01-15", "2024-01-16")],
}
COLUMNS = ("ts_us", "ts_ns", "ts_ms", "d")
RG_ROWS = (160, 111)
N_RANDOM = 2400


def _utc(s):
    return dt.datetime.fromisoformat(s).replace(tzinfo=dt.timezone.utc)


def _expected(text):
    return [(_utc(a), _utc(b)) for a, b in FORMS[text]]


# --- the intervals themselves -----------------------------------------------------------------


@pytest.mark.parametrize("text", sorted(FORMS))
def test_forms_give_their_intervals(text):
    got = questdb_interval(text)
    assert got == _expected(text)
    assert all(a.tzinfo is dt.timezone.utc and b.tzinfo is dt.timezone.utc for a, b in got)


@pytest.mark.parametrize("text,pos,why", [
    ("", 0, "empty interval"),
    ("2024-13", 5, "month 13 is out of range"),
    ("2024-00", 5, "month 00 is out of range"),
    ("2023-02-29", 8, "2023-02 has no day 29"),
    ("2024-1", 5, "expected a 2-digit month"),
    ("20240", 0, "expected a 4-digit year"),
    ("24-01-15", 0, "expected a 4-digit year"),
    ("2024/01", 4, "expected '-', found '/'"),
    ("2024-01-15 09:30", 10, "expected 'T' between date and time"),
    ("2024-01-15T9", 11, "expected a 2-digit hour"),
    ("2024-01-15T24", 11, "hour 24 is out of range"),
    ("2024-01-15T09:60", 14, "minute 60 is out of range"),
    ("2024-01-15T09:30:61", 17, "second 61 is out of range"),
    ("2024-01-15T09:30:15.", 20, "expected 1 to 9 fraction digits"),
    ("2024-01-15T09:30:15.1234567890", 20, "expected 1 to 9 fraction digits"),
    ("2024-01-15T09:30:15.12x", 22, "unexpected 'x'"),
    ("2024-01-15Zx", 10, "expected 'T', found 'Z'"),
    ("2024-W54", 6, "ISO week 54 is out of range"),
    ("2021-W53", 6, "2021 has no ISO week 53"),
    ("2024-W01-8", 9, "ISO weekday 8 is out of range"),
    ("2024-01-15T09:30;", 17, "expected a duration"),
    ("2024-01-15T09:30;1x", 18, "unknown duration unit 'x'"),
    ("2024-01-15T09:30;h", 17, "expected a number before the duration unit"),
    ("2024-01-15T09:30;1h30", 21, "missing unit at the end of the duration"),
    ("2024-01-15T09:30;-1h", 17, "expected a number before the duration unit"),
    ("2024-01-15;0h", 11, "the duration must be positive"),
    ("2024-01-15;1n", 11, "whole microseconds"),
    ("2024-01-15;999999999999h", 11, "after year 9999"),
    ("9999-12-31", 10, "after year 9999"),
    ("9999-12-30;2d", 11, "after year 9999"),
    ("2024-01-15;1h;1d", 13, "expected 'start', 'start;duration' or 'start;duration;period;count'"),
    ("2024-01-15;1h;1d;2;3", 18, "expected 'start', 'start;duration'"),
    ("2024-01-15;1h;2w;3", 15, "the period unit must be one of y M d h m s"),
    ("2024-01-15;1h;Xd;2", 14, "expected a period"),
    ("2024-01-15;1h;1d;X", 17, "expected a whole number of repetitions"),
    ("2024-01-15;1h;1d;0", 17, f"the count must be 1 to {MAX_INTERVALS}"),
    (f"2024-01-15;1h;1d;{MAX_INTERVALS + 1}", 17, f"the count must be 1 to {MAX_INTERVALS}"),
    ("2024-01-[15,16]", 8, r"bracket expansion \('\['"),
    ("$today", 0, "a date variable"),
    ("2024-01-15T09:30@UTC", 16, "a time zone"),
    ("2024-01-15#wd", 10, "a day filter"),
    ("2024-01-15..2024-01-17", 10, "a range"),
])
def test_malformed_intervals_name_text_and_character(text, pos, why):
    msg = f"QuestDB interval {re.escape(repr(text))}: .*{why}.* at character {pos}$"
    with pytest.raises(PredicateError, match=msg):
        questdb_interval(text)
    with pytest.raises(PredicateError, match=msg):
        parse(f"ts IN '{text}'")


def test_not_a_string_is_a_predicate_error():
    with pytest.raises(PredicateError, match="a QuestDB interval is a string"):
        questdb_interval(20240115)


def test_parsed_tree_is_the_explicit_range():
    """IN 'text' is start <= ts < end (OR over intervals), NOT IN its negation; IN (...) stays a list."""
    e = parse("ts IN '2024-01-15T09:30;1h;1d;2'")
    want = [(c.children[0].value, c.children[1].value) for c in e.children]
    assert [(c.children[0].op, c.children[1].op) for c in e.children] == [(">=", "<")] * 2
    assert want == questdb_interval("2024-01-15T09:30;1h;1d;2")
    assert parse("ts NOT IN '2024'") == ~parse("ts IN '2024'")
    assert parse("NOT ts IN '2024'") == parse("ts NOT IN '2024'")
    assert isinstance(parse("ts IN ('2024')"), In)
    with pytest.raises(PredicateError, match="QuestDB interval \"it's\": expected a 4-digit year at character 0"):
        parse("ts IN 'it''s'")


# --- against tables ---------------------------------------------------------------------------


def _instants():
    """ns since the epoch: every boundary of every form with its 1 ns / 1 us / 1 ms neighbours,
    plus seeded random instants around them."""
    def ns_of(s):
        return (_utc(s) - _utc("1970-01-01")) // dt.timedelta(microseconds=1) * 1000

    ns = set()
    for spans in FORMS.values():
        for a, b in spans:
            for s in (a, b):
                ns.update(ns_of(s) + k for k in (-10**6, -1000, -1, 0, 1, 1000, 10**6))
    rng = random.Random("qdbpm-intervals")
    ns.update(rng.randrange(ns_of("2022-12-01"), ns_of("2025-02-01")) for _ in range(N_RANDOM // 3))
    # dense around mid-January 2024, where most forms are
    ns.update(rng.randrange(ns_of("2024-01-14"), ns_of("2024-01-18")) for _ in range(N_RANDOM - N_RANDOM // 3))
    return sorted(ns)


def _table(ns, first_id, seed):
    rng = np.random.default_rng(seed)
    n = len(ns)
    v = np.array(ns, dtype=np.int64)

    def nulls():
        return rng.random(n) < 0.03

    return pa.table({
        "id": pa.array(np.arange(first_id, first_id + n), pa.int64()),
        "ts_us": pa.array((v // 1000).astype("datetime64[us]"), pa.timestamp("us", tz="UTC"), mask=nulls()),
        "ts_ns": pa.array(v.astype("datetime64[ns]"), pa.timestamp("ns"), mask=nulls()),
        "ts_ms": pa.array((v // 10**6).astype("datetime64[ms]"), pa.timestamp("ms"), mask=nulls()),
        "d": pa.array((v // (86400 * 10**9)).astype("int32"), pa.int32(), mask=nulls()).cast(pa.date32()),
    })


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory):
    """Two partitions of the same instants: ascending in 160-row groups, descending in 111-row ones."""
    root = tmp_path_factory.mktemp("intervals")
    ns = _instants()
    files = []
    for k, (order, rg) in enumerate(((ns, RG_ROWS[0]), (ns[::-1], RG_ROWS[1]))):
        d = root / f"p{k}"
        d.mkdir()
        f = str(d / "data.parquet")
        pq.write_table(_table(order, k * 1_000_000, k), f, row_group_size=rg)
        generate(f)
        files.append(f)
    return str(root), files


@pytest.fixture(scope="module")
def duck(table_dir):
    """DuckDB over the same files, loaded once: duck(where) -> sorted ids."""
    con = duckdb.connect()
    con.execute(f"create table t as select * from read_parquet({table_dir[1]!r})")

    def ids(where):
        return sorted(r[0] for r in con.execute(f"select id from t where {where}").fetchall())

    yield ids
    con.close()


def _sql_literal(column, s, duck):
    """The explicit bound in SQL: DATE for a date column at midnight, else a timestamp."""
    t = dt.datetime.fromisoformat(s)
    if column == "d" and t == dt.datetime.combine(t.date(), dt.time()):
        return f"DATE '{t.date().isoformat()}'"
    text = t.isoformat(sep=" ", timespec="microseconds")
    if duck and column == "ts_us":
        return f"TIMESTAMPTZ '{text}+00'"
    if duck and column == "ts_ns":
        return f"CAST('{text}' AS TIMESTAMP_NS)"
    return f"TIMESTAMP '{text}'"


def _explicit(column, text, duck=False):
    return " OR ".join(f"({column} >= {_sql_literal(column, a, duck)} AND {column} < {_sql_literal(column, b, duck)})"
                       for a, b in FORMS[text])


def _ids(table, where):
    return sorted(table.scan(where, columns=["id"]).to_table()["id"].to_pylist())


def test_interval_forms_equal_explicit_ranges_and_duckdb(table_dir, duck):
    root, _ = table_dir
    seen = {"rows": 0, "empty": 0, "pruned": 0, "always": 0, "cases": 0}
    with qdbpm.open_table(root) as table:
        for text in sorted(FORMS):
            for c in COLUMNS:
                for neg in (False, True):
                    form = f"{c} {'NOT ' if neg else ''}IN '{text}'"
                    explicit = ("NOT " if neg else "") + f"({_explicit(c, text)})"
                    sql = ("NOT " if neg else "") + f"({_explicit(c, text, duck=True)})"
                    want = duck(sql)
                    got = _ids(table, form)
                    assert got == want, f"{form}: {len(got)} rows, DuckDB {len(want)} for {sql}"
                    assert _ids(table, explicit) == want, explicit
                    masks, masks_explicit = table.prune_masks(form), table.prune_masks(explicit)
                    assert masks.keys() == masks_explicit.keys()
                    for p in masks:
                        assert np.array_equal(masks[p], masks_explicit[p]), (form, p)
                    classes, classes_explicit = table.classify_masks(form), table.classify_masks(explicit)
                    for p in classes:
                        assert all(np.array_equal(a, b) for a, b in zip(classes[p], classes_explicit[p])), (form, p)
                    seen["cases"] += 1
                    seen["rows"] += bool(want)
                    seen["empty"] += not want
                    seen["pruned"] += sum(int((~m).sum()) for m in masks.values())
                    seen["always"] += sum(int(a.sum()) for _, a in classes.values())
    # Not vacuous: forms select rows on every column kind, pruning drops and ALWAYS marks row groups.
    assert seen["cases"] == len(FORMS) * len(COLUMNS) * 2
    assert seen["rows"] > seen["cases"] * 3 // 4, seen
    assert seen["pruned"] > 10 * seen["cases"], seen
    assert seen["always"] > 0, seen


def test_date_column_month_is_duckdb_month(table_dir, duck):
    """`d IN '2024-01'` is the January dates: DuckDB's `d >= DATE '2024-01-01' AND d < DATE '2024-02-01'`."""
    root, files = table_dir
    want = duck("d >= DATE '2024-01-01' AND d < DATE '2024-02-01'")
    dates = pq.ParquetFile(files[0]).read(columns=["d"]).column(0).to_pylist()
    days = {d for d in dates if d is not None and d.year == 2024 and d.month == 1}
    assert min(days) == dt.date(2024, 1, 1) and max(days) == dt.date(2024, 1, 31) and len(days) > 20
    with qdbpm.open_table(root) as table:
        assert _ids(table, "d IN '2024-01'") == want
        assert _ids(table, "d IN '2024-01-15T09:30'") == []  # no date lies inside a minute after midnight
        assert _ids(table, "d IN '2024-01-15T00:00'") == _ids(table, "d = DATE '2024-01-15'")


def test_intervals_combine_with_other_conditions(table_dir, duck):
    root, _ = table_dir
    cases = {
        "(ts_ns IN '2024-01-15T09' OR ts_ms IN '2024-01-16;6h') AND d IS NOT NULL":
            "(ts_ns >= CAST('2024-01-15 09:00:00' AS TIMESTAMP_NS) AND ts_ns < CAST('2024-01-15 10:00:00' AS "
            "TIMESTAMP_NS) OR ts_ms >= TIMESTAMP '2024-01-16 00:00:00' AND ts_ms < TIMESTAMP '2024-01-16 06:00:00') "
            "AND d IS NOT NULL",
        "ts_us IN '2024-01' AND ts_us NOT IN '2024-01-15;2d' AND id >= 1000000":
            "ts_us >= TIMESTAMPTZ '2024-01-01 00:00:00+00' AND ts_us < TIMESTAMPTZ '2024-02-01 00:00:00+00' AND "
            "NOT (ts_us >= TIMESTAMPTZ '2024-01-15 00:00:00+00' AND ts_us < TIMESTAMPTZ '2024-01-17 00:00:00+00') "
            "AND id >= 1000000",
    }
    with qdbpm.open_table(root) as table:
        for where, sql in cases.items():
            want = duck(sql)
            assert want and _ids(table, where) == want, where


def test_interval_on_a_non_temporal_column_is_a_predicate_error(table_dir):
    root, _ = table_dir
    with qdbpm.open_table(root) as table:
        with pytest.raises(PredicateError, match="does not fit column 'id'"):
            table.prune_masks("id IN '2024-01'")
        with pytest.raises(PredicateError, match="does not fit column 'id'"):
            table.scan("id IN '2024-01'").to_table()
