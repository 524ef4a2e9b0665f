"""Page decompression: one home for every codec a page may use (`pages`' walk, and `_split`'s
without the GIL for SPLIT_CODECS). Snappy and LZ4_RAW (QuestDB's codec) through our kernels
(`_snappy.pyx`, `_lz4.pyx`), which check that a block fills its page exactly; small ZSTD pages
through zstandard; gzip and brotli as Arrow streams (`_STREAMED`); the rest through Arrow's codecs,
one object per thread. Every page decodes to exactly its header's size or is a ParquetFormatError."""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import zstandard

from .. import buffers
from ..errors import ParquetFormatError
from ..pm import layout as L
from . import _lz4, _snappy, _zstd

# What the `_split` kernel decodes without the GIL: ZSTD where zstandard's libzstd is found
# (`_zstd.pyx`; else its chunks stay with `pages`' walk, through the codecs below).
SPLIT_CODECS = (L.CODEC_SNAPPY, L.CODEC_LZ4_RAW, L.CODEC_UNCOMPRESSED) + ((L.CODEC_ZSTD,) if _zstd.available() else ())
_CODECS = {L.CODEC_ZSTD: "zstd"}  # through Arrow's one-shot codec (pages past zstandard's)
# Arrow's one-shot gzip and brotli return a buffer of the size asked for whatever the page decodes
# to (the bytes it did not write included): their pages are read as a stream, as far as one byte
# past the header's size, so a page that decodes to more or less is an error (as in pyarrow's
# reader) and a header's claim allocates only what the page holds. The same speed (1.6 MB page).
_STREAMED = {L.CODEC_GZIP: "gzip", L.CODEC_BROTLI: "brotli"}
# One codec object per thread: Arrow's codecs may keep stream state that two threads
# decompressing at once corrupt (zlib's did: a crash with gzip pages in lanes).
_codecs_here = threading.local()
# ZSTD pages below this many bytes go through zstandard with a context kept per thread: Arrow's
# codec makes a context per call, ~9 us each (a 1.3 KB page: 11 us against 2.3 us); above it the
# two decode alike and Arrow's output lands in its memory pool (buffers.py).
ZSTD_SMALL = buffers.POOL_MIN


class Unsupported(Exception):
    """A chunk shape this reader leaves to pyarrow (not an error in the data)."""


def decompress(codec, payload, size):
    """A page's payload decoded to `size` bytes (the header's), exactly: ParquetFormatError where it
    does not decode to that, Unsupported for a codec pyarrow cannot read here."""
    if codec == L.CODEC_UNCOMPRESSED:
        if len(payload) != size:
            raise ParquetFormatError(f"uncompressed page of {len(payload)} bytes says it holds {size}")
        return payload
    if codec == L.CODEC_SNAPPY:  # our kernel: ~2x Arrow's codec on TPC-H's int64 pages (_snappy.pyx)
        out = buffers.empty(size, np.uint8)
        _snappy.decode(payload, out)
        return out
    if codec == L.CODEC_LZ4_RAW:  # the raw block format (pyarrow's "lz4_raw"), our kernel (_lz4.pyx)
        if size > _lz4.MAX_RATIO * len(payload) + 32:  # no LZ4 block can: refused before allocating
            raise ParquetFormatError(f"lz4 page of {len(payload)} bytes says it decodes to {size}")
        out = buffers.empty(size, np.uint8)
        _lz4.decode(payload, out)
        return out
    if codec == L.CODEC_ZSTD and size < ZSTD_SMALL:
        out = _zstd_small(payload, size)
        if out is not None:
            return out
    if codec in _STREAMED:
        name = _STREAMED[codec]
        if not pa.Codec.is_available(name):
            raise Unsupported(f"codec {name}: not in this pyarrow")
        try:
            with pa.CompressedInputStream(pa.BufferReader(payload), name) as stream:
                out = stream.read_buffer(size + 1)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise ParquetFormatError(f"page does not decompress with {name}: {e}") from None
        if out.size != size:
            raise ParquetFormatError(f"page decompressed to {out.size}{'+' if out.size > size else ''} bytes, "
                                     f"its header says {size}")
        return np.frombuffer(out, np.uint8)
    name = _CODECS.get(codec)
    if name is None:
        raise Unsupported(f"codec {L.CODEC_NAMES[codec] if 0 <= codec < len(L.CODEC_NAMES) else codec}")
    objects = getattr(_codecs_here, "objects", None)
    if objects is None:
        objects = _codecs_here.objects = {}
    c = objects.get(name)
    if c is None:
        try:
            c = objects[name] = pa.Codec(name)
        except (pa.ArrowException, ValueError) as e:
            raise Unsupported(f"codec {name}: {e}") from None
    try:  # the one-shot codec returns the size asked for: ZSTD's frame itself fails a wrong one
        out = c.decompress(payload, decompressed_size=size, asbytes=False)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise ParquetFormatError(f"page does not decompress with {name}: {e}") from None
    return np.frombuffer(out, np.uint8)


def _zstd_small(payload, size):
    """A page of one ZSTD frame that says it decodes to `size` bytes and does, with nothing after
    it, decoded by zstandard; else None, and Arrow's codec decides, its errors included (frames
    written without their size, several frames, trailing bytes, a corrupt frame)."""
    d = getattr(_codecs_here, "zstd", None)
    if d is None:
        d = _codecs_here.zstd = zstandard.ZstdDecompressor()
    try:
        # the size checked before zstandard allocates what the frame says; an empty page goes to
        # Arrow: after an empty frame zstandard's decompress lets trailing bytes pass (0.25)
        if not size or zstandard.frame_content_size(payload) != size:
            return None
        out = d.decompress(payload, read_across_frames=False, allow_extra_data=False)  # one frame, nothing after
    except zstandard.ZstdError:
        return None
    return np.frombuffer(out, np.uint8) if len(out) == size else None
