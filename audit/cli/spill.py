"""Saying so when a run spills: DuckDB writes what does not fit its memory limit into the spill
folder (connectors/duck.py: ``$COSTAUDIT_CACHE/duckdb-tmp``), which is slow and takes disk.

:class:`SpillWatch` looks at the folder while a run goes on (a daemon thread, every
``interval`` seconds) and names the first spill and each further GiB on the run's progress
output, with the memory limit and how to raise it. Files already there when the run started (another
run's) are left out of the count.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

GIB = 2**30


class SpillWatch:
    """Polls a spill folder; :meth:`poll` returns the words to print when the spill grew past the
    next mark (the first byte, then each whole GiB), else None."""

    def __init__(self, folder: Path, memory_limit: str, say: Callable[[str], None], interval: float = 0.5):
        self.folder, self.memory_limit, self.say, self.interval = folder, memory_limit, say, interval
        self.before = set(_sizes(folder))
        self.mark = 0  # bytes a line was printed for; the next line needs the next mark
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def spilled(self) -> int:
        """Bytes this run's DuckDB sessions hold in the spill folder now."""
        return sum(size for name, size in _sizes(self.folder).items() if name not in self.before)

    def poll(self) -> str | None:
        now = self.spilled()
        self.peak = max(self.peak, now)
        if now <= 0 or now < self.mark:
            return None
        self.mark = (now // GIB + 1) * GIB
        return (f"DuckDB is spilling to disk: {_size(now)} in {self.folder} (memory limit {self.memory_limit}; "
                "set COSTAUDIT_DUCKDB_MEMORY higher, or COSTAUDIT_CACHE to a faster disk)")

    def __enter__(self) -> "SpillWatch":
        self._thread = threading.Thread(target=self._loop, name="costaudit-spill-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval + 1)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            words = self.poll()
            if words:
                self.say(words)


def watch(say: Callable[[str], None], interval: float = 0.25) -> SpillWatch:
    """A watch over this machine's spill folder, at the memory limit the sessions get."""
    from connectors.duck import default_memory_limit, spill_folder

    return SpillWatch(spill_folder(), default_memory_limit(), say, interval)


def _sizes(folder: Path) -> dict[str, int]:
    """Name → size of the files in the folder (nothing when it is missing; files vanish as sessions close)."""
    out: dict[str, int] = {}
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return out
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                out[entry.name] = entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return out


def _size(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{max(1, n // 2**20)} MiB"
