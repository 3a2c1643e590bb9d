"""The time grid: intervals of ``step`` seconds aligned to the case window's start.

Shared by every telemetry connector: samples are binned by interval number, and the step is the
case's, else the median spacing of the samples, else ``DEFAULT_STEP``.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pandas as pd

DEFAULT_STEP = 60
NS = 10**9


def utc_ns(moment: datetime) -> int:
    """Nanoseconds since the epoch of a datetime (naive means UTC)."""
    stamp = pd.Timestamp(moment)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value)


@dataclass(frozen=True)
class Grid:
    """Intervals of ``step`` seconds aligned to the window start."""

    start_ns: int
    end_ns: int
    step: int

    @property
    def start(self) -> float:
        """Window start in seconds since the epoch."""
        return self.start_ns / NS

    @property
    def end(self) -> float:
        """Window end in seconds since the epoch."""
        return self.end_ns / NS

    def index(self, t) -> np.ndarray:
        """Interval number of each time in seconds."""
        return np.floor((np.asarray(t, dtype=float) - self.start) / self.step).astype(np.int64)

    def stamps(self, k) -> pd.DatetimeIndex:
        """Interval start times (UTC, ns) of interval numbers."""
        k = np.asarray(k, dtype=np.int64)
        return pd.to_datetime(self.start_ns + k * (self.step * NS), utc=True)

    def window(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Samples in [start, end), whatever their value, with their interval number ``k``."""
        frame = frame.loc[(frame["t"] >= self.start) & (frame["t"] < self.end)]
        return frame.assign(k=self.index(frame["t"]))

    def gauges(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Finite samples in [start, end), with their interval number ``k``."""
        keep = (frame["t"] >= self.start) & (frame["t"] < self.end) & np.isfinite(frame["v"])
        frame = frame.loc[keep]
        return frame.assign(k=self.index(frame["t"]))


def median_step(frames: list[pd.DataFrame]) -> int | None:
    """Median spacing (whole seconds) between consecutive samples, from the first frame with any."""
    for frame in frames:
        frame = frame.loc[frame["t"].notna(), ["sid", "t"]].drop_duplicates()
        if len(frame) < 2:
            continue
        order = np.lexsort((frame["t"].to_numpy(), frame["sid"].to_numpy()))
        sid, t = frame["sid"].to_numpy()[order], frame["t"].to_numpy()[order]
        gaps = np.diff(t)[sid[1:] == sid[:-1]]
        if len(gaps):
            return max(1, int(round(float(np.median(gaps)))))
    return None
