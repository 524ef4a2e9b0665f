"""`python -m qdbpm.cli`: the command line."""

import sys

from .main import command

sys.exit(command())
