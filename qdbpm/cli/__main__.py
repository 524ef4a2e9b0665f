"""`python -m qdbpm.cli`: the command line."""

import sys

from .main import main

sys.exit(main())
