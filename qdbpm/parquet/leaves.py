"""The schema tree of a Parquet footer: its leaf columns with their levels, validated.

`build_leaves` walks the flat depth-first SchemaElement list as parquet-cpp does; `ParquetFooter`
(footer.py) calls it on every parse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..errors import ParquetFormatError
from ..pm import layout as L
from .build import SchemaElement
from .constants import REPETITION_VECTOR

__all__ = ["Leaf", "build_leaves", "at_footer_byte"]


@dataclass(frozen=True)
class Leaf:
    """A leaf (primitive) column, in schema order; `path` is its path_in_schema.

    repetition: 0 required, 1 optional, 2 repeated (of the leaf itself); max_def_level and
    max_rep_level follow from its ancestors. logical_type: see `SchemaElement`.
    """

    path: tuple
    schema_index: int
    physical_type: int
    type_length: int | None
    repetition: int
    max_def_level: int
    max_rep_level: int
    converted_type: int | None
    logical_type: tuple | None
    scale: int | None
    precision: int | None
    field_id: int | None

    @property
    def name(self) -> str:
        return ".".join(self.path)


def at_footer_byte(at: int | None, base: int) -> str:
    """" at footer byte N (file offset M)" for error messages; "" when `at` is unknown."""
    if at is None:
        return ""
    return f" at footer byte {at}" + (f" (file offset {base + at})" if base > 0 else "")


def build_leaves(schema: Sequence[SchemaElement], spans=None, base: int = 0) -> list[Leaf]:
    """Leaves of the flat depth-first schema, validating the tree.

    As in parquet-cpp, an element is a group when num_children > 0 and a leaf otherwise (a
    leaf must have a physical type); the root is always a group. `spans` (each element's byte
    span in the footer) and `base` (the footer's file offset) locate errors.
    """

    def fail(what: str, i: int | None, corrupt: bool = True):
        at = spans[i][0] if spans is not None and i is not None and i < len(spans) else None
        prefix = "corrupt Parquet footer: " if corrupt else ""
        raise ParquetFormatError(f"{prefix}{what}{at_footer_byte(at, base)}")

    if not schema:
        fail("the schema is empty (no root element)", None)
    leaves: list[Leaf] = []
    root = schema[0]
    if root.num_children is not None and root.num_children < 0:
        fail(f"schema root has num_children {root.num_children}", 0)
    # Iterative walk: (children left, def level, rep level, path) per open group.
    stack = [[root.num_children or 0, 0, 0, ()]]
    i = 1
    n = len(schema)
    while stack:
        if stack[-1][0] == 0:
            stack.pop()
            continue
        stack[-1][0] -= 1
        if i >= n:
            fail(f"schema has {n} elements but its num_children counts need more", 0)
        el = schema[i]
        _, dl, rl, path = stack[-1]
        rep = el.repetition_type
        if rep is None:
            fail(f"schema element {i} ({el.name!r}) has no repetition_type", i)
        if rep == REPETITION_VECTOR:
            fail(f"schema element {i} ({el.name!r}) has VECTOR repetition, which is not supported", i, False)
        if not 0 <= rep <= 2:
            fail(f"schema element {i} ({el.name!r}) has repetition_type {rep}", i)
        dl += rep != L.REPETITION_REQUIRED
        rl += rep == L.REPETITION_REPEATED
        path = path + (el.name,)
        if el.num_children is not None and el.num_children < 0:
            fail(f"schema element {i} ({el.name!r}) has num_children {el.num_children}", i)
        if el.num_children:
            stack.append([el.num_children, dl, rl, path])
        else:
            if el.type is None or not 0 <= el.type <= L.PHYSICAL_TYPE_MAX:
                fail(f"schema leaf {i} ({el.name!r}) has "
                     + ("no physical type" if el.type is None else f"invalid physical type {el.type}"), i)
            if el.type == L.PT_FIXED_LEN_BYTE_ARRAY and (el.type_length is None or el.type_length < 0):
                fail(f"FIXED_LEN_BYTE_ARRAY leaf {i} ({el.name!r}) has no valid type_length", i)
            leaves.append(Leaf(path, i, el.type, el.type_length, rep, dl, rl, el.converted_type,
                               el.logical_type, el.scale, el.precision, el.field_id))
        i += 1
    if i != n:
        fail(f"schema has {n} elements but the tree under the root covers {i}", 0)
    return leaves
