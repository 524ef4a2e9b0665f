"""The one home of Parquet's numbers in Python: Thrift compact wire types, parquet.thrift field ids
and enum values, the file magic.

Everything here follows parquet.thrift (apache/parquet-format) and the Thrift compact protocol;
`compact` re-exports it all. The Cython kernel `_thrift` keeps C copies of what it needs, for speed;
tests/parquet/test_thrift_constants.py checks them against this module. `_pm`'s own enums (physical
types, codecs, encoding bits, repetition, QuestDB tags) live in `pm.layout`.
"""

__all__ = [
    "MAGIC", "MAGIC_ENCRYPTED", "T",
    # field ids
    "FMD_VERSION", "FMD_SCHEMA", "FMD_NUM_ROWS", "FMD_ROW_GROUPS", "FMD_KV", "FMD_CREATED_BY",
    "FMD_COLUMN_ORDERS",
    "SE_TYPE", "SE_TYPE_LENGTH", "SE_REPETITION_TYPE", "SE_NAME", "SE_NUM_CHILDREN", "SE_CONVERTED_TYPE",
    "SE_SCALE", "SE_PRECISION", "SE_FIELD_ID", "SE_LOGICAL_TYPE",
    "RG_COLUMNS", "RG_TOTAL_BYTE_SIZE", "RG_NUM_ROWS", "RG_SORTING_COLUMNS", "RG_FILE_OFFSET",
    "RG_TOTAL_COMPRESSED_SIZE", "RG_ORDINAL",
    "CC_FILE_PATH", "CC_FILE_OFFSET", "CC_META_DATA", "CC_OFFSET_INDEX_OFFSET", "CC_COLUMN_INDEX_OFFSET",
    "CMD_TYPE", "CMD_ENCODINGS", "CMD_PATH", "CMD_CODEC", "CMD_NUM_VALUES", "CMD_TOTAL_UNCOMPRESSED",
    "CMD_TOTAL_COMPRESSED", "CMD_DATA_PAGE_OFFSET", "CMD_INDEX_PAGE_OFFSET", "CMD_DICTIONARY_PAGE_OFFSET",
    "CMD_STATISTICS", "CMD_BLOOM_FILTER_OFFSET",
    "ST_NULL_COUNT", "ST_MAX_VALUE", "ST_MIN_VALUE",
    "KV_KEY", "KV_VALUE", "SC_COLUMN_IDX", "SC_DESCENDING", "SC_NULLS_FIRST",
    "DECIMAL_SCALE", "DECIMAL_PRECISION", "TIME_IS_UTC", "TIME_UNIT", "INT_BIT_WIDTH", "INT_IS_SIGNED",
    "VARIANT_SPEC_VERSION", "GEO_CRS", "GEOGRAPHY_ALGORITHM",
    "BF_NUM_BYTES", "BF_ALGORITHM", "BF_HASH", "BF_COMPRESSION", "BF_BLOCK", "BF_XXHASH", "BF_UNCOMPRESSED",
    # enums
    "LOGICAL_TYPE_IDS", "LOGICAL_EMPTY", "TIME_UNIT_IDS", "REPETITION_VECTOR",
    "CT_UTF8", "CT_MAP", "CT_MAP_KEY_VALUE", "CT_LIST", "CT_ENUM", "CT_DECIMAL", "CT_DATE", "CT_TIME_MILLIS",
    "CT_TIME_MICROS", "CT_TIMESTAMP_MILLIS", "CT_TIMESTAMP_MICROS", "CT_UINT_8", "CT_UINT_16", "CT_UINT_32",
    "CT_UINT_64", "CT_INT_8", "CT_INT_16", "CT_INT_32", "CT_INT_64", "CT_JSON", "CT_BSON", "CT_INTERVAL",
    "ENCODING_PLAIN", "ENCODING_PLAIN_DICTIONARY", "ENCODING_RLE", "ENCODING_BIT_PACKED",
    "ENCODING_DELTA_BINARY_PACKED", "ENCODING_DELTA_LENGTH_BYTE_ARRAY", "ENCODING_DELTA_BYTE_ARRAY",
    "ENCODING_RLE_DICTIONARY", "ENCODING_BYTE_STREAM_SPLIT",
]

MAGIC = b"PAR1"  # first and last 4 bytes of a Parquet file
MAGIC_ENCRYPTED = b"PARE"  # last 4 bytes of a file whose footer is encrypted


class T:
    """Compact-protocol type codes (the low nibble of a field header / collection header)."""

    STOP = 0
    BOOL = 1  # BOOLEAN_TRUE; a bool field's value lives in the type nibble (1 true, 2 false)
    BOOL_FALSE = 2
    BYTE = 3
    I16 = 4
    I32 = 5
    I64 = 6
    DOUBLE = 7
    BINARY = 8
    LIST = 9
    SET = 10
    MAP = 11
    STRUCT = 12
    UUID = 13  # newer Thrift; no Parquet struct has one, only the bloom header reader skips it

    NAMES = {0: "stop", 1: "bool", 2: "bool", 3: "byte", 4: "i16", 5: "i32", 6: "i64", 7: "double",
             8: "binary", 9: "list", 10: "set", 11: "map", 12: "struct", 13: "uuid"}


