"""The byte-level row-group encoder (qdbpm/parquet/build.py encode_row_groups) against its slow,
obviously correct reference: row_group_struct encoded through the general compact Encoder. Same
bytes for every spec it takes; None (the general path) for every spec it does not."""

import random

import pytest

from qdbpm.parquet import build as B
from qdbpm.parquet import constants as C
from qdbpm.parquet.compact import Encoded, Struct, T, TList, encode_value


def reference(rgs) -> bytes:
    return encode_value(T.LIST, TList(T.STRUCT, [B.row_group_struct(rg) for rg in rgs]))


HUGE = [True]  # the footer test turns i64's largest value off: its sums must stay in i64


def big(rng):
    if HUGE[0] and rng.random() < 0.001:
        return 2 ** 63 - 1  # sums over such chunks leave i64: the general path's ValueError, None here
    return rng.choice([0, 1, 63, 64, 127, 128, 300, 16_383, 16_384, 2 ** 31 - 1, 2 ** 40])


def chunk(rng):
    path = [rng.choice(["a", "ts", "ünï", "x" * 20]) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.3:
        path = [p.encode() for p in path]
    return B.ColumnChunkSpec(
        type=rng.randint(0, 7), path=path, codec=rng.randint(0, 7), num_values=big(rng),
        total_uncompressed_size=big(rng), total_compressed_size=big(rng), data_page_offset=big(rng),
        dictionary_page_offset=rng.choice([None, None, 4, big(rng)]),
        encodings=[rng.choice([0, 2, 3, 4, 5, 6, 7, 8, 9]) for _ in range(rng.randint(0, 4))],
    )


def row_group(rng):
    n = rng.choice([0, 1, 2, 8, 14, 15, 16, 40])
    return B.RowGroupSpec(columns=[chunk(rng) for _ in range(n)], num_rows=big(rng),
                          total_byte_size=rng.choice([None, big(rng)]), file_offset=rng.choice([None, None, big(rng)]))


@pytest.mark.parametrize("seed", range(200))
def test_same_bytes_as_the_struct_path(seed):
    rng = random.Random(seed)
    rgs = [row_group(rng) for _ in range(rng.choice([0, 1, 2, 14, 15, 20]))]
    got = B.encode_row_groups(rgs)
    try:
        want = reference(rgs)
    except ValueError:  # a value past its Thrift type: left to the general path, which refuses it
        assert got is None
        return
    assert isinstance(got, Encoded) and bytes(got) == want


@pytest.mark.parametrize("edit", [
    lambda rg: setattr(rg.columns[0], "statistics", Struct().set(C.ST_NULL_COUNT, T.I64, 0)),
    lambda rg: setattr(rg.columns[0], "index_page_offset", 9),
    lambda rg: setattr(rg, "sorting_columns", [(0, False, True)]),
    lambda rg: setattr(rg, "ordinal", 3),
    lambda rg: setattr(rg.columns[0], "num_values", 2 ** 63),  # past i64: the general path refuses it
    lambda rg: setattr(rg.columns[0], "codec", 2 ** 31),  # past i32
    lambda rg: setattr(rg, "num_rows", -(2 ** 63) - 1),
])
def test_what_it_does_not_take_goes_the_general_way(edit):
    rng = random.Random(7)
    rg = row_group(rng)
    while not rg.columns:
        rg = row_group(rng)
    edit(rg)
    assert B.encode_row_groups([rg]) is None
    assert B.encode_row_groups([B.row_group_struct(row_group(rng))]) is None  # a Struct as it is


@pytest.mark.parametrize("seed", range(20))
def test_footers_with_encoded_schema_and_key_values_are_the_same_bytes(seed):
    rng = random.Random(seed)
    HUGE[0] = False
    try:
        rgs = [row_group(rng) for _ in range(3)]
    finally:
        HUGE[0] = True
    schema = [B.SchemaElement(name="schema", num_children=1),
              B.SchemaElement(name="a", type=2, repetition_type=1)]
    kv = [("ARROW:schema", "x" * rng.randint(0, 300)), ("k", None)]
    want = B.build_file_metadata(schema, rgs, key_value_metadata=kv, created_by="qdbpm")
    structs = [B.schema_element_struct(el) for el in schema]
    kv_structs = [Struct().set(C.KV_KEY, T.BINARY, k.encode()) for k, _ in kv]
    kv_structs[0].set(C.KV_VALUE, T.BINARY, kv[0][1].encode())
    got = B.build_file_metadata(B.encoded_list(T.STRUCT, structs), rgs,
                                key_value_metadata=B.encoded_list(T.STRUCT, kv_structs), created_by="qdbpm")
    assert got == want
