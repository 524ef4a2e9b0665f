"""`_pm` generation and update for Parquet objects on an fsspec filesystem (s3://, gs://, ...).

The Parquet object is read through `storage.objects.RangeFile`: each read is one range request of
exactly the bytes asked for (the footer's tail, the footer, bloom bitsets), never a read-ahead
block. The `_pm` is built in a private local temporary file by the same writer as a local one,
then stored with one PUT: a reader sees the old object or the whole new one, never a partial
`_pm`. `update` starts from the stored `_pm` and stores it again with the new snapshot appended,
so older snapshots stay readable through the footer chain.
"""

from __future__ import annotations

import os
import posixpath
import tempfile

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ..pm import layout as L
from ..errors import PmError
from ..table.listing import HIDDEN_PREFIXES, is_hidden
from ..storage.objects import storage_errors


def resolve(path, filesystem=None, storage_options=None):
    """(fsspec filesystem, path on it) for a remote Parquet path, or None for a local one: a URL
    such as s3://bucket/key resolves with fsspec.url_to_fs(path, **storage_options)."""
    if filesystem is not None:
        if storage_options is not None:
            raise ValueError("pass storage_options= or a filesystem, not both")
        return None if isinstance(filesystem, LocalFileSystem) else (filesystem, filesystem._strip_protocol(path))
    text = os.fspath(path)
    if storage_options is None and "://" not in text:
        return None
    fs, stripped = fsspec.url_to_fs(text, **(storage_options or {}))
    return None if isinstance(fs, LocalFileSystem) else (fs, stripped)


def default_pm_object(path) -> str:
    return posixpath.join(posixpath.dirname(path), L.PM_FILE_NAME)


def build_and_put(fs, pm_path, build, *, start_from=None) -> int:
    """Run `build(local_pm_path)` (the local writer, which returns the committed size) on a
    private temporary file, seeded with the bytes `start_from` when given (update mode), then
    store the result at `pm_path` in one PUT. Returns the committed size."""
    with tempfile.TemporaryDirectory(prefix="qdbpm-pm-") as tmp:
        local = os.path.join(tmp, L.PM_FILE_NAME)
        if start_from is not None:
            with open(local, "wb") as f:
                f.write(start_from)
        size = build(local)
        with open(local, "rb") as f:
            data = f.read()
    with storage_errors(f"{pm_path}: cannot store the _pm object", passing=()):
        fs.pipe_file(pm_path, data)
    return size


def find_parquet(paths, storage_options=None) -> list:
    """[(path or URL, size or None)] of the Parquet files `paths` name, sorted per entry: a file
    (local path or URL) as given, a directory or URL prefix as every `data.parquet` below it. A
    URL (or any path with `storage_options`) is listed once through fsspec, and the listing's
    sizes come along (None for local files, which are stat'ed when opened). The one listing rule
    of the CLI's and Spark's generate."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in paths:
        text = os.fspath(p)
        target = resolve(text, None, storage_options)
        if target is None:
            local = text.split("://", 1)[1] if text.startswith("file://") else text
            if os.path.isdir(local):
                found = []
                for d, dirs, names in os.walk(local):
                    dirs[:] = sorted(x for x in dirs if not x.startswith(HIDDEN_PREFIXES))  # staging areas
                    if L.PARQUET_FILE_NAME in names:
                        found.append((os.path.join(d, L.PARQUET_FILE_NAME), None))
                out += sorted(found)
            else:
                out.append((local, None))
            continue
        fs, base = target
        base = base.rstrip("/")
        with storage_errors(f"{text}: cannot list", passing=()):
            listing = fs.find(base, detail=True)
        below = {k: v for k, v in listing.items() if k.rsplit("/", 1)[-1] == L.PARQUET_FILE_NAME
                 and not is_hidden(k[len(base):].strip("/"))}
        if not below and base in listing:  # the URL names one object
            below = {base: listing[base]}
        if not below and not listing:
            raise FileNotFoundError(f"{text}: no such object or prefix")
        out += sorted((fs.unstrip_protocol(k), int(v["size"])) for k, v in below.items())
    if not out:
        raise PmError(f"no Parquet files found under {[os.fspath(p) for p in paths]} "
                      f"(directories are searched for {L.PARQUET_FILE_NAME})")
    return out
