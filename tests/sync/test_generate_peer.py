"""qdbpm.generate end to end on files others wrote: every peer data file -> `_pm` -> qdbpm.open,
checked field by field (support.generate_checks.check_pm); corrupt and encrypted inputs and bad
QuestDB JSON raise ParquetFormatError and nothing else."""

import glob
import json
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import qdbpm
from qdbpm.pm import layout as L
from qdbpm.parquet.bloom_header import parse_bloom_header
from qdbpm.errors import ParquetFormatError
from qdbpm.sync.generate import generate

from conftest import PEER_DATA
from conftest import read_bytes as file_bytes
from support.generate_checks import check_pm
from support.parquet_oracle import footer_meta, from_thrift, pyarrow_reads
from support.questdb_files import write_questdb

# --- peer data -----------------------------------------------------------------------------------------

PEER_FILES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(PEER_DATA, "*"))
                    if not p.endswith((".md", ".csv")))


def test_peer_data_is_there():
    assert len([f for f in PEER_FILES if f.endswith(".parquet")]) >= 50


@pytest.mark.parametrize("name", PEER_FILES)
def test_peer_file_generates(tmp_path, name):
    path = os.path.join(PEER_DATA, name)
    pm = str(tmp_path / "_pm")
    if not name.endswith(".parquet"):  # the two bloom filter blobs: not Parquet files
        for mode in ("inline", "external", None):
            with pytest.raises(ParquetFormatError):
                generate(path, pm, bloom=mode)
        assert not os.path.exists(pm)
        return
    for mode in ("inline", "external", None):
        size = generate(path, pm, bloom=mode)
        assert size == os.path.getsize(pm)
        seen = check_pm(pm, path, bloom=mode)
        assert seen["chunks"] > 0 or name == "null_list.parquet" or seen["chunks"] == 0
        if pyarrow_reads(path):
            assert seen["pyarrow"] == seen["chunks"]
        else:
            assert name == "incorrect_map_schema.parquet"  # see test_parquet_footer.PYARROW_REJECTS


def test_peer_files_together_cover_the_comparisons(tmp_path):
    """Across the peer files the comparator really compares typed stats, OOL stats and nested levels."""
    totals = {"chunks": 0, "typed": 0, "stats": 0}
    ool = nested = 0
    for name in PEER_FILES:
        if not name.endswith(".parquet"):
            continue
        path, pm = os.path.join(PEER_DATA, name), str(tmp_path / name)
        generate(path, pm, bloom=None)
        seen = check_pm(pm, path, bloom=None)
        for k in totals:
            totals[k] += seen[k]
        with qdbpm.open(pm) as m:
            ool += int(((m.chunks["stat_flags"] & L.STAT_MIN_PRESENT) != 0).sum()
                       - ((m.chunks["stat_flags"] & L.STAT_MIN_INLINED) != 0).sum())
            nested += int((m.columns["max_rep_level"] > 0).sum())
    assert totals["chunks"] > 450 and totals["typed"] > 300 and totals["stats"] > 350
    assert ool >= 10 and nested > 30


# --- corrupt inputs: ParquetFormatError, never another exception -------------------------------------

def bloom_questdb_file(path):
    """A small file with bloom filters and a QuestDB JSON: the parts peer data lacks."""
    n = 300
    t = pa.table({"ts": pa.array(np.arange(n) * 1000, pa.timestamp("us")), "x": np.arange(n) % 17,
                  "s": [f"v{i % 23}" for i in range(n)]})
    doc = {"version": 1, "schema": [{"column_type": L.QDB_TIMESTAMP | L.QDB_FLAG_DESIGNATED_TIMESTAMP, "column_top": 0},
                                    {"column_type": L.QDB_LONG, "column_top": 0},
                                    {"column_type": L.QDB_VARCHAR, "column_top": 0, "ascii": True}],
           "unused_bytes": 77}
    return write_questdb(path, t, doc, row_group_size=100, bloom_filter_options={"x": True, "s": True})


def corrupt_cases(tmp_path, count, seed=7):
    rng = random.Random(seed)
    sources = [os.path.join(PEER_DATA, n) for n in PEER_FILES if n.endswith(".parquet")
               and os.path.getsize(os.path.join(PEER_DATA, n)) < 100_000]
    special = bloom_questdb_file(str(tmp_path / "special.parquet"))
    sources += [special] * (len(sources) // 2)
    for i in range(count):
        src = rng.choice(sources)
        data = bytearray(file_bytes(src))
        f_off, f_len, _ = footer_meta(bytes(data))
        how = rng.random()
        if how < 0.55:  # bytes of the footer
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(f_off, len(data) - 8)] = rng.randrange(256)
        elif how < 0.7:  # truncation anywhere
            data = data[: rng.randrange(len(data))]
        elif how < 0.85:  # the footer length / magic
            k = rng.randrange(len(data) - 8, len(data))
            data[k] = rng.randrange(256)
        else:  # the data region: bloom filter headers and bitsets
            for _ in range(rng.randint(1, 30)):
                data[rng.randrange(4, f_off)] = rng.randrange(256)
        yield i, bytes(data), rng.choice(["inline", "external", None])


