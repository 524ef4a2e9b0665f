"""asv suite and side-by-side comparisons (benchmarks/compare*.py).

asv runs with `"environment_type": "existing"` and installs nothing, so the package under test is
the working tree this directory sits in: put it first on sys.path.
"""

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
