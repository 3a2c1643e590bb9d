"""PyTorch profiler (Kineto) Chrome traces → kernel profile tables (METHOD §3, §6).

Tables (schemas/profile.py):

- ``profile`` (one row): GPU window, kernel-active, busy and idle time over the GPU window (first
  start to last end of kernel, memcpy and memset events, per device) or, when the trace carries
  ``costaudit.request*`` annotations, over the union of those request spans; the kernel count and
  host synchronisation time; the serving gap ratio ``gap_ratio`` over the served traffic's window
  named by ``gap_basis`` (request spans, profiler steps, else the main GPU activity:
  connectors/profiles/window.py), that window (``gap_window_us``) and the kernel-active time in it
  (``gap_kernel_active_us``), and g's sensitivity: g over the whole GPU window (``gap_ratio_full``),
  the kernels and kernel-active time outside the window (``excluded_kernels``,
  ``excluded_kernel_us``), the GPU-window time outside it (``excluded_us``) and why a trace's
  profiler steps were not used (``gap_note``). Multi-device traces are measured per device and
  summed; ``device`` names the device with the most kernel-active time.
- ``kernels``: GPU time per kernel name with its category, largest first.
- ``categories``: GPU time per category (kernels by name, memcpy by direction, memset), as sums of
  durations (not unions), largest first.
"""
from __future__ import annotations

import pandas as pd

from connectors.base import Connector
from connectors.bounds import EITHER
from connectors.errors import InputError
from connectors.profiles.categories import (  # noqa: F401
    KERNEL_CATEGORIES,
    MEMCPY_KINDS,
    fine_category,
    kernel_category,
    memcpy_category,
    without_parameters,
)
from connectors.profiles.events import KERNEL, TraceData, load_trace
from connectors.profiles.trace_tables import (  # noqa: F401  (the readers' tables, named here as before)
    ADDITIVE,
    category_table,
    event_frame,
    kernel_table,
    profile_row,
    profile_sums,
    profile_table,
    trace_notes,
)
from schemas.profile import CategoryTime, KernelEvent, KernelSummary

NO_GPU_EVENTS = "no GPU kernel, memcpy or memset events"
#: a profile of copies alone measures no forward pass: its service's GPU time would be "no kernel profile"
NO_KERNEL_EVENTS = "no GPU kernel event, only memcpy / memset: nothing in it measures the model's compute"
EXPECTED_CUDA = "a trace recorded with ProfilerActivity.CUDA"


class KinetoConnector(Connector):
    """Reads one PyTorch profiler Chrome trace (.json or .json.gz), or a folder of one job's rank
    traces as one profile (connectors/profiles/rankset.py)."""

    format_name = "kineto"
    kind = "profiles"
    accepts = EITHER
    schemas = {"profile": KernelSummary, "kernels": KernelEvent, "categories": CategoryTime}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Parse the trace and build the three tables; a profile covers no fixed time."""
        if self.path.is_dir():
            from connectors.profiles.rankset import read_rank_set

            tables, rows, self.parsed = read_rank_set(self.path, self.format_name, read_rank)
            return tables, rows, (None, None)
        trace = read_view(self.path)
        self.parsed = trace.trace  # the whole trace's columns, for the audit's kernel evidence
        events = event_frame(trace)
        tables = {
            "profile": profile_table(trace, self.path.name),
            "kernels": kernel_table(events),
            "categories": category_table(events),
        }
        notes = trace_notes(trace.trace) if trace.trace is not None else None
        if notes is not None and len(notes):
            tables["notes"] = notes
        return tables, trace.rows, (None, None)


def read_view(path) -> TraceData:
    """The GPU view of the trace at ``path``; a trace without GPU work, or with copies alone, is
    refused (an InputError naming it)."""
    trace = load_trace(path)
    if trace.kind.size == 0:
        raise InputError(path, NO_GPU_EVENTS, expected=EXPECTED_CUDA)
    if not (trace.kind == KERNEL).any():
        raise InputError(path, NO_KERNEL_EVENTS, expected=EXPECTED_CUDA)
    return trace


def read_rank(path) -> tuple[TraceData, object, int]:
    """One rank of a rank set: its GPU view (:func:`read_view`), its whole trace and its events read."""
    view = read_view(path)
    return view, view.trace, view.rows

