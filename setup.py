"""Build the Cython kernels. Every qdbpm/**/_*.pyx becomes an extension module beside its wrapper."""
import glob
import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

# -O3 but never -march=native: wheels and CI machines must run the same binary.
COMPILE_ARGS = ["-O3", "-fno-strict-aliasing"]


def extensions():
    # QDBPM_ONLY=_crc,_sbbf builds a subset (handy while one kernel is being edited).
    only = {m for m in os.environ.get("QDBPM_ONLY", "").split(",") if m}
    exts = []
    for pyx in sorted(glob.glob(os.path.join("qdbpm", "**", "_*.pyx"), recursive=True)):
        mod = os.path.splitext(os.path.basename(pyx))[0]
        if only and mod not in only:
            continue
        exts.append(
            Extension(
                os.path.splitext(pyx)[0].replace(os.sep, "."),
                [pyx],
                include_dirs=[np.get_include()],
                extra_compile_args=COMPILE_ARGS,
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION")],
            )
        )
    return cythonize(
        exts,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    )


setup(ext_modules=extensions())
