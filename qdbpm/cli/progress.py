"""The progress bar of long commands (generate, scan)."""

from __future__ import annotations

import sys
import time


class Progress:
    """A one-line progress bar on stderr when it is a terminal; plain lines otherwise. Counts
    `unit`s (files; or bytes shown in MiB with scale=2**20)."""

    def __init__(self, total, stream=None, *, name="generate", unit="files", scale=1):
        self.total, self.done, self.stream = total, 0, stream or sys.stderr
        self.name, self.unit, self.scale = name, unit, scale
        self.tty = self.stream.isatty()
        self.started = time.monotonic()

    def _fmt(self, v):
        return str(v) if self.scale == 1 else f"{v / self.scale:,.1f}"

    def step(self, label="", n=1):
        before, self.done = self.done, self.done + n
        if self.tty:
            width = 30
            filled = width * self.done // max(self.total, 1)
            rate = self.done / self.scale / max(time.monotonic() - self.started, 1e-9)
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self._fmt(self.done)}/{self._fmt(self.total)} "
                              f"{rate:,.0f} {self.unit}/s {label[-40:]:<40}")
            if self.done >= self.total:
                self.stream.write("\n")
            self.stream.flush()
        elif self.done >= self.total or self.done // max(1, self.total // 10) > before // max(1, self.total // 10):
            self.stream.write(f"{self.name}: {self._fmt(self.done)}/{self._fmt(self.total)}\n")

    def close(self):
        """End the bar's line when the work stopped short of the total (e.g. --head)."""
        if self.tty and 0 < self.done < self.total:
            self.stream.write("\n")
            self.stream.flush()
