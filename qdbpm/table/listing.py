"""Which directories of a table root are partitions, and what their `key=value` names say (kept
free of pyarrow.dataset, which takes ~0.3 s to import): the one listing rule (directories below the
root holding a `_pm`, none under a hidden `_`/`.` directory), with each `_pm`'s identity when
asked, so a reader can tell an unchanged table from a changed one without opening anything."""

from __future__ import annotations

import os
import urllib.parse

import numpy as np

from ..errors import PmError
from ..pm import layout as L
from ..pm.batch import BUDGET, MAX_FILE, PmBatch
from ..pm.crc import crc32_of
from . import _walk, offload

HIDDEN_PREFIXES = (".", "_")  # pyarrow.dataset's ignore_prefixes; also Spark's and Hive's rule
NULL_FALLBACK = "__HIVE_DEFAULT_PARTITION__"  # pyarrow's (and Hive's) name for a null value
KERNEL = True  # local listings by the walk kernel; False: by walk_reference (os.walk)
_PM = os.fsencode(L.PM_FILE_NAME)
_HIDDEN = "".join(HIDDEN_PREFIXES)


def keys(partition: str) -> dict:
    """{key: value} of the `key=value` segments of a `/`-separated partition path, both
    URL-decoded as pyarrow's HivePartitioning (segment_encoding="uri") decodes them; the null
    fallback value is None; other segments are ignored; a repeated key keeps its last value."""
    out = {}
    for seg in partition.split("/"):
        name, eq, value = seg.partition("=")
        if not eq or not name:
            continue
        value = urllib.parse.unquote(value)
        out[urllib.parse.unquote(name)] = None if value == NULL_FALLBACK else value
    return out


def is_hidden(relative_path) -> bool:
    """Whether a '/'-separated path below a table root lies under a directory whose name starts
    with '.' or '_' (a writer's staging area, `_temporary`, ...): never a partition, never listed."""
    parts = [p for p in str(relative_path).split("/") if p]
    return any(p.startswith(HIDDEN_PREFIXES) for p in parts[:-1])


def find_partitions(root, filesystem=None, *, io=None) -> list:
    """Relative paths (sorted, '/'-separated) of directories below root holding a `_pm`, none
    under a hidden directory (`is_hidden`); `io` lists in the filesystem's place
    (Table passes its S3Direct)."""
    return sorted(list_partitions(root, filesystem, io=io, identities=False))


def remote_keys(root, filesystem, *, io=None, identities=False) -> dict:
    """{key: info or None} of every object below root on `filesystem` (listed by `io` when
    given): one listing, which list_partitions and Table's QuestDB detection share."""
    base = filesystem._strip_protocol(root).rstrip("/")
    lister = io or filesystem
    return lister.find(base, detail=True) if identities else dict.fromkeys(lister.find(base))


def list_partitions(root, filesystem=None, *, io=None, identities=True, found=None) -> dict:
    """{partition: identity of its `_pm`} (find_partitions' rule). The identity changes whenever
    the `_pm` may have: locally (size, mtime ns, inode) from one stat (an append grows it, a
    rewrite renames a new file in); on an object store (size, ETag) from the listing itself.
    identities=False: None for each (no stat). found: remote_keys' listing, when made already."""
    if filesystem is not None:
        base = filesystem._strip_protocol(root).rstrip("/")
        if found is None:
            found = remote_keys(root, filesystem, io=io, identities=identities)
        out = {}
        for f, info in found.items():
            f = f.rstrip("/")
            if f.rsplit("/", 1)[-1] == L.PM_FILE_NAME and f.startswith(base):
                rel = f[len(base):].strip("/")
                if not is_hidden(rel):
                    ident = None if info is None else (int(info.get("size", -1)), info.get("ETag") or info.get("etag"))
                    out[rel.rsplit("/", 1)[0] if "/" in rel else ""] = ident
        if not out:
            raise PmError(f"no partitions (directories with a _pm) under {root!r}")
        return out
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise PmError(f"table root {root!r} is not a directory")
    if not KERNEL:
        return walk_reference(root, identities)
    names, idents, *_ = _walk.walk(os.fsencode(root), _PM, _HIDDEN, identities=identities)
    return dict(zip(names, idents)) if identities else dict.fromkeys(names)


def read_partitions(root, pm_paths):
    """(partitions, PmBatch) of a local table: find_partitions' list, with every `_pm` read as the
    tree is walked and checked right after it is read, while in cache (pm/_batch.Checker, the
    checks PmBatch runs). `pm_paths(partitions)`: the sequence of their `_pm` paths (only
    indexed: for messages and one-file opens). A directory of many partitions shares their
    lstat's and opens with the offload worker (`_walk.walk`'s `ahead`)."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise PmError(f"table root {root!r} is not a directory")
    offload.start_worker()
    names, _, arena, at, size, status, checker = _walk.walk(os.fsencode(root), _PM, _HIDDEN, read=True,
                                                            max_file=MAX_FILE, budget=BUDGET, crc=crc32_of)
    order = sorted(range(len(names)), key=names.__getitem__)
    partitions = [names[i] for i in order]
    order = np.asarray(order, np.int64)  # one conversion for the four uses below
    if (order != np.arange(len(order))).any():
        at, size, status = at[order], size[order], status[order]
    return partitions, PmBatch(pm_paths(partitions), (arena, at, size, status), checked=checker.finish(order))


def walk_reference(root, identities) -> dict:
    """list_partitions of a local root with os.walk: the slow, obviously correct reference of
    the walk kernel (table/_walk.pyx), which tests hold to it."""
    out = {}
    prefix = os.path.join(root, "")  # os.walk joins below root: the relative path is a slice (relpath is slow)
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(HIDDEN_PREFIXES))  # staging areas
        if L.PM_FILE_NAME in files:
            rel = d[len(prefix):] if d.startswith(prefix) else os.path.relpath(d, root)
            ident = None
            if identities:
                try:
                    st = os.stat(os.path.join(d, L.PM_FILE_NAME))
                except FileNotFoundError:
                    continue  # removed since the directory was read: not a partition now
                ident = (st.st_size, st.st_mtime_ns, st.st_ino)
            out["" if rel in (".", "") else rel.replace(os.sep, "/")] = ident
    return out
