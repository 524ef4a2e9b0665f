"""Options of the `qdbpm` data source: which are its own, and how the others become fsspec
storage options (shared by the reader and the writer)."""

from __future__ import annotations

import json

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ..errors import PmError

# Options of the data source itself; every other option is an fsspec storage option.
RESERVED_OPTIONS = ("path", "max_gap", "num_partitions", "audit_dir", "pushdown")
_TEXT_OPTIONS = ("key", "secret", "token", "profile")  # credentials: text as given, never parsed
_SECRET_WORDS = ("secret", "token", "password", "credential", "key")  # never stored with a catalog table
_CLIENT_KWARGS = {"endpoint_url": "endpoint_url", "region": "region_name"}
# A catalog table's options, kept in its schema: PySpark 4.3 stores the schema a source gives at
# CREATE TABLE but hands the table's later readers and writers no options at all.
TABLE_METADATA_KEY = "qdbpm.table"
_CATALOG_KEYS = ("provider", "location")  # what the catalog adds to CREATE TABLE's options


def user_options(options) -> dict:
    """The options the user gave (keys lowercased, as Spark treats them). CREATE TABLE ...
    OPTIONS: the catalog prefixes them with `option.` and adds table properties (owner,
    provider, ...) that are no options of ours."""
    options = {k.lower(): v for k, v in dict(options).items()}
    if any(k.startswith("option.") for k in options):
        options = {k[len("option."):]: v for k, v in options.items() if k.startswith("option.")} | \
            ({"path": options.get("path") or options["location"]} if {"path", "location"} & set(options) else {})
    return options


def is_catalog_create(options) -> bool:
    """True for the options a catalog's CREATE TABLE hands the source (not a .load())."""
    keys = {k.lower() for k in dict(options)}
    return bool(keys & set(_CATALOG_KEYS)) or any(k.startswith("option.") for k in keys)


def table_metadata(options) -> str:
    """JSON of the options a catalog table keeps in its schema: every user option except
    credentials (key, secret, token), which never leave the session: a catalog table's readers take
    them from the standard environment and config chain."""
    kept = {k: v for k, v in user_options(options).items() if not _secret(k, v)}
    return json.dumps(kept, sort_keys=True)


def _secret(name, value) -> bool:
    """A credential by its name, or JSON text (client_kwargs, ...) holding one."""
    if any(w in name for w in _SECRET_WORDS):
        return True
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return False
        return isinstance(parsed, dict) and any(_secret(str(k).lower(), v) for k, v in parsed.items())
    return False


def with_table_options(options, schema) -> dict:
    """`options`, or where they name no path (a catalog table's reader or writer), the options its
    CREATE TABLE stored in the first field of `schema` (table_metadata), with any given on top."""
    options = user_options(options)
    if options.get("path") or not schema.fields:
        return options
    stored = schema.fields[0].metadata.get(TABLE_METADATA_KEY)
    if stored is None:
        return options
    try:
        kept = json.loads(stored)
    except ValueError:
        raise PmError(f"the catalog table's stored qdbpm options are not JSON: {stored[:80]!r}") from None
    if not isinstance(kept, dict):
        raise PmError(f"the catalog table's stored qdbpm options are not an object: {stored[:80]!r}")
    return {**kept, **options}


def storage_options(options) -> dict:
    """The fsspec storage options of data source `options`: `endpoint_url` and `region` go to
    client_kwargs (endpoint_url, region_name), JSON-looking values are parsed (true, 5,
    {...}), anything else is passed as is; the reserved options are left out."""
    out, client = {}, {}
    for k, v in user_options(options).items():
        if k in RESERVED_OPTIONS:
            continue
        if k not in _TEXT_OPTIONS and isinstance(v, str):
            try:
                v = json.loads(v)
            except ValueError:
                pass
        if k in _CLIENT_KWARGS:
            client[_CLIENT_KWARGS[k]] = v
        else:
            out[k] = v
    if client:
        out["client_kwargs"] = {**out.get("client_kwargs", {}), **client}
    return out


def local_root(root: str) -> str:
    """`root` with Spark's `file:/path` qualification (a catalog table's location) undone."""
    return root[len("file:"):] if root.startswith("file:") and not root.startswith("file://") else root


def table_location(options):
    """(fsspec filesystem or None for a local table, root) of the data source's `path`."""
    root = user_options(options).get("path")
    if not root:
        raise PmError("the qdbpm data source needs a path: .load(table_root) or OPTIONS (path '...') (a catalog "
                      "table created with its own column list keeps no options: CREATE TABLE t USING qdbpm "
                      f"OPTIONS (path '...') without columns); options given: {sorted(options)}")  # names only: values may be credentials
    root = local_root(root)
    if "://" not in root and "::" not in root:
        return None, root
    fs, root = fsspec.url_to_fs(root, **storage_options(options))
    return (None, root) if isinstance(fs, LocalFileSystem) else (fs, root)
