"""The `_pm` format on its own: byte layout, descriptions, reader and its checks, encoder, writer
and its I/O seam, CRC. Nothing here knows about pruning (that meets the format in qdbpm.meta)."""
