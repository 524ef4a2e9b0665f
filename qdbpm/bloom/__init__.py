"""Split-block bloom filters (public API `qdbpm.bloom`): XXH64 hashing, the SBBF kernels and
their validating wrappers, Parquet bloom headers."""

from .sbbf import *  # noqa: F401,F403
from .sbbf import __all__  # noqa: F401
