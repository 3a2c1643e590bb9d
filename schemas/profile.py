"""Kernel profile summaries (from Kineto traces or Nsight exports)."""
from __future__ import annotations

from typing import Optional

import pandera.pandas as pa
from pandera.typing import Series


class KernelSummary(pa.DataFrameModel):
    """One row per profile: kernel-active time and the serving gap ratio.

    ``gap_ratio`` is taken over the served traffic's window (``gap_basis``, METHOD §3:
    connectors/profiles/window.py); the optional columns after ``sync_us`` give that window and g's
    sensitivity (g over the whole GPU window, the work and time left out of the window)."""

    trace: Series[str]
    device: Series[str]
    gpu_window_us: Series[float] = pa.Field(ge=0)
    kernel_active_us: Series[float] = pa.Field(ge=0)
    busy_us: Series[float] = pa.Field(ge=0)
    idle_us: Series[float] = pa.Field(ge=0)
    gap_ratio: Series[float] = pa.Field(ge=0, nullable=True)
    gap_basis: Series[str] = pa.Field(isin=["request_spans", "profiler_steps", "main_activity", "gpu_window"])
    kernels: Series[int] = pa.Field(ge=0)
    sync_us: Series[float] = pa.Field(ge=0)
    gap_window_us: Optional[Series[float]] = pa.Field(ge=0)
    gap_kernel_active_us: Optional[Series[float]] = pa.Field(ge=0)
    gap_ratio_full: Optional[Series[float]] = pa.Field(ge=0, nullable=True)
    excluded_kernels: Optional[Series[int]] = pa.Field(ge=0)
    excluded_kernel_us: Optional[Series[float]] = pa.Field(ge=0)
    excluded_us: Optional[Series[float]] = pa.Field(ge=0)
    gap_note: Optional[Series[str]]


class KernelEvent(pa.DataFrameModel):
    """GPU time per kernel name."""

    name: Series[str]
    category: Series[str]
    count: Series[int] = pa.Field(ge=0)
    total_us: Series[float] = pa.Field(ge=0)


class CategoryTime(pa.DataFrameModel):
    """GPU time per kernel category."""

    category: Series[str]
    total_us: Series[float] = pa.Field(ge=0)


class SweepPoint(pa.DataFrameModel):
    """One point of a collector bundle's sweep (profile.json ``sweep``): throughput and latency at one
    (batch size, concurrency); ``slo_ms`` is the latency bound the collector ran under (null: none)."""

    batch_size: Series[int] = pa.Field(ge=1)
    concurrency: Series[int] = pa.Field(ge=1)
    requests: Series[int] = pa.Field(ge=0)
    error_rate: Series[float] = pa.Field(ge=0, le=1, nullable=True)
    inferences_per_s: Series[float] = pa.Field(ge=0, nullable=True)
    latency_p50_ms: Series[float] = pa.Field(ge=0, nullable=True)
    latency_p95_ms: Series[float] = pa.Field(ge=0, nullable=True)
    latency_p99_ms: Series[float] = pa.Field(ge=0, nullable=True)
    slo_ms: Series[float] = pa.Field(gt=0, nullable=True)
    max_error_rate: Series[float] = pa.Field(ge=0, le=1, nullable=True)
