"""Object-store options on the command line: `--storage-option key=value` (repeatable), passed to
fsspec as storage options. A dotted key nests (`client_kwargs.endpoint_url=http://...`); a value
that reads as JSON (`true`, `5`, `{"a": 1}`) is that value, else the text itself."""

from __future__ import annotations

import json

from ..errors import PmError


def add_storage_option(parser):
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="fsspec storage option for URLs (repeatable; a dotted key nests, e.g. "
                             "client_kwargs.endpoint_url=http://127.0.0.1:8333; values are JSON or text)")


def storage_options(args):
    """The options given, as a dict, or None when none were."""
    out = {}
    for item in getattr(args, "storage_option", None) or []:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise PmError(f"--storage-option {item!r}: expected KEY=VALUE")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        node, parts = out, key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise PmError(f"--storage-option {item!r}: {part!r} is already a value, not a group")
        node[parts[-1]] = value
    return out or None


def is_url(path) -> bool:
    return "://" in str(path)
