"""What every kernel-level finding reads of one trace: its GPU work, busy sets and call paths."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from audit.trace.breakdown import event_categories
from audit.trace.callpath import CallPaths, call_paths
from audit.trace.intensity import Intensity, intensity
from connectors.profiles.events import CPU_OP, GPU_WORK, KERNEL, Trace, covered_up_to, merge

MODULE_INSTANCE = re.compile(r"(nn\.Module: [^ >]+?)_\d+(?= >|$)")


@dataclass
class ProfileView:
    """One trace (one rank), prepared for the finding rules.

    ``work`` arrays run over the kernels, memcpys and memsets of the trace in row order (the order
    of ``paths.work``). Windows and busy sets are per device.
    """

    trace: Trace
    rank: int
    paths: CallPaths = field(init=False)
    _patterns: dict[int, str] = field(init=False, default_factory=dict, repr=False)
    _intensities: dict[int, Intensity | None] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.paths = call_paths(self.trace)
        rows = self.paths.work
        t = self.trace
        self.rows, self.role, self.device = rows, t.role[rows], t.device[rows]
        self.stream, self.start, self.end = t.stream[rows], t.start[rows], t.end[rows]
        self.dur, self.name = t.dur[rows], t.name[rows]
        self.category = event_categories(t, np.isin(t.role, GPU_WORK))

    @cached_property
    def devices(self) -> list[int]:
        """Device indices that ran GPU work."""
        return sorted(int(d) for d in np.unique(self.device))

    @cached_property
    def busy(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Merged busy intervals (kernels, memcpys, memsets) per device."""
        return {d: merge(self.start[self.device == d], self.end[self.device == d]) for d in self.devices}

    @cached_property
    def kernel_busy(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Merged kernel intervals per device."""
        out = {}
        for d in self.devices:
            mine = (self.device == d) & (self.role == KERNEL)
            out[d] = merge(self.start[mine], self.end[mine])
        return out

    @cached_property
    def windows(self) -> dict[int, tuple[float, float]]:
        """(first start, last end) of GPU work per device."""
        return {d: (float(self.start[self.device == d].min()), float(self.end[self.device == d].max()))
                for d in self.devices}

    @cached_property
    def window_us(self) -> float:
        """The profile's GPU time: the sum of the device windows."""
        return float(sum(end - start for start, end in self.windows.values()))

    @cached_property
    def primary(self) -> int:
        """The device with the most busy time (where host-side waits are measured by default)."""
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
        op = int(self.paths.op_of[position])
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
