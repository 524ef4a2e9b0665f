"""Options of the `qdbpm` data source: which are its own, and how the others become fsspec
storage options (shared by the reader and the writer)."""

from __future__ import annotations

import json

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ..errors import PmError

# Options of the data source itself; every other option is an fsspec storage option.
RESERVED_OPTIONS = ("path", "max_gap", "num_partitions", "audit_dir")
_TEXT_OPTIONS = ("key", "secret", "token", "profile")  # credentials: text as given, never parsed
_CLIENT_KWARGS = {"endpoint_url": "endpoint_url", "region": "region_name"}


def user_options(options) -> dict:
    """The options the user gave (keys lowercased, as Spark treats them). CREATE TABLE ...
    OPTIONS: the catalog prefixes them with `option.` and adds table properties (owner,
    provider, ...) that are no options of ours."""
    options = {k.lower(): v for k, v in dict(options).items()}
    if any(k.startswith("option.") for k in options):
        options = {k[len("option."):]: v for k, v in options.items() if k.startswith("option.")} | \
            ({"path": options.get("path") or options["location"]} if {"path", "location"} & set(options) else {})
    return options


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


def table_location(options):
    """(fsspec filesystem or None for a local table, root) of the data source's `path`."""
    root = user_options(options).get("path")
    if not root:
        raise PmError("the qdbpm data source needs a path: .load(table_root) or OPTIONS (path '...'); options "
                      f"given: {sorted(options)}")  # names only: values may be credentials
    if root.startswith("file:") and not root.startswith("file://"):
        root = root[len("file:"):]  # a catalog table's location, qualified by Spark as file:/path
    if "://" not in root and "::" not in root:
        return None, root
    fs, root = fsspec.url_to_fs(root, **storage_options(options))
    return (None, root) if isinstance(fs, LocalFileSystem) else (fs, root)
