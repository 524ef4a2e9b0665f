"""Open tables kept across queries in one process. A Spark planning worker answers query after
query on the same table; reopening 2,000 `_pm` files and re-decoding their stats each time is
most of a query's planning. A kept table is reused only while its listing is unchanged (the same
partitions, every `_pm` of the same identity: listing.list_partitions), so a query never sees an
older snapshot than a fresh open would pin; any change opens the table anew."""

from __future__ import annotations

import threading
from collections import OrderedDict

from .listing import list_partitions

DEFAULT_CAPACITY = 4  # tables kept per process (each holds its mappings and decoded stats)


class OpenTables:
    """A small LRU of open tables, keyed by what identifies the table to its caller (root and
    storage options); `get` lists the table once per call and reuses or reopens."""

    def __init__(self, capacity=DEFAULT_CAPACITY):
        self.capacity = capacity
        self._tables = OrderedDict()  # key -> (listing, Table)
        self._lock = threading.Lock()
        self.opened = 0  # tables opened (not reused): for tests and benchmarks

    def get(self, key, root, filesystem, open_table, *, io=None, listing=None):
        """The open table for `key`: reused when `list_partitions(root, filesystem)` equals the
        listing it was opened from, else `open_table(sorted partitions)` (which must not list
        again), the stale one closed. `listing`: what identifies the table's state instead, a
        callable (a QuestDB table: its `_txn` and `_meta` as read); open_table then gets its
        result. The caller must not close what it gets."""
        state = list_partitions(root, filesystem, io=io) if listing is None else listing()
        with self._lock:
            kept = self._tables.get(key)
            if kept is not None and kept[0] == state:
                self._tables.move_to_end(key)
                return kept[1]
        table = open_table(sorted(state) if listing is None else state)
        with self._lock:
            old = self._tables.pop(key, None)
            self._tables[key] = (state, table)
            self.opened += 1
            while len(self._tables) > self.capacity:
                self._close(self._tables.popitem(last=False)[1][1])
        if old is not None:
            self._close(old[1])
        return table

    def clear(self):
        with self._lock:
            kept, self._tables = list(self._tables.values()), OrderedDict()
        for _, t in kept:
            self._close(t)

    @staticmethod
    def _close(table):
        table.close()
