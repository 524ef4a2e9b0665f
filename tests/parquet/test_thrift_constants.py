"""The Cython kernel's C constants agree with their Python homes.

`_thrift` keeps its own copies of wire types, caps, enum tables and, per struct, the wire type each
known field id must have; `qdbpm.parquet.constants` (re-exported by `compact`) and `pm.layout` are
where Python code reads them. (STAT_BITS, ENCODING_BITS and CHUNK_LAYOUT: test_parquet_footer.py.)
"""

from qdbpm.parquet import _thrift
from qdbpm.parquet import compact
from qdbpm.parquet import constants as C
from qdbpm.parquet.compact import T
from qdbpm.pm import layout as L

K = _thrift.CONSTANTS


def test_wire_types_and_names():
    assert K["wire_types"] == {n: getattr(T, n) for n in K["wire_types"]}
    assert set(K["wire_types"]) == {n for n in vars(T) if n.isupper() and n != "NAMES"} - {"UUID"}
    assert K["type_names"] == tuple(T.NAMES[t] for t in range(T.STRUCT + 1))


def test_caps_and_enums():
    assert K["MAX_DEPTH"] == compact.MAX_DEPTH
    assert K["MAX_CODEC"] == L.CODEC_MAX == len(L.CODEC_NAMES) - 1
    assert K["MAX_PHYSICAL_TYPE"] == L.PHYSICAL_TYPE_MAX
    assert K["physical_type_names"] == tuple(L.PHYSICAL_TYPE_NAMES)
    assert K["logical_empty"] == {C.LOGICAL_TYPE_IDS[n]: n for n in C.LOGICAL_EMPTY}
    with_fields = {"DECIMAL": "DecimalType", "TIME": "TimeType", "TIMESTAMP": "TimestampType",
                   "INTEGER": "IntType", "VARIANT": "VariantType", "GEOMETRY": "GeometryType",
                   "GEOGRAPHY": "GeographyType"}
    assert K["logical_with_fields"] == {C.LOGICAL_TYPE_IDS[k]: v for k, v in with_fields.items()}
    assert set(C.LOGICAL_TYPE_IDS) == set(C.LOGICAL_EMPTY) | set(with_fields)
    assert K["time_units"] == {v: k for k, v in C.TIME_UNIT_IDS.items()}
    bits = K["encoding_bits"]
    assert bits[C.ENCODING_RLE] == bits[C.ENCODING_BIT_PACKED] == 0
    assert bits[C.ENCODING_PLAIN_DICTIONARY] == bits[C.ENCODING_RLE_DICTIONARY] == L.ENC_RLE_DICTIONARY


# parquet.thrift: struct -> {name of its field id in `constants`: the wire type}.
FIELDS = {
    "FileMetaData": {"FMD_VERSION": T.I32, "FMD_SCHEMA": T.LIST, "FMD_NUM_ROWS": T.I64, "FMD_ROW_GROUPS": T.LIST,
                     "FMD_KV": T.LIST, "FMD_CREATED_BY": T.BINARY, "FMD_COLUMN_ORDERS": T.LIST},
    "SchemaElement": {"SE_TYPE": T.I32, "SE_TYPE_LENGTH": T.I32, "SE_REPETITION_TYPE": T.I32, "SE_NAME": T.BINARY,
                      "SE_NUM_CHILDREN": T.I32, "SE_CONVERTED_TYPE": T.I32, "SE_SCALE": T.I32,
                      "SE_PRECISION": T.I32, "SE_FIELD_ID": T.I32, "SE_LOGICAL_TYPE": T.STRUCT},
    "RowGroup": {"RG_COLUMNS": T.LIST, "RG_TOTAL_BYTE_SIZE": T.I64, "RG_NUM_ROWS": T.I64,
                 "RG_SORTING_COLUMNS": T.LIST, "RG_FILE_OFFSET": T.I64, "RG_TOTAL_COMPRESSED_SIZE": T.I64,
                 "RG_ORDINAL": T.I16},
    "ColumnChunk": {"CC_FILE_PATH": T.BINARY, "CC_FILE_OFFSET": T.I64, "CC_META_DATA": T.STRUCT,
                    "CC_OFFSET_INDEX_OFFSET": T.I64, "CC_COLUMN_INDEX_OFFSET": T.I64},
    "ColumnMetaData": {"CMD_TYPE": T.I32, "CMD_ENCODINGS": T.LIST, "CMD_PATH": T.LIST, "CMD_CODEC": T.I32,
                       "CMD_NUM_VALUES": T.I64, "CMD_TOTAL_UNCOMPRESSED": T.I64, "CMD_TOTAL_COMPRESSED": T.I64,
                       "CMD_DATA_PAGE_OFFSET": T.I64, "CMD_INDEX_PAGE_OFFSET": T.I64,
                       "CMD_DICTIONARY_PAGE_OFFSET": T.I64, "CMD_STATISTICS": T.STRUCT,
                       "CMD_BLOOM_FILTER_OFFSET": T.I64},
    "Statistics": {"ST_NULL_COUNT": T.I64, "ST_MAX_VALUE": T.BINARY, "ST_MIN_VALUE": T.BINARY},
    "KeyValue": {"KV_KEY": T.BINARY, "KV_VALUE": T.BINARY},
    "SortingColumn": {"SC_COLUMN_IDX": T.I32, "SC_DESCENDING": T.BOOL, "SC_NULLS_FIRST": T.BOOL},
    "DecimalType": {"DECIMAL_SCALE": T.I32, "DECIMAL_PRECISION": T.I32},
    "TimeType": {"TIME_IS_UTC": T.BOOL, "TIME_UNIT": T.STRUCT},
    "TimestampType": {"TIME_IS_UTC": T.BOOL, "TIME_UNIT": T.STRUCT},
    "IntType": {"INT_BIT_WIDTH": T.BYTE, "INT_IS_SIGNED": T.BOOL},
    "VariantType": {"VARIANT_SPEC_VERSION": T.BYTE},
    "GeometryType": {"GEO_CRS": T.BINARY},
    "GeographyType": {"GEO_CRS": T.BINARY, "GEOGRAPHY_ALGORITHM": T.I32},
}
# The field id constants of the structs the kernel reads (BloomFilterHeader's: Python only).
PREFIXES = ("FMD_", "SE_", "RG_", "CC_", "CMD_", "ST_", "KV_", "SC_", "DECIMAL_", "TIME_", "INT_", "VARIANT_",
            "GEO")


def mask(wire):
    return (1 << T.BOOL | 1 << T.BOOL_FALSE) if wire == T.BOOL else 1 << wire


def test_each_python_field_id_has_its_wire_type_in_the_kernel():
    masks = K["wire_masks"]
    assert set(masks) == set(FIELDS)
    for struct, fields in FIELDS.items():
        for name, wire in fields.items():
            assert masks[struct][getattr(C, name)] == mask(wire), (struct, name)
    ids = {n for n in C.__all__ if n.startswith(PREFIXES) and n != "TIME_UNIT_IDS"}
    assert ids == {n for f in FIELDS.values() for n in f}, "a field id constant this test does not check"
