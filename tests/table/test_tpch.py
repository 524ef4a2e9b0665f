"""The WHERE clauses of the 22 TPC-H queries, one table at a time, against DuckDB (issue 15).

Data: tpchgen-cli at SF 0.05, re-written by DuckDB sorted by a date (support.tpch). Each query's
WHERE clause is restricted to the columns of one table: joins are rewritten away and every filter
on that table's columns is kept as the query writes it (INTERVAL arithmetic, column-vs-column
comparisons, LIKE / NOT LIKE, OR of ANDs, substring). An uncorrelated subquery becomes the
literal it evaluates to (Q16's, Q18's, Q20's supplier / order / part keys, Q22's average
balance), computed by DuckDB over the same files; correlated ones (Q2, Q17, Q20's
ps_availqty, Q21's EXISTS) join and are left out. Each case's scan gives DuckDB's rows and count,
and the date-range cases prune row groups.
"""

import pyarrow.parquet as pq
import pytest

import qdbpm

from support.table_files import duckdb_rows
from support.tpch import build

Q22_CODES = "('13', '31', '23', '29', '30', '18', '17')"

# (query, table, WHERE restricted to the table, columns the query reads from it, prunes by date)
CASES = [
    ("Q1", "lineitem", "l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY",
     "l_returnflag l_linestatus l_quantity l_extendedprice l_discount l_tax", True),
    ("Q2", "part", "p_size = 15 AND p_type LIKE '%BRASS'", "p_partkey p_mfgr", False),
    ("Q2", "region", "r_name = 'EUROPE'", "r_regionkey", False),
    ("Q3", "customer", "c_mktsegment = 'BUILDING'", "c_custkey", False),
    ("Q3", "orders", "o_orderdate < DATE '1995-03-15'", "o_orderkey o_custkey o_orderdate o_shippriority", True),
    ("Q3", "lineitem", "l_shipdate > DATE '1995-03-15'", "l_orderkey l_extendedprice l_discount", True),
    ("Q4", "orders", "o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-07-01' + INTERVAL '3' MONTH",
     "o_orderkey o_orderpriority", True),
    ("Q4", "lineitem", "l_commitdate < l_receiptdate", "l_orderkey", False),
    ("Q5", "region", "r_name = 'ASIA'", "r_regionkey", False),
    ("Q5", "orders", "o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1994-01-01' + INTERVAL '1' YEAR",
     "o_orderkey o_custkey", True),
    ("Q6", "lineitem", "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR "
     "AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24", "l_extendedprice l_discount", True),
    # (n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY') OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE'), on n1
    ("Q7", "nation", "(n_name = 'FRANCE') OR (n_name = 'GERMANY')", "n_nationkey n_name", False),
    ("Q7", "lineitem", "l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'",
     "l_orderkey l_suppkey l_shipdate l_extendedprice l_discount", True),
    ("Q8", "region", "r_name = 'AMERICA'", "r_regionkey", False),
    ("Q8", "orders", "o_orderdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'",
     "o_orderkey o_custkey o_orderdate", True),
    ("Q8", "part", "p_type = 'ECONOMY ANODIZED STEEL'", "p_partkey", False),
    ("Q9", "part", "p_name LIKE '%green%'", "p_partkey", False),
    ("Q10", "orders", "o_orderdate >= DATE '1993-10-01' AND o_orderdate < DATE '1993-10-01' + INTERVAL '3' MONTH",
     "o_orderkey o_custkey", True),
    ("Q10", "lineitem", "l_returnflag = 'R'", "l_orderkey l_extendedprice l_discount", False),
    ("Q11", "nation", "n_name = 'GERMANY'", "n_nationkey", False),
    ("Q12", "lineitem", "l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate "
     "AND l_shipdate < l_commitdate AND l_receiptdate >= DATE '1994-01-01' "
     "AND l_receiptdate < DATE '1994-01-01' + INTERVAL '1' YEAR", "l_orderkey l_shipmode", True),
    ("Q13", "orders", "o_comment NOT LIKE '%special%requests%'", "o_orderkey o_custkey", False),
    ("Q14", "lineitem", "l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-09-01' + INTERVAL '1' MONTH",
     "l_partkey l_extendedprice l_discount", True),
    # Q14's SELECT sums CASE WHEN p_type LIKE 'PROMO%': that condition, as a filter
    ("Q14", "part", "p_type LIKE 'PROMO%'", "p_partkey p_type", False),
    ("Q15", "lineitem", "l_shipdate >= DATE '1996-01-01' AND l_shipdate < DATE '1996-01-01' + INTERVAL '3' MONTH",
     "l_suppkey l_extendedprice l_discount", True),
    ("Q16", "part", "p_brand <> 'Brand#45' AND p_type NOT LIKE 'MEDIUM POLISHED%' "
     "AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)", "p_partkey p_brand p_type p_size", False),
    ("Q16", "supplier", "s_comment LIKE '%Customer%Complaints%'", "s_suppkey", False),
    ("Q16", "partsupp", "ps_suppkey NOT IN {q16_suppkeys}", "ps_partkey ps_suppkey", False),
    ("Q17", "part", "p_brand = 'Brand#23' AND p_container = 'MED BOX'", "p_partkey", False),
    ("Q18", "orders", "o_orderkey IN {q18_orderkeys}", "o_orderkey o_custkey o_orderdate o_totalprice", False),
    ("Q18", "lineitem", "l_orderkey IN {q18_orderkeys}", "l_orderkey l_quantity", False),
    ("Q19", "lineitem",
     "(l_quantity >= 1 AND l_quantity <= 1 + 10 AND l_shipmode IN ('AIR', 'AIR REG') "
     "AND l_shipinstruct = 'DELIVER IN PERSON') "
     "OR (l_quantity >= 10 AND l_quantity <= 10 + 10 AND l_shipmode IN ('AIR', 'AIR REG') "
     "AND l_shipinstruct = 'DELIVER IN PERSON') "
     "OR (l_quantity >= 20 AND l_quantity <= 20 + 10 AND l_shipmode IN ('AIR', 'AIR REG') "
     "AND l_shipinstruct = 'DELIVER IN PERSON')", "l_partkey l_quantity l_extendedprice l_discount", False),
    ("Q19", "part",
     "(p_brand = 'Brand#12' AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG') "
     "AND p_size BETWEEN 1 AND 5) "
     "OR (p_brand = 'Brand#23' AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK') "
     "AND p_size BETWEEN 1 AND 10) "
     "OR (p_brand = 'Brand#34' AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG') "
     "AND p_size BETWEEN 1 AND 15)", "p_partkey p_brand p_container p_size", False),
    ("Q20", "part", "p_name LIKE 'forest%'", "p_partkey", False),
    ("Q20", "partsupp", "ps_partkey IN {q20_partkeys}", "ps_partkey ps_suppkey ps_availqty", False),
    ("Q20", "lineitem", "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR",
     "l_partkey l_suppkey l_quantity", True),
    ("Q20", "nation", "n_name = 'CANADA'", "n_nationkey", False),
    ("Q21", "lineitem", "l_receiptdate > l_commitdate", "l_orderkey l_suppkey", False),
    ("Q21", "orders", "o_orderstatus = 'F'", "o_orderkey", False),
    ("Q21", "nation", "n_name = 'SAUDI ARABIA'", "n_nationkey", False),
    # the subquery's WHERE, then the outer one with the subquery's average as a literal
    ("Q22", "customer", f"substring(c_phone FROM 1 FOR 2) IN {Q22_CODES} AND c_acctbal > 0.00", "c_acctbal", False),
    ("Q22", "customer", f"substring(c_phone, 1, 2) IN {Q22_CODES} AND c_acctbal > {{q22_avg}}",
     "c_custkey c_phone c_acctbal", False),
]

