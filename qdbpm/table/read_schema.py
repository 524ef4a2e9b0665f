"""What a synthesised footer carries so pyarrow decodes fetched chunks to its own exact types.

`read_table` wraps fetched chunks in a Parquet file whose footer it builds. The Arrow type pyarrow
gives a column comes from that footer's SchemaElement (physical, logical and converted type,
repetition) and from the file's ARROW:schema key-value (string_view, large_string, time zones,
dictionaries, ...). `ColumnSchemas` holds both for one `_pm` column schema, from one of two sources:

- `from_footer`: the original Parquet footer, read in one range request of [footer offset,
  Parquet size) of the pinned snapshot (both known from `_pm`). Its SchemaElements are copied
  verbatim and its ARROW:schema is narrowed to the chosen columns (pyarrow matches its fields by
  position, and ignores it when the counts differ), so pyarrow yields exactly the types it reads
  from the original file. `read_table` keeps one per distinct `_pm` column schema.
- `from_pm`: `_pm` alone (strict, footer-less mode): `schema_element` below; `strict_refusal`
  names the columns whose *values* this cannot give.
"""

from __future__ import annotations

import base64

import numpy as np
import pyarrow as pa

from ..pm import layout as L
from ..pm import qdb_types as Q
from ..parquet.build import SchemaElement, arrow_schema, build_file_metadata, encoded_list, schema_element_struct
from ..parquet.compact import Struct, T
from ..parquet.constants import CT_DECIMAL, CT_UTF8, KV_KEY, KV_VALUE, SE_NUM_CHILDREN
from ..errors import ParquetFormatError, PmError, StorageError

ARROW_SCHEMA_KEY = "ARROW:schema"


def _check_flat(pm, c):
    d = pm.columns[c]
    if int(d["max_rep_level"]) > 0 or int(d["max_def_level"]) > 1:
        raise PmError(f"column {pm.column_names[c]!r} is nested (levels rep={int(d['max_rep_level'])}, def="
                      f"{int(d['max_def_level'])}); read_table decodes flat columns only")


def schema_element(pm, c) -> SchemaElement:
    """The Parquet SchemaElement of a flat `_pm` column, from its descriptor and QuestDB type."""
    _check_flat(pm, c)
    d = pm.columns[c]
    name = pm.column_names[c]
    pt, tc = int(d["physical_type"]), int(d["type"])
    rep = L.REPETITION_REQUIRED if int(d["max_def_level"]) == 0 else L.REPETITION_OPTIONAL
    lt = Q.parquet_logical_type(tc, pt, int(d["fixed_byte_len"]))
    ct = scale = precision = None
    if lt is not None and lt[0] == "DECIMAL":
        ct, scale, precision = CT_DECIMAL, lt[1], lt[2]
    elif lt == ("STRING",):
        ct = CT_UTF8
    return SchemaElement(
        name=name, type=pt, repetition_type=rep,
        type_length=int(d["fixed_byte_len"]) if pt == L.PT_FIXED_LEN_BYTE_ARRAY else None,
        converted_type=ct, scale=scale, precision=precision,
        field_id=int(d["id"]) if int(d["id"]) >= 0 else None, logical_type=lt,
    )


def strict_refusal(pm, c) -> tuple | None:
    """(why, example Arrow type) when `_pm` alone cannot give column c's values, else None. Only a
    column without a QuestDB type (code -1) is in doubt, and only where its raw physical values
    could mean something else: an INT64 (unsigned 64-bit, or a timestamp unit `_pm` cannot name:
    a signed reading changes values >= 2^63) or a 2-byte fixed-length array (float16). Other
    fixed-length arrays are plain bytes either way."""
    d = pm.columns[c]
    if int(d["type"]) != -1:
        return None
    pt = int(d["physical_type"])
    if pt == L.PT_FIXED_LEN_BYTE_ARRAY:
        if int(d["fixed_byte_len"]) != 2:
            return None
        return "a FIXED_LEN_BYTE_ARRAY(2) whose meaning (e.g. float16) only the Parquet footer gives", "pa.float16()"
    name = L.PHYSICAL_TYPE_NAMES[pt] if 0 <= pt < len(L.PHYSICAL_TYPE_NAMES) else f"physical type {pt}"
    return (f"an {name} without a QuestDB type, whose meaning (e.g. unsigned 64-bit) only the Parquet footer "
            "gives", "pa.uint64()" if pt == L.PT_INT64 else "its type")


def _root(n, root=None) -> Struct:
    s = Struct(root.fields) if root is not None else schema_element_struct(SchemaElement(name="schema"))
    return s.set(SE_NUM_CHILDREN, T.I32, n)  # the chosen columns only


