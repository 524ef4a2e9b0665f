"""The package's shape, checked: imports point down the layers, no module reaches into another's
private names, and modules stay short (docs/architecture.md#layers)."""

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "qdbpm"
# Layer of each top-level part of the package, bottom up: a module imports only its own part or
# lower ones (storage reaches object stores for everyone above; pm is the format everything reads;
# parquet maps footers into it; bloom's header reader is Parquet's; sync reuses table's byte ranges;
# the CLI demo runs Spark; questdb, a QuestDB table directory's format, reads pm's type codes).
LAYER = {"errors": 0, "buffers": 0.5, "arrays": 0.5, "storage": 1, "pm": 2, "questdb": 2.5, "parquet": 3, "bloom": 4, "prune": 5, "meta": 6,
         "table": 7, "sync": 8, "spark": 9, "cli": 10, "__init__": 11}
MAX_LINES = 500
LONG_OK = {"parquet/_thrift.pyx"}  # the Thrift kernel: one flat parser, measured as a unit


def modules():
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def dotted(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def part_of(modname: str) -> str:
    bits = modname.split(".")
    return bits[1] if len(bits) > 1 else "__init__"


def imports(path: Path):
    """(absolute module, imported names, line) of every import statement in the file."""
    tree = ast.parse(path.read_text("utf-8"))
    here = dotted(path)
    pkg = here if path.name == "__init__.py" else here.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod, [a.name for a in node.names], node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, [], node.lineno


def is_module(modname: str) -> bool:
    rel = Path(*modname.split(".")[1:])
    base = PKG / rel
    return base.with_suffix(".py").exists() or base.with_suffix(".pyx").exists() or (base / "__init__.py").exists()


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_point_down(path):
    here = part_of(dotted(path))
    for mod, names, line in imports(path):
        if not (mod == "qdbpm" or mod.startswith("qdbpm.")):
            continue
        targets = [f"{mod}.{n}" for n in names if is_module(f"{mod}.{n}")] if mod == "qdbpm" else [mod]
        for t in targets:
            there = part_of(t)
            assert there == here or LAYER[there] < LAYER[here], \
                f"{path.relative_to(PKG)}:{line} imports {t}: an upward or sideways import"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_private_names_of_other_modules(path):
    here = dotted(path)
    for mod, names, line in imports(path):
        if not (mod == "qdbpm" or mod.startswith("qdbpm.")):
            continue
        for n in names:
            if not n.startswith("_") or n.startswith("__"):
                continue
            # A kernel module beside its wrapper (`from . import _thrift`) is the package's own.
            if is_module(f"{mod}.{n}") and mod == here.rpartition(".")[0]:
                continue
            pytest.fail(f"{path.relative_to(PKG)}:{line} imports {mod}.{n}, a private name of another module")


def test_modules_are_short():
    long = {}
    for p in sorted(PKG.rglob("*.py")) + sorted(PKG.rglob("*.pyx")):
        rel = str(p.relative_to(PKG))
        n = len(p.read_text("utf-8").splitlines())
        if n > MAX_LINES and rel not in LONG_OK:
            long[rel] = n
    assert not long, f"modules over {MAX_LINES} lines: {long}"


# An assignment on one line (`CT_UTF8 = 0`, `FMD_A, FMD_B = range(1, 3)`), not an import list.
FIELD_ID = re.compile(r"^[ \t]*(?:\w+[ \t]*,[ \t]*)*(?:FMD|SE|RG|CC|CMD|ST|KV|SC|CT|BF)_[A-Z0-9_]+[ \t]*(?:,[^=\n]*)?=(?!=)",
                      re.M)


def test_one_home_for_thrift_wire_types_and_parquet_field_ids():
    """parquet/constants.py alone defines them (the Cython kernel's own C copies are checked against
    it by tests/parquet/test_thrift_constants.py)."""
    home = PKG / "parquet" / "constants.py"
    bad = []
    for p in modules():
        if p == home:
            continue
        text = p.read_text("utf-8")
        if FIELD_ID.search(text):
            bad.append(f"{p.relative_to(PKG)} defines a Parquet field id: {FIELD_ID.search(text).group(0).strip()}")
        if re.search(r"^class T\b", text, re.M):
            bad.append(f"{p.relative_to(PKG)} defines Thrift wire types")
        if re.search(r"""b["']PAR[1E]["']""", text):
            bad.append(f"{p.relative_to(PKG)} spells the Parquet magic")
    home_text = home.read_text("utf-8")
    assert FIELD_ID.search(home_text) and re.search(r"^class T\b", home_text, re.M), "the home moved?"
    assert not bad, "\n".join(bad)
