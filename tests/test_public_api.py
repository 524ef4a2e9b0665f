"""The top-level package: every name docs/api.md documents as importable from `qdbpm` is in
`__all__` and resolves, and `import qdbpm.errors` stays light (the public names load lazily)."""

import re
import subprocess
import sys
from pathlib import Path

import qdbpm

API = Path(__file__).resolve().parent.parent / "docs" / "api.md"
IDENT = r"[A-Za-z][A-Za-z0-9_]*"


def documented_top_level_names() -> set:
    """Names docs/api.md gives as `qdbpm.X`: those of headings, the errors table, paragraphs that
    open with a call (`col(name)` ...) and return annotations, outside sections that name their
    own module (`qdbpm.bloom`, `qdbpm.spark`) and the command line."""
    names = set()
    for section in re.split(r"^(?=## )", API.read_text("utf-8"), flags=re.M):
        title = section.split("\n", 1)[0]
        if "`qdbpm." in title or title.startswith("## Command line") or not title.startswith("## "):
            continue
        for line in section.splitlines():
            if line.startswith("#"):
                names.update(re.findall(r"`(" + IDENT + r")", line))
            row = title == "## Errors" and re.match(r"\| `(" + IDENT + r")` \|", line)
            m = row or re.match(r"`(" + IDENT + r")\(", line)
            if m:
                names.add(m.group(1))
            names.update(re.findall(r"-> (" + IDENT + r")`", line))
    lower_types = {"int", "bool", "bytes", "list", "tuple", "dict", "str", "None"}
    return {n for n in names if n not in lower_types}


def test_documented_names_are_exported():
    names = documented_top_level_names()
    # The scan finds what it should: a drift in api.md's shape must not empty it silently.
    assert {"open", "ParquetMeta", "generate", "read_table", "col", "parse", "Expr", "PredicateError",
            "write_new", "ByteRefs", "Table", "open_table"} <= names
    assert not names - set(qdbpm.__all__), f"documented but not in qdbpm.__all__: {sorted(names - set(qdbpm.__all__))}"


def test_all_resolves_and_is_listed():
    ns = {}
    exec("from qdbpm import *", ns)
    for name in qdbpm.__all__:
        assert getattr(qdbpm, name) is ns[name]
        assert name in dir(qdbpm)
    assert qdbpm.open.__module__ == "qdbpm.meta" and qdbpm.ParquetMeta.__module__ == "qdbpm.meta"


def test_errors_import_stays_light():
    code = ("import sys, qdbpm.errors; "
            "print(sorted(m for m in sys.modules if m == 'numpy' or m.startswith(('qdbpm.', 'pyarrow'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["qdbpm.errors"]
