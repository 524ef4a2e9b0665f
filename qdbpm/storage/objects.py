"""Reads of remote objects through fsspec or S3Direct, and the one rule for their errors.

A reader (`reader_for`) is anything with fsspec's `cat_file`: S3Direct where it reproduces an
s3fs filesystem's reads, else the filesystem. A request that fails is a `StorageError` naming the
object, the byte range when there is one, and the cause (`storage_errors`); a `StorageError`
passes as it is (S3Direct's name the object and range already), and so does a missing object
unless the caller knows it exists.
"""

from __future__ import annotations

import io
import sys
from contextlib import contextmanager

from ..errors import StorageError, VanishedError

# Why a range that a `_pm` snapshot describes cannot be read, when the cause does not say.
SNAPSHOT_MISMATCH = "the object is shorter than its _pm snapshot says, missing, or unreadable"


def reader_for(fs):
    """What reads of `fs` go through: S3Direct where it reproduces an s3fs filesystem's reads
    exactly (a fraction of s3fs's CPU per request), else `fs` itself."""
    from .s3 import S3Direct  # the S3 client (http, ssl, xml) loads with the first remote reader

    return S3Direct.from_fsspec(fs) or fs


def _direct(reader) -> bool:
    """Whether `reader` is an S3Direct (only `reader_for` makes one, loading its module)."""
    s3 = sys.modules.get(__package__ + ".s3")
    return s3 is not None and isinstance(reader, s3.S3Direct)


def close_reader(reader):
    """Release what `reader_for` made: S3Direct's idle connections and kept ETags. A filesystem
    is its owner's and stays as it is."""
    if _direct(reader):
        reader.close()


@contextmanager
def storage_errors(what, *, passing=(FileNotFoundError,), why=""):
    """Inside: an OSError becomes a StorageError "{what}: {cause}" (+ "; {why}" when given), raised
    from it; a StorageError and the kinds in `passing` (the caller's to handle) pass unchanged.
    `what`: the object(s) and what failed, e.g. "bucket/key: cannot fetch"."""
    try:
        yield
    except (StorageError, *passing):
        raise
    except OSError as e:
        # gone, where it was expected: a VanishedError, which is still a FileNotFoundError
        kind = VanishedError if isinstance(e, FileNotFoundError) else StorageError
        raise kind(f"{what}: {e}" + (f"; {why}" if why else "")) from e


def cat(fs, path, start=None, end=None, *, size=None, snapshot=False) -> bytes:
    """Bytes [start, end) of object `path` through `fs` (a reader), or all of it.

    `size`: the object's size as the caller knows it; S3Direct refuses an object of another size
    (for free, from the response), another reader ignores it. `snapshot`: a `_pm` snapshot says
    the object holds these bytes, so a missing object is a StorageError too, not FileNotFoundError.
    """
    rng = "" if start is None and end is None else f" bytes [{start}, {end})"
    what = f"{path}: cannot read{rng}" if rng else f"{path}: cannot fetch"
    with storage_errors(what, passing=() if snapshot else (FileNotFoundError,),
                        why=SNAPSHOT_MISMATCH if snapshot else ""):
        if size is not None and _direct(fs):
            return fs.cat_file(path, start=start, end=end, size=size)
        return fs.cat_file(path, start=start, end=end)


def object_size(fs, path) -> int:
    """The size of object `path` on filesystem `fs`, by one request."""
    with storage_errors(f"{path}: cannot stat"):
        return int(fs.size(path))


class RangeFile(io.RawIOBase):
    """A read-only, seekable file over object `path` of a known size, through `reader`: every
    read is one request for exactly the bytes asked for (clipped at the end)."""

    def __init__(self, reader, path, size):
        super().__init__()
        self.reader, self.path, self.size = reader, path, int(size)
        self.pos = 0
        self.requests = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self.pos = base + offset
        return self.pos

    def tell(self):
        return self.pos

    def read(self, n=-1):
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        self.requests += 1
        data = cat(self.reader, self.path, self.pos, end)
        if len(data) != end - self.pos:
            raise StorageError(f"{self.path}: asked for bytes [{self.pos}, {end}) and got {len(data)}: the object "
                               f"is shorter than its {self.size} bytes (truncated or replaced)")
        self.pos = end
        return data

    def readinto(self, b):
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)