class ColumnSchemas:
    """Per `_pm` column: the SchemaElement Struct a synthesised footer carries; per file: the root
    element, created_by and the ARROW:schema (one field per top-level column, or None)."""

    def __init__(self, elements, *, root=None, created_by=None, origin=None, origin_index=None):
        self.elements = elements  # [Struct] per _pm column (None: nested or in a group, never decoded)
        self.root = root
        self.created_by = created_by
        self.origin = origin  # pa.Schema from ARROW:schema, or None
        self.origin_index = origin_index  # _pm column -> its field in `origin`
        self._cache = {}  # per column selection: narrowed ARROW:schema, Arrow fields

    @classmethod
    def from_pm(cls, pm) -> "ColumnSchemas":
        els = [None if _nested(pm, c) else schema_element_struct(schema_element(pm, c))
               for c in range(pm.column_count)]
        return cls(els, created_by="qdbpm (synthesised from _pm)")

    @classmethod
    def from_footer(cls, pm, footer, path) -> "ColumnSchemas":
        """From the parsed original footer `footer` of `path`, after checking it describes the
        columns `pm` does (else the object was replaced: StorageError)."""
        leaves = footer.leaves
        if len(leaves) != pm.column_count:
            raise StorageError(f"{path}: its Parquet footer has {len(leaves)} leaf columns but its _pm "
                               f"{pm.column_count}; the object is not what the _pm snapshot describes")
        for c, leaf in enumerate(leaves):
            d = pm.columns[c]
            got = (leaf.name, leaf.physical_type, leaf.max_def_level, leaf.max_rep_level)
            want = (pm.column_names[c], int(d["physical_type"]), int(d["max_def_level"]), int(d["max_rep_level"]))
            if got != want:
                raise StorageError(f"{path}: Parquet footer column {c} is {got} (name, physical type, def, rep) "
                                   f"but its _pm says {want}; the object is not what the _pm snapshot describes")
        structs = footer.schema_structs()
        parents = footer.parents()
        top = [i for i, p in enumerate(parents) if p == 0]
        at = {s: k for k, s in enumerate(top)}
        origin = _origin_schema(footer.key_value_metadata, path)
        if origin is not None and len(origin) != len(top):
            origin = None  # pyarrow ignores such an ARROW:schema too
        els, index = [], {}
        for c, leaf in enumerate(leaves):
            flat = parents[leaf.schema_index] == 0 and not _nested(pm, c)
            els.append(structs[leaf.schema_index] if flat else None)
            if flat:
                index[c] = at[leaf.schema_index]
        return cls(els, root=structs[0], created_by=footer.created_by, origin=origin, origin_index=index)

    def element(self, pm, c):
        """Column c's SchemaElement Struct; PmError for a nested column or one inside a group."""
        el = self.elements[c]
        if el is None:
            _check_flat(pm, c)
            raise PmError(f"column {pm.column_names[c]!r} is inside a group of the Parquet schema; read_table "
                          "decodes top-level columns only")
        return el

    def key_value_metadata(self, columns):
        """ARROW:schema narrowed to `columns` (in their order), or [] without one."""
        if self.origin is None:
            return []
        key = ("kv", tuple(columns))
        kv = self._cache.get(key)
        if kv is None:
            sub = pa.schema([self.origin.field(self.origin_index[c]) for c in columns], metadata=self.origin.metadata)
            kv = self._cache[key] = [(ARROW_SCHEMA_KEY, base64.b64encode(sub.serialize().to_pybytes()).decode())]
        return kv

    def file_metadata(self, pm, columns, row_groups) -> bytes:
        """FileMetaData of a file holding `columns` (_pm indices) with these RowGroupSpecs. The
        schema and key-values of a column selection are encoded once: every unit a scan decodes
        synthesises a footer, and they are the same in all of them."""
        key = ("encoded", tuple(columns))
        fixed = self._cache.get(key)
        if fixed is None:
            schema = [_root(len(columns), self.root)] + [self.element(pm, c) for c in columns]
            kv = [Struct().set(KV_KEY, T.BINARY, k.encode()).set(KV_VALUE, T.BINARY, v.encode())
                  for k, v in self.key_value_metadata(columns)]
            fixed = self._cache[key] = (encoded_list(T.STRUCT, schema), encoded_list(T.STRUCT, kv) if kv else None)
        schema, kv = fixed
        return build_file_metadata(schema, row_groups, created_by=self.created_by, key_value_metadata=kv)

    def cached(self, key, make):
        """make(), computed once per key for these schemas (a derived fact of the column schema,
        such as `table.direct`'s per-column kinds); `key` must not collide with this class's own."""
        key = ("derived", key)
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def fields(self, pm, columns) -> list:
        """pyarrow's Arrow fields for `columns`: the schema of a file with this footer."""
        key = ("fields", tuple(columns))
        out = self._cache.get(key)
        if out is None:
            meta = self.file_metadata(pm, columns, [])
            try:
                sch = arrow_schema(meta)
            except (pa.ArrowException, OSError) as e:
                raise ParquetFormatError(f"{pm.path}: pyarrow cannot type columns "
                                         f"{[pm.column_names[c] for c in columns]}: {e}") from None
            out = self._cache[key] = list(sch)
        return out


def _nested(pm, c) -> bool:
    d = pm.columns[c]
    return int(d["max_rep_level"]) > 0 or int(d["max_def_level"]) > 1


def _origin_schema(kv, path):
    for k, v in kv:
        if k == ARROW_SCHEMA_KEY and v is not None:
            try:
                return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(v, validate=True)))
            except (pa.ArrowException, ValueError) as e:
                raise ParquetFormatError(f"{path}: its {ARROW_SCHEMA_KEY} key-value does not decode ({e}); pyarrow "
                                         "refuses the file too. footer=False reads it without") from None
    return None


def schema_key(pm) -> tuple:
    """Equal for `_pm` files whose column descriptors and names are equal (stats.Schema.of's key)."""
    return (np.asarray(pm.columns).tobytes(), tuple(pm.column_names))
