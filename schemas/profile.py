"""Kernel profile summaries (from Kineto traces or Nsight exports)."""
from __future__ import annotations

import pandera.pandas as pa
from pandera.typing import Series


class KernelSummary(pa.DataFrameModel):
    """One row per profile: kernel-active time and the serving gap ratio."""

    trace: Series[str]
    device: Series[str]
    gpu_window_us: Series[float] = pa.Field(ge=0)
    kernel_active_us: Series[float] = pa.Field(ge=0)
    busy_us: Series[float] = pa.Field(ge=0)
    idle_us: Series[float] = pa.Field(ge=0)
    gap_ratio: Series[float] = pa.Field(ge=0, nullable=True)
    gap_basis: Series[str] = pa.Field(isin=["request_spans", "gpu_window"])
    kernels: Series[int] = pa.Field(ge=0)
    sync_us: Series[float] = pa.Field(ge=0)


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