def test_corrupt_files_raise_only_parquet_format_error(tmp_path):
    path, pm = str(tmp_path / "x.parquet"), str(tmp_path / "_pm")
    outcomes = {"ok": 0, "error": 0}
    for i, data, mode in corrupt_cases(tmp_path, 1500):
        with open(path, "wb") as f:
            f.write(data)
        try:
            generate(path, pm, bloom=mode)
        except ParquetFormatError as e:
            assert str(e), i
            outcomes["error"] += 1
            continue
        # Whatever generated is a valid _pm of the file as it is.
        with qdbpm.open(pm) as m:
            assert m.parquet_size == len(data)
        outcomes["ok"] += 1
    assert outcomes["ok"] > 100 and outcomes["error"] > 500, outcomes


@pytest.mark.parametrize("plaintext_footer", [False, True])
def test_encrypted_files_raise_parquet_format_error(tmp_path, plaintext_footer):
    """Modular encryption, footer encrypted (PARE) or plaintext with encrypted columns."""
    import base64

    import pyarrow.parquet.encryption as pe

    class Kms(pe.KmsClient):
        def __init__(self, config):
            pe.KmsClient.__init__(self)

        def wrap_key(self, key_bytes, master_key_identifier):
            return base64.b64encode(key_bytes)

        def unwrap_key(self, wrapped_key, master_key_identifier):
            return base64.b64decode(wrapped_key)

    cfg = pe.EncryptionConfiguration(footer_key="f", column_keys={"c": ["a"]}, plaintext_footer=plaintext_footer,
                                     double_wrapping=False)
    props = pe.CryptoFactory(lambda config: Kms(config)).file_encryption_properties(pe.KmsConnectionConfig(), cfg)
    path, pm = str(tmp_path / "enc.parquet"), str(tmp_path / "_pm")
    pq.write_table(pa.table({"a": np.arange(10), "b": np.arange(10)}), path, encryption_properties=props)
    for mode in ("inline", "external", None):
        with pytest.raises(ParquetFormatError, match="encrypt"):
            generate(path, pm, bloom=mode)
    assert not os.path.exists(pm)


@pytest.mark.parametrize("doc, message", [
    ("{not json", "not valid JSON"),
    ("[" * 100_000, "not valid JSON"),
    (json.dumps({"schema": 5}), "no 'schema' list"),
    (json.dumps({"schema": [{"column_type": 6}]}), "lists 1 columns"),
    (json.dumps({"schema": [{"column_type": 6}, {"column_type": 1e400}]}), "i32 column_type"),
    (json.dumps({"schema": [{"column_type": 6}, {"column_type": 2 ** 40}]}), "i32 column_type"),
    (json.dumps({"schema": [{"column_type": 6}, {"column_type": "6"}]}), "i32 column_type"),
    (json.dumps({"schema": [{"column_type": 6}, {}]}), "i32 column_type"),
    (json.dumps({"schema": [{"column_type": 6}, {"column_type": 6}], "unused_bytes": 2 ** 64}), "unused_bytes"),
    (json.dumps({"schema": [{"column_type": 6}, {"column_type": 6}], "unused_bytes": 1.5}), "unused_bytes"),
])
def test_bad_questdb_json_is_a_format_error(tmp_path, doc, message):
    path = str(tmp_path / "q.parquet")
    write_questdb(path, pa.table({"a": [1, 2], "b": [3, 4]}), doc)
    with pytest.raises(ParquetFormatError, match=message):
        generate(path, str(tmp_path / "_pm"))


def test_unusable_bloom_filters_are_left_out(tmp_path):
    """A chunk whose filter header is not BLOCK / XXHASH / UNCOMPRESSED has no filter; others keep theirs."""
    path = bloom_questdb_file(str(tmp_path / "b.parquet"))
    data = bytearray(file_bytes(path))
    _, _, meta = footer_meta(bytes(data))
    chunks = from_thrift(meta)["chunks"]
    off = chunks[1, 1]["bloom_offset"]
    nbytes, hlen = parse_bloom_header(bytes(data[off : off + 64]), 0)
    data[off] = 0x16  # num_bytes becomes a field of another type: the header no longer parses
    with open(path, "wb") as f:
        f.write(bytes(data))
    pm = str(tmp_path / "_pm")
    generate(path, pm)
    with qdbpm.open(pm) as m:
        assert m.bloom_filter(1, "x") is None
        assert m.bloom_filter(0, "x") is not None and m.bloom_filter(1, "s") is not None
    check_pm(pm, path)
