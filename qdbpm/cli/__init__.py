"""The `qdbpm` command line."""
