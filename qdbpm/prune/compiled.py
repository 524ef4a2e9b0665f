"""`to_arrow` kept for the process: a compiled filter expression is immutable and depends only on
the predicate and the schema it is compiled for, so a question asked again (one-shot reads of
the same query, each opening the table afresh) is not compiled again (~0.25 ms each)."""

from __future__ import annotations

from .arrow import to_arrow
from .bind import literal_signature

MAX = 1024  # expressions kept; past it the cache starts over
_kept: dict = {}


def field_key(field):
    """`field` as a cache key: pyarrow's Field equality and hash ignore its metadata, which here
    carries meaning (an unscaled DECIMAL's precision and scale, `rows.UNSCALED_KEY`: the same int64
    field is 0.05 at scale 2 and 0.005 at scale 3)."""
    md = field.metadata
    return field, None if not md else tuple(sorted(md.items()))


def arrow_key(schema):
    """`schema` as a cache key, its fields' metadata included (`field_key`)."""
    return schema, tuple(field_key(f)[1] for f in schema)


def compiled(e, schema):
    """to_arrow(e, schema), kept by (e, its literal signature, schema with its fields' metadata);
    None when e's literals cannot key it (`literal_signature`: each is of a known immutable, so
    hashable, type): the caller compiles it itself."""
    sig = literal_signature(e)
    if sig is None:
        return None
    key = (e, sig, arrow_key(schema))
    hit = _kept.get(key)
    if hit is None:
        if len(_kept) >= MAX:
            _kept.clear()
        hit = _kept[key] = to_arrow(e, schema)
    return hit
