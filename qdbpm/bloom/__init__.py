"""Split-block bloom filters (public API `qdbpm.bloom`): XXH64 hashing, the SBBF kernels and
their validating wrappers, and the Parquet bloom filter header (qdbpm.parquet.bloom_header)."""

from .hashing import hash_values, hash_values_aligned, xxh64
from .sbbf import *  # noqa: F401,F403
from .sbbf import __all__ as _sbbf_all
from ..parquet.bloom_header import bloom_header_bytes, parse_bloom_header, read_parquet_bloom

__all__ = sorted([*_sbbf_all, "bloom_header_bytes", "hash_values", "hash_values_aligned", "parse_bloom_header",
                  "read_parquet_bloom", "xxh64"])