# Uncorrelated subqueries, each evaluated to a literal over the same files (TABLE: read_parquet).
SUBQUERIES = {
    "q16_suppkeys": ("supplier", "SELECT s_suppkey FROM TABLE WHERE s_comment LIKE '%Customer%Complaints%'"),
    "q18_orderkeys": ("lineitem", "SELECT l_orderkey FROM TABLE GROUP BY l_orderkey HAVING sum(l_quantity) > 300"),
    "q20_partkeys": ("part", "SELECT p_partkey FROM TABLE WHERE p_name LIKE 'forest%'"),
    "q22_avg": ("customer", f"SELECT avg(c_acctbal) FROM TABLE WHERE c_acctbal > 0.00 "
                            f"AND substring(c_phone, 1, 2) IN {Q22_CODES}"),
}


@pytest.fixture(scope="module")
def tpch(tmp_path_factory):
    root = tmp_path_factory.mktemp("tpch")
    files = build(str(root))
    params = {}
    for name, (table, sql) in SUBQUERIES.items():
        rows = duckdb_rows(files[table], sql.replace("TABLE", "FILES"))
        if name.endswith("_avg"):
            params[name] = repr(rows[0][0])
        else:
            assert rows, name  # an empty IN list is no SQL: the data must give some keys
            params[name] = "(" + ", ".join(str(k) for k in sorted(r[0] for r in rows)) + ")"
    tables = {t: qdbpm.open_table(root / t) for t in files}
    yield files, params, tables
    for t in tables.values():
        t.close()


def _ids():
    return [f"{q}-{t}-{i}" for i, (q, t, *_) in enumerate(CASES)]


@pytest.mark.parametrize("query, table, where, columns, prunes", CASES, ids=_ids())
def test_tpch_where_equals_duckdb(tpch, query, table, where, columns, prunes):
    files, params, tables = tpch
    where, cols = where.format(**params), columns.split()
    want = sorted(duckdb_rows(files[table], f"SELECT {', '.join(cols)} FROM FILES WHERE {where}"))
    scan = tables[table].scan(where, cols)
    got = scan.to_table()
    assert got.column_names == cols
    assert sorted(zip(*(got.column(c).to_pylist() for c in cols))) == want, f"{query} {table}: {where}"
    assert scan.count() == len(want)
    assert want, f"{query} {table}: the data gives no matching row, so the case shows nothing"
    kept = scan.row_groups().num_rows
    total = sum(pq.ParquetFile(f).metadata.num_row_groups for f in files[table])
    assert kept <= total
    if prunes:
        assert kept < total, f"{query} {table}: a date range pruned no row group ({kept} of {total})"
