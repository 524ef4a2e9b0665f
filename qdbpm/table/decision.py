"""A scan's decision as Arrow tables (`Scan.row_groups`, `Scan.byte_ranges`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import arrays


def row_groups(parts) -> pa.Table:
    """One row per surviving row group of `parts` (shares.Part, each with survivors)."""
    counts = [len(p.rgs) for p in parts]
    return pa.table({
        "partition": arrays.repeated([p.name for p in parts], counts),
        "path": arrays.repeated([p.path for p in parts], counts),
        "row_group": arrays.numbers(np.concatenate([p.rgs for p in parts] or [[]]), pa.int32()),
        "num_rows": arrays.numbers(np.concatenate([np.asarray(p.pm.num_rows, np.int64)[p.rgs] for p in parts]
                                                  or [[]]), pa.int64()),
        "full": arrays.booleans(np.concatenate([p.full for p in parts] or [[]])),
    })


def byte_ranges(units) -> pa.Table:
    """One row per chunk the `units` (pipeline.Unit) fetch, with the coalesced request serving it."""
    cols = {k: [] for k in ("path", "offset", "length", "partition", "row_group", "column")}
    for u in units:
        names = u.pm.column_names
        for r in u.plan.ranges:
            for rg, c, _, _ in r.chunks:
                for k, v in zip(cols, (u.path, r.start, r.length, u.partition, rg, names[c])):
                    cols[k].append(v)
    types = {"path": pa.string(), "offset": pa.int64(), "length": pa.int64(), "partition": pa.string(),
             "row_group": pa.int32(), "column": pa.string()}
    return pa.table({k: arrays.strings(v) if types[k] == pa.string() else arrays.numbers(v, types[k])
                     for k, v in cols.items()})
