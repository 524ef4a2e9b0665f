"""The repository stands alone: nothing points at files outside it, every `docs/<page>.md#anchor`
cited anywhere names a real heading, doc links resolve, and docs/api.md names the public API."""

import re
from pathlib import Path

import qdbpm
from qdbpm.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# Not part of a clone: git data, the virtualenv, build outputs and tool caches (see .gitignore).
SKIP_DIRS = {".git", ".venv", "__pycache__", "build", "dist", ".hypothesis", ".pytest_cache", ".asv", ".cache"}
# Build products: extension modules and the C that Cython generates from the scanned .pyx files.
SKIP_SUFFIXES = {".so", ".c", ".html"}
# Spelled in pieces so that this file does not match itself.
OUTSIDE = [("../" + "shared").encode(), ("shared" + "/spec").encode()]
CITATION = re.compile(r"docs/([\w.-]+\.md)#([\w-]+)")
MD_LINK = re.compile(r"\]\(([^()\s#]*)(?:#([^()\s]*))?\)")


def repo_files():
    out = []
    stack = [ROOT]
    while stack:
        d = stack.pop()
        for p in sorted(d.iterdir()):
            if p.is_dir():
                if p.name not in SKIP_DIRS and not p.name.endswith(".egg-info"):
                    stack.append(p)
            elif p.suffix not in SKIP_SUFFIXES:
                out.append(p)
    return out


def text_files():
    for p in repo_files():
        try:
            yield p, p.read_text("utf-8")
        except UnicodeDecodeError:
            continue  # binary test data


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(md: Path) -> set:
    out, seen, fenced = set(), {}, False
    for line in md.read_text("utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"#{1,6} +(.*?)#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")  # GitHub numbers repeated headings
    return out


def test_slug_matches_github():
    assert slug("The `_pm` file format, as qdbpm reads and writes it") == \
        "the-_pm-file-format-as-qdbpm-reads-and-writes-it"
    assert slug("Out-of-line region") == "out-of-line-region"
    assert slug("CRC") == "crc"


def test_no_file_points_outside_the_repository():
    bad = []
    for p in repo_files():
        data = p.read_bytes()
        bad += [f"{p.relative_to(ROOT)}: {needle.decode()}" for needle in OUTSIDE if needle in data]
    assert not bad, "files referencing paths outside the repository:\n" + "\n".join(bad)


def test_cited_doc_anchors_exist():
    cited = []
    for p, text in text_files():
        for m in CITATION.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            cited.append((f"{p.relative_to(ROOT)}:{line}", m.group(1), m.group(2)))
    assert len(cited) >= 10, "the citation scan found almost nothing: is CITATION still right?"
    known = {}
    bad = []
    for where, page, anchor in cited:
        if page not in known:
            known[page] = anchors(DOCS / page) if (DOCS / page).is_file() else None
        if known[page] is None:
            bad.append(f"{where}: docs/{page} does not exist")
        elif anchor not in known[page]:
            bad.append(f"{where}: docs/{page}#{anchor} is not a heading there")
    assert not bad, "\n".join(bad)


def test_doc_links_resolve():
    bad = []
    for md in sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]:
        for m in MD_LINK.finditer(md.read_text("utf-8")):
            target, anchor = m.group(1), m.group(2)
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path = (md.parent / target).resolve() if target else md
            if ROOT not in path.parents and path != ROOT:
                bad.append(f"{md.name}: link {target!r} leaves the repository")
            elif not path.exists():
                bad.append(f"{md.name}: link {target!r} does not exist")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                bad.append(f"{md.name}: link {target}#{anchor} is not a heading there")
    assert not bad, "\n".join(bad)


def test_api_doc_names_the_public_api():
    api = (DOCS / "api.md").read_text("utf-8")
    names = [n for n in dir(qdbpm) if not n.startswith("_") and not isinstance(getattr(qdbpm, n), type(qdbpm))]
    missing = [n for n in names if not re.search(r"`(qdbpm\.)?" + re.escape(n) + r"\b", api)]
    commands = build_parser()._subparsers._group_actions[0].choices
    missing += [f"qdbpm {c}" for c in commands if f"`qdbpm {c}" not in api]
    assert len(names) >= 15 and len(commands) >= 5
    assert not missing, f"docs/api.md does not document: {missing}"


# docs/architecture.md points at code two ways: a file (`qdbpm/pm/reader.py`, `tests/pm/`) or a name
# (`qdbpm.pm.writer.write_update`, `qdbpm.meta.ParquetMeta.prune`). Each must resolve to live code.
ARCH_PATH = re.compile(r"`((?:qdbpm|tests|benchmarks|scripts)/[\w./-]*)`")
ARCH_NAME = re.compile(r"`(qdbpm(?:\.\w+)+)`")


def resolve_name(dotted: str):
    """Import the longest module prefix of `dotted`, then follow attributes; None if it fails."""
    import importlib

    bits = dotted.split(".")
    for k in range(len(bits), 0, -1):
        try:
            obj = importlib.import_module(".".join(bits[:k]))
        except ImportError:
            continue
        for attr in bits[k:]:
            if not hasattr(obj, attr):
                return None
            obj = getattr(obj, attr)
        return obj
    return None


def test_architecture_pointers_resolve():
    text = (DOCS / "architecture.md").read_text("utf-8")
    paths = ARCH_PATH.findall(text)
    names = ARCH_NAME.findall(text)
    assert len(paths) >= 20 and len(names) >= 20, "the pointer scan found almost nothing"
    bad = [f"path {p}" for p in paths if not (ROOT / p).exists()]
    bad += [f"name {n}" for n in names if resolve_name(n) is None]
    assert not bad, "docs/architecture.md points at code that does not exist:\n" + "\n".join(bad)


def test_architecture_names_every_package():
    text = (DOCS / "architecture.md").read_text("utf-8")
    pkgs = sorted(p.parent.name for p in (ROOT / "qdbpm").glob("*/__init__.py"))
    assert len(pkgs) >= 7
    missing = [p for p in pkgs if f"`qdbpm/{p}/`" not in text]
    assert not missing, f"docs/architecture.md has no paragraph for packages {missing}"