# --- field ids ----------------------------------------------------------------------------------

# FileMetaData
FMD_VERSION, FMD_SCHEMA, FMD_NUM_ROWS, FMD_ROW_GROUPS, FMD_KV, FMD_CREATED_BY, FMD_COLUMN_ORDERS = range(1, 8)
# SchemaElement
SE_TYPE, SE_TYPE_LENGTH, SE_REPETITION_TYPE, SE_NAME, SE_NUM_CHILDREN = range(1, 6)
SE_CONVERTED_TYPE, SE_SCALE, SE_PRECISION, SE_FIELD_ID, SE_LOGICAL_TYPE = range(6, 11)
# RowGroup
RG_COLUMNS, RG_TOTAL_BYTE_SIZE, RG_NUM_ROWS, RG_SORTING_COLUMNS, RG_FILE_OFFSET = range(1, 6)
RG_TOTAL_COMPRESSED_SIZE, RG_ORDINAL = 6, 7
# ColumnChunk
CC_FILE_PATH, CC_FILE_OFFSET, CC_META_DATA, CC_OFFSET_INDEX_OFFSET = 1, 2, 3, 4
CC_COLUMN_INDEX_OFFSET = 6
# ColumnMetaData
CMD_TYPE, CMD_ENCODINGS, CMD_PATH, CMD_CODEC, CMD_NUM_VALUES = 1, 2, 3, 4, 5
CMD_TOTAL_UNCOMPRESSED, CMD_TOTAL_COMPRESSED, CMD_DATA_PAGE_OFFSET = 6, 7, 9
CMD_INDEX_PAGE_OFFSET, CMD_DICTIONARY_PAGE_OFFSET, CMD_STATISTICS = 10, 11, 12
CMD_BLOOM_FILTER_OFFSET = 14
# Statistics (note: 1/5 are the max, 2/6 the min)
ST_NULL_COUNT, ST_MAX_VALUE, ST_MIN_VALUE = 3, 5, 6
# KeyValue, SortingColumn
KV_KEY, KV_VALUE = 1, 2
SC_COLUMN_IDX, SC_DESCENDING, SC_NULLS_FIRST = 1, 2, 3
# LogicalType members with fields: DecimalType, TimeType / TimestampType, IntType, VariantType,
# GeometryType / GeographyType
DECIMAL_SCALE, DECIMAL_PRECISION = 1, 2
TIME_IS_UTC, TIME_UNIT = 1, 2
INT_BIT_WIDTH, INT_IS_SIGNED = 1, 2
VARIANT_SPEC_VERSION = 1
GEO_CRS, GEOGRAPHY_ALGORITHM = 1, 2
# BloomFilterHeader, and the one member of its unions that Parquet defines (all three are 1)
BF_NUM_BYTES, BF_ALGORITHM, BF_HASH, BF_COMPRESSION = 1, 2, 3, 4
BF_BLOCK = BF_XXHASH = BF_UNCOMPRESSED = 1

# --- enums and unions ---------------------------------------------------------------------------

# LogicalType union member ids by name.
LOGICAL_TYPE_IDS = {
    "STRING": 1, "MAP": 2, "LIST": 3, "ENUM": 4, "DECIMAL": 5, "DATE": 6, "TIME": 7, "TIMESTAMP": 8,
    "INTEGER": 10, "UNKNOWN": 11, "JSON": 12, "BSON": 13, "UUID": 14, "FLOAT16": 15, "VARIANT": 16,
    "GEOMETRY": 17, "GEOGRAPHY": 18, "VECTOR": 19,
}
# Members that are empty structs.
LOGICAL_EMPTY = frozenset({"STRING", "MAP", "LIST", "ENUM", "DATE", "UNKNOWN", "JSON", "BSON", "UUID",
                           "FLOAT16", "VECTOR"})
TIME_UNIT_IDS = {"MILLIS": 1, "MICROS": 2, "NANOS": 3}

# FieldRepetitionType VECTOR (new, not supported); REQUIRED / OPTIONAL / REPEATED are layout's.
REPETITION_VECTOR = 3

# ConvertedType
CT_UTF8, CT_MAP, CT_MAP_KEY_VALUE, CT_LIST, CT_ENUM, CT_DECIMAL, CT_DATE = range(7)
CT_TIME_MILLIS, CT_TIME_MICROS, CT_TIMESTAMP_MILLIS, CT_TIMESTAMP_MICROS = range(7, 11)
CT_UINT_8, CT_UINT_16, CT_UINT_32, CT_UINT_64, CT_INT_8, CT_INT_16, CT_INT_32, CT_INT_64 = range(11, 19)
CT_JSON, CT_BSON, CT_INTERVAL = 19, 20, 21

# Encoding (1 is unused)
ENCODING_PLAIN = 0
ENCODING_PLAIN_DICTIONARY = 2
ENCODING_RLE = 3
ENCODING_BIT_PACKED = 4
ENCODING_DELTA_BINARY_PACKED = 5
ENCODING_DELTA_LENGTH_BYTE_ARRAY = 6
ENCODING_DELTA_BYTE_ARRAY = 7
ENCODING_RLE_DICTIONARY = 8
ENCODING_BYTE_STREAM_SPLIT = 9
