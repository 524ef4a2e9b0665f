"""Partition directory names from partition timestamps, as QuestDB formats them (PartitionBy).

DAY `yyyy-MM-dd`, MONTH `yyyy-MM`, YEAR `yyyy`, HOUR `yyyy-MM-ddTHH`, WEEK `YYYY-Www` (ISO week
year), NONE `default`. A partition split by out-of-order writes starts off its period's boundary
and is named `yyyy-MM-ddTHH`, then `mmss` when minutes, seconds or fraction are non-zero, then `-`
and the fraction (6 digits for microseconds, 9 for nanoseconds) when non-zero. Then `.N` when the
name txn N > -1. Timestamps before 1970 floor (as QuestDB's calendar arithmetic does).
"""

from __future__ import annotations

import datetime as dt

from ..errors import PmError

DAY, MONTH, YEAR, NONE, HOUR, WEEK = 0, 1, 2, 3, 4, 5
_EPOCH = dt.datetime(1970, 1, 1)
_PER_US = {"us": 1, "ns": 1000}


def _split(ts: int, unit: str):
    """(datetime to the microsecond, sub-microsecond nanoseconds) of a timestamp."""
    if unit not in _PER_US:
        raise PmError(f"timestamp unit {unit!r} is neither 'us' nor 'ns'")
    us, ns = divmod(int(ts), _PER_US[unit])
    try:
        return _EPOCH + dt.timedelta(microseconds=us), ns
    except OverflowError:
        raise PmError(f"partition timestamp {ts} ({unit}) is outside the years 1-9999") from None


def _to_ts(d: dt.datetime, unit: str) -> int:
    delta = d - _EPOCH
    return ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds) * _PER_US[unit]


def partition_floor(ts: int, partition_by: int, unit: str = "us") -> int:
    """The start of the period holding `ts`."""
    d, _ = _split(ts, unit)
    if partition_by == NONE:
        return ts
    if partition_by == HOUR:
        f = d.replace(minute=0, second=0, microsecond=0)
    elif partition_by == DAY:
        f = d.replace(hour=0, minute=0, second=0, microsecond=0)
    elif partition_by == WEEK:
        f = (d - dt.timedelta(days=d.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    elif partition_by == MONTH:
        f = d.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    elif partition_by == YEAR:
        f = d.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    else:
        raise PmError(f"partitionBy {partition_by} is none of DAY, MONTH, YEAR, NONE, HOUR, WEEK")
    return _to_ts(f, unit)


def partition_ceil(ts: int, partition_by: int, unit: str = "us") -> int:
    """The start of the next period after the one holding `ts`."""
    f, _ = _split(partition_floor(ts, partition_by, unit), unit)
    if partition_by == HOUR:
        n = f + dt.timedelta(hours=1)
    elif partition_by == DAY:
        n = f + dt.timedelta(days=1)
    elif partition_by == WEEK:
        n = f + dt.timedelta(days=7)
    elif partition_by == MONTH:
        n = f.replace(year=f.year + (f.month == 12), month=f.month % 12 + 1)
    elif partition_by == YEAR:
        n = f.replace(year=f.year + 1)
    else:
        raise PmError(f"partitionBy {partition_by} has no periods")
    return _to_ts(n, unit)


def partition_name(ts: int, partition_by: int, name_txn: int = -1, unit: str = "us") -> str:
    """The directory name of the partition starting at `ts` (name txn -1: no suffix)."""
    if partition_by == NONE:
        base = "default"
    else:
        d, ns = _split(ts, unit)
        if partition_floor(ts, partition_by, unit) != ts:  # split: off its period's boundary
            base = d.strftime("%Y-%m-%dT%H")
            if d.minute or d.second or d.microsecond or ns:
                base += d.strftime("%M%S")
            if d.microsecond or ns:
                base += f"-{d.microsecond:06d}" if unit == "us" else f"-{d.microsecond * 1000 + ns:09d}"
        elif partition_by == DAY:
            base = d.strftime("%Y-%m-%d")
        elif partition_by == MONTH:
            base = d.strftime("%Y-%m")
        elif partition_by == YEAR:
            base = f"{d.year:04d}"
        elif partition_by == HOUR:
            base = d.strftime("%Y-%m-%dT%H")
        else:  # WEEK
            year, week, _ = d.isocalendar()
            base = f"{year:04d}-W{week:02d}"
    return base if name_txn < 0 else f"{base}.{name_txn}"
