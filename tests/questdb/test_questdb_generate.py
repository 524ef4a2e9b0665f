"""qdbpm.generate against QuestDB's own `_pm` files (tests/data/questdb, written by QuestDB 9.4.x's
partition encoder): byte for byte, with the repetition flags QuestDB's encoder gives (OPTIONAL for
every column, REQUIRED for a SYMBOL column whose table never stored a NULL in it, from the symbol
map header), and the Parquet schema's reading (QuestDB's migration path) reading the same rows."""

import os
import shutil
import zipfile

import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.questdb.symbols import NULL_FLAG_OFFSET, symbol_map_files, symbol_not_null
from qdbpm.questdb.table_dir import read_table_dir
from qdbpm.sync.generate import generate
from qdbpm.table.read import read_table

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "questdb")
OPT, REQ = L.column_flags(), L.column_flags(repetition=L.REPETITION_REQUIRED)
LKIG = L.COLUMN_FLAG_LOCAL_KEY_IS_GLOBAL


@pytest.fixture
def tables(tmp_path):
    out = {}
    for z in ("legacy_bool~11", "legacy_all~18"):
        with zipfile.ZipFile(os.path.join(DATA, f"{z}.zip")) as f:
            f.extractall(tmp_path / z)
        out[z] = str(tmp_path / z / z)
    return out


def partitions(tables):
    return [os.path.join(root, p.name) for root in tables.values() for p in read_table_dir(root).partitions]


def read(path):
    with open(path, "rb") as f:
        return f.read()


def flags_of(pm_path):
    with qdbpm.open(pm_path) as pm:
        return dict(zip(pm.column_names, pm.columns["flags"].tolist()))


@pytest.mark.parametrize("bloom", ["inline", None, "external"])
def test_generate_reproduces_every_questdb_pm_byte_for_byte(tables, tmp_path, bloom):
    parts = partitions(tables)
    assert len(parts) == 3
    for d in parts:
        want = read(os.path.join(d, "_pm"))
        out = os.path.join(d, "_pm.qdbpm")  # beside it: the table's symbol maps are found
        generate(os.path.join(d, "data.parquet"), out, bloom=bloom)
        assert read(out) == want, d
        # The same file outside its table: the symbol flags come from its null counts, which
        # agree with the table's symbol maps here.
        alone = tmp_path / "alone" / os.path.basename(d)
        alone.mkdir(parents=True)
        shutil.copy(os.path.join(d, "data.parquet"), alone / "data.parquet")
        generate(str(alone / "data.parquet"), bloom=bloom)
        assert read(alone / "_pm") == want, d


def test_questdb_flags_are_the_encoders_not_the_parquet_schemas(tables):
    d = partitions({"a": tables["legacy_all~18"]})[0]
    schema = pq.read_schema(os.path.join(d, "data.parquet"))
    flags = flags_of(os.path.join(d, "_pm"))
    # QuestDB writes these REQUIRED in Parquet and OPTIONAL in `_pm`
    for name in ("ts", "c_bool", "c_byte", "c_short", "c_char", "n_bool"):
        assert not schema.field(name).nullable and flags[name] == OPT, name
    # and a symbol column OPTIONAL in Parquet REQUIRED in `_pm` when its map holds no NULL
    assert schema.field("c_symbol").nullable and flags["c_symbol"] == REQ | LKIG
    assert flags["n_symbol"] == OPT | LKIG
    assert symbol_not_null(tables["legacy_all~18"], ["c_symbol", "n_symbol", "c_int"]) == \
        {"c_symbol": True, "n_symbol": False}
    # DECIMAL64(18,4): bit 20 of its code is a scale bit, not the descending flag
    assert flags["c_dec"] == OPT


def test_the_table_symbol_map_decides_over_the_files_null_counts(tables, tmp_path):
    root = tables["legacy_all~18"]
    d = partitions({"a": root})[0]
    parquet = os.path.join(d, "data.parquet")
    assert pq.read_table(parquet, columns=["c_symbol"])["c_symbol"].null_count == 0
    # The table stored a NULL in c_symbol in some other partition: QuestDB's encoder describes it
    # OPTIONAL although this partition has none, and so does qdbpm inside the table.
    with open(os.path.join(root, "c_symbol.o"), "r+b") as f:
        f.seek(NULL_FLAG_OFFSET)
        f.write(b"\x01")
    generate(parquet, os.path.join(d, "_pm.qdbpm"))
    assert flags_of(os.path.join(d, "_pm.qdbpm"))["c_symbol"] == OPT | LKIG
    # Two versions of the map side by side (which is live is in `_cv`): the file's null counts.
    shutil.copy(os.path.join(root, "c_symbol.o"), os.path.join(root, "c_symbol.o.7"))
    assert "c_symbol" not in symbol_map_files(root, ["c_symbol"])
    generate(parquet, os.path.join(d, "_pm.qdbpm"))
    assert flags_of(os.path.join(d, "_pm.qdbpm"))["c_symbol"] == REQ | LKIG


