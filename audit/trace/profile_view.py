"""What every kernel-level finding reads of one trace: its GPU work, busy sets and call paths."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from audit.trace.breakdown import category_codes
from audit.trace.callpath import CallPaths, call_paths
from audit.trace.intensity import Intensity, intensity
from connectors.profiles.events import CPU_OP, GPU_WORK, KERNEL, Trace, covered_up_to, distinct, merge, take
from connectors.profiles.intervals import among, lookup

MODULE_INSTANCE = re.compile(r"(nn\.Module: [^ >]+?)_\d+(?= >|$)")


@dataclass
class ProfileView:
    """One trace (one rank), prepared for the finding rules.

    ``work`` arrays run over the kernels, memcpys and memsets of the trace in row order (the order
    of ``paths.work``); when every event is GPU work they are the trace's own columns (no copy).
    Categories are codes into ``categories`` (:meth:`in_categories` selects by label). Windows and
    busy sets are per device.
    """

    trace: Trace
    rank: int
    paths: CallPaths = field(init=False)
    _patterns: dict[int, str] = field(init=False, default_factory=dict, repr=False)
    _intensities: dict[int, Intensity | None] = field(init=False, default_factory=dict, repr=False)
    cache: dict = field(init=False, default_factory=dict, repr=False)   # what more than one rule reads

    def __post_init__(self) -> None:
        self.paths = call_paths(self.trace)
        rows = self.paths.work
        t = self.trace
        every = rows.size == t.role.size

        def pick(column: np.ndarray) -> np.ndarray:
            return column if every else column[rows]

        self.rows, self.role, self.device = rows, pick(t.role), pick(t.device)
        self.stream, self.start, self.end = pick(t.stream), pick(t.start), pick(t.end)
        self.dur, self.name = pick(t.dur), pick(t.name)
        self.categories, self.category = category_codes(t, among(t.role, GPU_WORK))

    def in_categories(self, *labels: str) -> np.ndarray:
        """Per work event: whether its fine category is one of ``labels``."""
        wanted = np.array([label in labels for label in self.categories] or [False])
        return lookup(wanted, self.category) if self.category.size else np.zeros(0, dtype=bool)

    @cached_property
    def devices(self) -> list[int]:
        """Device indices that ran GPU work."""
        return [int(d) for d in distinct(self.device)]

    def on_device(self, device: int) -> np.ndarray | None:
        """The work events of ``device`` (None: all of them, the trace has one device)."""
        return None if len(self.devices) == 1 and device == self.devices[0] else self.device == device

    @cached_property
    def busy(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Merged busy intervals (kernels, memcpys, memsets) per device."""
        return {d: merge(take(self.start, self.on_device(d)), take(self.end, self.on_device(d))) for d in self.devices}

    @cached_property
    def kernel_busy(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Merged kernel intervals per device."""
        out = {}
        for d in self.devices:
            mine = self.role == KERNEL
            on = self.on_device(d)
            if on is not None:
                mine &= on
            out[d] = merge(take(self.start, mine), take(self.end, mine))
        return out

    @cached_property
    def windows(self) -> dict[int, tuple[float, float]]:
        """(first start, last end) of GPU work per device."""
        return {d: (float(take(self.start, self.on_device(d)).min()), float(take(self.end, self.on_device(d)).max()))
                for d in self.devices}

    @cached_property
    def window_us(self) -> float:
        """The profile's GPU time: the sum of the device windows."""
        return float(sum(end - start for start, end in self.windows.values()))

    @cached_property
    def primary(self) -> int:
        """The device with the most busy time (where host-side waits are measured by default)."""
        if len(self.devices) == 1:
            return self.devices[0]
        return max(self.devices, key=lambda d: float(np.sum(self.busy[d][1] - self.busy[d][0])))

    def idle_within(self, device: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Per interval: the time the device ran nothing, inside its window."""
        lo, hi = self.windows[device]
        s = np.clip(np.asarray(starts, dtype=np.float64), lo, hi)
        e = np.clip(np.asarray(ends, dtype=np.float64), lo, hi)
        busy = covered_up_to(self.busy[device], e) - covered_up_to(self.busy[device], s)
        return np.maximum(e - s - busy, 0.0)

    def kernel_name(self, position: int) -> str:
        """Name of the work event at ``position``."""
        return self.trace.names[self.name[position]]

    def display(self, path: int) -> str:
        """Readable call path of a path id."""
        return self.paths.display(path)

    def pattern(self, path: int) -> str:
        """The readable call path with nn.Module instance numbers dropped (``BertLayer_3`` →
        ``BertLayer``), so that findings group the same code across layers (once per path)."""
        found = self._patterns.get(path)
        if found is None:
            found = self._patterns[path] = MODULE_INSTANCE.sub(r"\1", self.paths.display(path))
        return found

    def host_display(self, row: int) -> str:
        """Readable call path of a host event (a sync call, a DataLoader step)."""
        return self.paths.display(self.paths.host_path(row))

    def op_intensity(self, position: int) -> Intensity | None:
        """Intensity of the CPU operator that launched the work event at ``position`` (shapes
        recorded), looking outwards for the first GEMM operator when the innermost is not one
        (found once per operator: it depends on the operator only)."""
        return self.intensity_of_op(int(self.paths.op_of[position]))

    def intensity_of_op(self, op: int) -> Intensity | None:
        """:meth:`op_intensity` by the operator's row (-1: none), found once per operator."""
        if op not in self._intensities:
            self._intensities[op] = self._outward_intensity(op)
        return self._intensities[op]

    def _outward_intensity(self, op: int) -> Intensity | None:
        """Intensity of CPU operator row ``op``, or of the first GEMM operator around it."""
        found = None
        while op >= 0:
            found = self._intensity(op) if found is None else found
            candidate = self._intensity(op)
            if candidate is not None and candidate.m is not None:
                return candidate
            op = int(self.paths.parent[op])
            while op >= 0 and self.trace.role[op] != CPU_OP:
                op = int(self.paths.parent[op])
        return found

    def _intensity(self, op: int) -> Intensity | None:
        """Intensity of one CPU operator row, None without recorded shapes."""
        table = self.trace.op
        at = int(np.searchsorted(table["rows"], op))
        if at >= table["rows"].size or table["rows"][at] != op:
            return None
        dims, types = int(table["dims"][at]), int(table["types"][at])
        if dims < 0 or types < 0:
            return None
        strings = self.trace.strings
        return intensity(self.trace.names[self.trace.name[op]], strings[dims], strings[types])
