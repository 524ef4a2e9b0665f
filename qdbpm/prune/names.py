"""Column names matched by SQL identifier rules: `Names`."""

from __future__ import annotations

from ..errors import PredicateError


class Names:
    """Column lookup by SQL identifier rules, the one home of them: pruning binds through it
    (stats.Schema.column), the exact filter too (arrow._field_ref), and `expr.Expr.resolve`.

    An exact name (double-quoted in SQL, or given to `col`) matches only itself. An unquoted SQL
    name matches itself when present, else the one column equal to it case-insensitively;
    several such columns are an error naming them. The first of duplicated names wins."""

    __slots__ = ("names", "_exact", "_folded")

    def __init__(self, names):
        self.names = list(names)
        self._exact = {n: i for i, n in reversed(list(enumerate(self.names)))}
        self._folded = None  # lower-cased name -> [distinct names], built on first need

    def _matches(self, name) -> list:
        if self._folded is None:
            folded = {}
            for n in self._exact:
                folded.setdefault(n.lower(), []).append(n)
            self._folded = folded
        return sorted(self._folded.get(name.lower(), ()))

    def find(self, name, exact=True):
        """Position of the column `name` refers to, None when there is none."""
        i = self._exact.get(name)
        if i is not None or exact:
            return i
        hits = self._matches(name)
        if len(hits) > 1:
            shown = ", ".join(f'"{h}"' for h in hits)
            raise PredicateError(f"column name {name} is ambiguous: it matches {shown} case-insensitively; "
                                 f"double-quote the one meant")
        return self._exact[hits[0]] if hits else None

    def index(self, name, exact=True) -> int:
        i = self.find(name, exact)
        if i is None:
            near = self._matches(name) if exact else []
            hint = f" (a quoted or col() name matches exactly: did you mean {near[0]!r}?)" if near else ""
            raise PredicateError(f"no column {name!r}{hint}; columns: {self.names}")
        return i