@pytest.mark.parametrize("content,match", [(b"\0" * 5, "shorter"), (b"\0" * 8 + b"\x02" + b"\0" * 55, "not 0 or 1")])
def test_a_corrupt_symbol_map_header_is_a_clear_error(tables, content, match):
    root = tables["legacy_all~18"]
    with open(os.path.join(root, "c_symbol.o"), "wb") as f:
        f.write(content)
    d = partitions({"a": root})[0]
    with pytest.raises(qdbpm.CorruptFileError, match=match):
        generate(os.path.join(d, "data.parquet"), os.path.join(d, "_pm.qdbpm"))
    assert not os.path.exists(os.path.join(d, "_pm.qdbpm"))


def test_both_readings_read_and_prune_the_same(tables, tmp_path):
    """repetition="parquet" (QuestDB's migration path) describes columns as the Parquet schema does;
    a table of such `_pm` files reads, counts and prunes exactly as one of QuestDB's own."""
    root = tables["legacy_all~18"]
    d = partitions({"a": root})[0]
    parquet = os.path.join(d, "data.parquet")
    schema = pq.read_schema(parquet)
    mirror = tmp_path / "mirror" / "p"
    mirror.mkdir(parents=True)
    shutil.copy(parquet, mirror / "data.parquet")
    generate(str(mirror / "data.parquet"), repetition="parquet")
    flags = flags_of(str(mirror / "_pm"))
    for f in schema:
        want = REQ if not f.nullable else OPT
        assert flags[f.name] & L.COLUMN_FLAG_REPETITION_MASK == want, f.name
    assert read(mirror / "_pm") != read(os.path.join(d, "_pm"))
    native = tmp_path / "native" / "p"
    native.mkdir(parents=True)
    shutil.copy(parquet, native / "data.parquet")
    shutil.copy(os.path.join(d, "_pm"), native / "_pm")  # QuestDB's own
    for where in ("c_byte = 0", "n_byte = 0", "c_bool = true", "c_symbol IS NULL", "c_symbol IS NOT NULL",
                  "ts > '2024-01-01T00:00:00.000100'", "c_dec IS NOT NULL"):
        a = read_table(str(tmp_path / "mirror"), where=where)
        b = read_table(str(tmp_path / "native"), where=where)
        assert a.equals(b), where
        counts, kept = [], []
        for name in ("mirror", "native"):
            with qdbpm.open_table(str(tmp_path / name)) as t:
                counts.append(t.scan(where).count())
                kept.append((t.prune(where), {k: [m.tolist() for m in v] for k, v in t.classify_masks(where).items()}))
        assert counts[0] == counts[1] == a.num_rows, where
        assert kept[0][0].equals(kept[1][0]) and kept[0][1] == kept[1][1], where


def test_an_unknown_repetition_rule_is_refused(tables):
    d = partitions({"a": tables["legacy_bool~11"]})[0]
    with pytest.raises(qdbpm.PmError, match="repetition must be"):
        generate(os.path.join(d, "data.parquet"), os.path.join(d, "_pm.x"), repetition="schema")
    assert not os.path.exists(os.path.join(d, "_pm.x"))


def test_cli_generate_takes_the_repetition_rule(tables, tmp_path):
    from qdbpm.cli.main import main

    d = partitions({"a": tables["legacy_all~18"]})[0]
    want = read(os.path.join(d, "_pm"))
    os.remove(os.path.join(d, "_pm"))
    assert main(["generate", "--jobs", "1", d]) == 0
    assert read(os.path.join(d, "_pm")) == want  # QuestDB's bytes, from inside its table
    assert main(["generate", "--jobs", "1", "--repetition", "parquet", d]) == 0
    assert flags_of(os.path.join(d, "_pm"))["ts"] == REQ
