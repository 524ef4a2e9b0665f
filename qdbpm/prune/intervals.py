"""QuestDB interval literals, the string of `ts IN '2024-01-15'`, as half-open UTC intervals.

The forms are those QuestDB documents for `IN '...'` (its TICK syntax without brackets, date
variables, time zones or day filters):

- a timestamp prefix means the whole of its last field: `'2024'` the year, `'2024-01'` the month,
  `'2024-01-15'` the day, `'2024-01-15T09'` / `T09:30` / `T09:30:15` the hour / minute / second,
  `'...T09:30:15.123'` the millisecond (1 to 9 fraction digits, from the tenth of a second to the
  microsecond; digits past the sixth are dropped: microsecond precision). An ISO week `'2024-W01'`
  is that week, `'2024-W01-1'` its Monday (time fields may follow). A final `Z` makes it one
  instant (the microsecond at its start), as in QuestDB; a space instead of `T` is refused (QuestDB
  reads it as an instant too, a surprise for a minute such as `'2024-01-15 09:30'`).
- `start;duration`: from the start of that prefix for the duration (`'2024-01-15T09:30;1h'` is
  09:30 to 10:30), the duration being one or more `<number><unit>` parts (`6h30m`, `1_500T`) with
  the units `y` years, `M` months (calendar, a day past a month's end clamps to it), `w` weeks,
  `d` (or `D`) days, `h`, `m`, `s`, `T` milliseconds, `u` microseconds, `n` nanoseconds (whole
  microseconds only).
- `start;duration;period;count`: that interval and `count - 1` more, each shifted by `period`
  (a signed `<number><unit>`, unit `y M d h m s`; negative counts back from the start), with
  QuestDB's arithmetic (a month step moves both the start and the last microsecond of an interval).

Overlapping or touching intervals are merged. Intervals are microsecond-exact.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re

from ..errors import PredicateError

_UTC = dt.timezone.utc
MAX_INTERVALS = 1024  # QuestDB's default bound on the intervals one literal expands to
_US = dt.timedelta(microseconds=1)
_FIXED = {"w": dt.timedelta(weeks=1), "d": dt.timedelta(days=1), "D": dt.timedelta(days=1),
          "h": dt.timedelta(hours=1), "m": dt.timedelta(minutes=1), "s": dt.timedelta(seconds=1),
          "T": dt.timedelta(milliseconds=1), "u": _US}
_PERIOD_UNITS = "yMdhms"  # QuestDB's repetition period types
_UNSUPPORTED = {"[": "bracket expansion", "$": "a date variable", "@": "a time zone", "#": "a day filter",
                ",": "a list"}
_DURATION_PART = re.compile(r"(\d[\d_]*)(.?)")


def questdb_interval(text: str) -> list:
    """[(start, end), ...]: the half-open UTC intervals (tz-aware datetimes) QuestDB's `IN 'text'`
    means, sorted and merged; a PredicateError naming the text and the character for anything else."""
    if not isinstance(text, str):
        raise PredicateError(f"a QuestDB interval is a string, not {type(text).__name__}")
    return _Reader(text).intervals()


class _Reader:
    def __init__(self, text):
        self.text = text

    def fail(self, pos, why) -> PredicateError:
        return PredicateError(f"QuestDB interval {self.text!r}: {why} at character {pos}")

    def intervals(self):
        text = self.text
        lo, hi = len(text) - len(text.lstrip()), len(text.rstrip())
        if lo == hi:
            raise self.fail(0, "empty interval")
        for i in range(lo, hi):
            if text[i] in _UNSUPPORTED or text.startswith("..", i):
                what, token = (_UNSUPPORTED[text[i]], text[i]) if text[i] in _UNSUPPORTED else ("a range", "..")
                raise self.fail(i, f"{what} ({token!r}, QuestDB TICK syntax) is not supported")
        cuts = [i for i in range(lo, hi) if text[i] == ";"]
        if len(cuts) not in (0, 1, 3):
            raise self.fail(cuts[1] if len(cuts) == 2 else cuts[3],
                            "expected 'start', 'start;duration' or 'start;duration;period;count'")
        bounds = [lo] + [c + 1 for c in cuts]
        ends = cuts + [hi]
        start, end = self.start(bounds[0], ends[0])
        if cuts:
            end = self.duration(start, bounds[1], ends[1])
        spans = [(start, end)]
        if len(cuts) == 3:
            spans = self.repeat(start, end, (bounds[2], ends[2]), (bounds[3], ends[3]))
        return [(a.replace(tzinfo=_UTC), b.replace(tzinfo=_UTC)) for a, b in _merge(spans)]

    # --- the start: a timestamp prefix -------------------------------------------------------

    def start(self, i, j):
        """(start, end) of the prefix text[i:j], naive UTC datetimes."""
        self.pos, self.lim = i, j
        year = self.number(4, "year", 1, 9999)
        if self.done():
            return self.span(dt.datetime(year, 1, 1), lambda t: _add_months(t, 12))
        self.expect("-")
        if self.peek() == "W":
            self.pos += 1
            return self.week(year)
        month = self.number(2, "month", 1, 12)
        if self.done():
            return self.span(dt.datetime(year, month, 1), lambda t: _add_months(t, 1))
        self.expect("-")
        at = self.pos
        day = self.number(2, "day", 1, 31)
        try:
            day0 = dt.datetime(year, month, day)
        except ValueError:
            raise self.fail(at, f"{year:04d}-{month:02d} has no day {day}") from None
        return self.time(day0)

    def week(self, year):
        at = self.pos
        week = self.number(2, "ISO week", 1, 53)
        try:
            monday = dt.datetime.combine(dt.date.fromisocalendar(year, week, 1), dt.time())
        except ValueError:
            raise self.fail(at, f"{year} has no ISO week {week}") from None
        if self.done():
            return self.span(monday, lambda t: t + dt.timedelta(weeks=1))
        self.expect("-")
        day = self.number(1, "ISO weekday", 1, 7)
        return self.time(monday + dt.timedelta(days=day - 1))

    def time(self, day0):
        """The rest of a prefix after its day: nothing, or T and time fields."""
        if self.done():
            return self.span(day0, lambda t: t + dt.timedelta(days=1))
        if self.peek() == " ":
            raise self.fail(self.pos, "expected 'T' between date and time")
        self.expect("T")
        t = day0 + dt.timedelta(hours=self.number(2, "hour", 0, 23))
        if self.done():
            return self.span(t, lambda t: t + dt.timedelta(hours=1))
        self.expect(":")
        t += dt.timedelta(minutes=self.number(2, "minute", 0, 59))
        if self.done():
            return self.span(t, lambda t: t + dt.timedelta(minutes=1))
        self.expect(":")
        t += dt.timedelta(seconds=self.number(2, "second", 0, 59))
        if self.done():
            return self.span(t, lambda t: t + dt.timedelta(seconds=1))
        self.expect(".")
        at = self.pos
        while self.pos < self.lim and self.text[self.pos].isdigit():
            self.pos += 1
        digits = self.text[at:self.pos]
        if not 1 <= len(digits) <= 9:
            raise self.fail(at, "expected 1 to 9 fraction digits")
        t += dt.timedelta(microseconds=int(digits[:6].ljust(6, "0")))
        width = dt.timedelta(microseconds=10 ** (6 - min(len(digits), 6)))
        if not self.done():
            raise self.fail(self.pos, f"unexpected {self.text[self.pos]!r}")
        return self.span(t, lambda t: t + width)

    def span(self, t, step):
        """(t, step(t)), or the instant t when the prefix ends in Z."""
        if self.pos < self.lim:  # done() stopped at a final Z
            return t, t + _US
        try:
            return t, step(t)
        except OverflowError:
            raise self.fail(self.lim, "the interval ends after year 9999") from None

    def done(self):
        """True at the end of the prefix, or at its final Z (then the prefix is one instant)."""
        if self.pos == self.lim:
            return True
        return self.text[self.pos] == "Z" and self.pos + 1 == self.lim

    def peek(self):
        return self.text[self.pos] if self.pos < self.lim else ""

    def expect(self, ch):
        if self.peek() != ch:
            got = repr(self.peek()) if self.pos < self.lim else "the end"
            raise self.fail(self.pos, f"expected {ch!r}, found {got}")
        self.pos += 1

    def number(self, n, name, lo, hi):
        """The n-digit field `name` at pos, checked to lie in [lo, hi]."""
        s = self.text[self.pos:self.lim][:n + 1]
        if len(s) < n or not s[:n].isdigit() or s[n:].isdigit():
            raise self.fail(self.pos, f"expected {'an' if name[0] in 'aeiou' else 'a'} {n}-digit {name}")
        v = int(s[:n])
        if not lo <= v <= hi:
            raise self.fail(self.pos, f"{name} {s[:n]} is out of range")
        self.pos += n
        return v

    # --- duration and repetition ---------------------------------------------------------------

    def duration(self, start, i, j):
        """The end of `start` plus the duration text[i:j], applied part by part as QuestDB does."""
        if i == j:
            raise self.fail(i, "expected a duration such as 1h or 6h30m")
        end, pos, nanos = start, i, 0
        while pos < j:
            m = _DURATION_PART.match(self.text, pos, j)
            if not m or not m.group(1):
                raise self.fail(pos, "expected a number before the duration unit")
            n, unit = int(m.group(1).replace("_", "")), m.group(2)
            if not unit:
                raise self.fail(m.end(), "missing unit at the end of the duration")
            try:
                if unit == "y":
                    end = _add_months(end, 12 * n)
                elif unit == "M":
                    end = _add_months(end, n)
                elif unit == "n":
                    nanos += n
                elif unit in _FIXED:
                    end = end + _FIXED[unit] * n
                else:
                    raise self.fail(m.start(2), f"unknown duration unit {unit!r} (y M w d h m s T u n)")
            except OverflowError:
                raise self.fail(m.start(1), "the interval ends after year 9999") from None
            pos = m.end()
        if nanos % 1000:
            raise self.fail(i, "a duration in nanoseconds must be whole microseconds")
        try:
            end += dt.timedelta(microseconds=nanos // 1000)
        except OverflowError:
            raise self.fail(i, "the interval ends after year 9999") from None
        if end <= start:
            raise self.fail(i, "the duration must be positive")
        return end

    def repeat(self, start, end, period, count):
        """QuestDB's `;period;count`: `count` intervals `period` apart. Calendar steps move the
        first and the last microsecond of the interval separately, as QuestDB does."""
        (pi, pj), (ci, cj) = period, count
        m = re.fullmatch(r"([-+]?\d+)(.?)", self.text[pi:pj])
        if not m:
            raise self.fail(pi, "expected a period such as 1d or -2h")
        k, unit = int(m.group(1)), m.group(2)
        if not unit or unit not in _PERIOD_UNITS:
            raise self.fail(pi + m.start(2), f"the period unit must be one of {' '.join(_PERIOD_UNITS)}")
        if not re.fullmatch(r"\d+", self.text[ci:cj]):
            raise self.fail(ci, "expected a whole number of repetitions")
        n = int(self.text[ci:cj])
        if not 1 <= n <= MAX_INTERVALS:
            raise self.fail(ci, f"the count must be 1 to {MAX_INTERVALS}")
        months = k * 12 if unit == "y" else k if unit == "M" else None
        step = None if months is not None else _FIXED[unit] * k

        def move(t, times):
            return _add_months(t, months * times) if months is not None else t + step * times

        lo, hi = start, end - _US
        sign = 1
        try:
            if k < 0:  # QuestDB starts from the earliest repetition and steps forward from it
                lo, hi, sign = move(lo, n - 1), move(hi, n - 1), -1
            out = [(lo, hi + _US)]
            for _ in range(n - 1):
                lo, hi = move(lo, sign), move(hi, sign)
                out.append((lo, hi + _US))
        except OverflowError:
            raise self.fail(pi, "the repetitions reach past year 1 or 9999") from None
        return out


def _add_months(t: dt.datetime, months: int) -> dt.datetime:
    """t plus calendar months, the day clamped to the month's last (Jan 31 + 1M is Feb 29)."""
    y, m = divmod(t.month - 1 + months, 12)
    year, month = t.year + y, m + 1
    if not 1 <= year <= 9999:
        raise OverflowError
    return t.replace(year=year, month=month, day=min(t.day, calendar.monthrange(year, month)[1]))


def _merge(spans):
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out
