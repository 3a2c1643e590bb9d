"""GPU telemetry and scheduler tables."""
from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas.fields import Fraction, Measured


class GpuInterval(pa.DataFrameModel):
    """Kernel activity of one GPU over one interval, with the pod that held it."""

    node: Series[str]
    gpu: Series[str]
    uuid: Series[str]
    model_name: Series[str]
    pod: Series[str]
    namespace: Series[str]
    container: Series[str]
    ts: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    step_seconds: Series[int] = pa.Field(gt=0)
    busy_fraction: Series[float] = Fraction()
    source: Series[str]

    class Config:
        strict = False


class NodeInfo(pa.DataFrameModel):
    """A scheduler node and the billing resource behind it."""

    node: Series[str]
    provider_id: Series[str]
    resource_id: Series[str]
    instance_type: Series[str]


class GpuRequest(pa.DataFrameModel):
    """GPUs a pod requested on a node, per interval."""

    ts: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    namespace: Series[str]
    pod: Series[str]
    node: Series[str]
    gpus: Series[float] = pa.Field(ge=0)  # MIG instances where mig_profile is set
    mig_profile: Series[str]  # the MIG profile asked for (nvidia.com/mig-3g.40gb -> 3g.40gb); "" whole GPUs


class ScheduledNode(pa.DataFrameModel):
    """A node whose every job a scheduler source lists from start to end (a GPU there no job held
    was held by no workload: unallocated, not of unknown allocation)."""

    node: Series[str]
    start: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    end: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})


class GpuEvidence(pa.DataFrameModel):
    """DCGM evidence of one GPU over one interval (interval means; NaN = not measured).

    Evidence only: the busy fraction of ``GpuInterval`` alone moves money.
    """

    node: Series[str]
    gpu: Series[str]
    uuid: Series[str]
    ts: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    sm_active: Series[float] = Measured()
    tensor_active: Series[float] = Measured()
    dram_active: Series[float] = Measured()
    fb_used_mib: Series[float] = Measured()
    power_watts: Series[float] = Measured()

    class Config:
        strict = False


class Replicas(pa.DataFrameModel):
    """Replica counts of one deployment or HPA over one interval (means; NaN = not measured)."""

    ts: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    namespace: Series[str]
    kind: Series[str] = pa.Field(isin=["deployment", "hpa"])
    name: Series[str]
    spec_replicas: Series[float] = Measured()
    available_replicas: Series[float] = Measured()
    current_replicas: Series[float] = Measured()
    desired_replicas: Series[float] = Measured()
    min_replicas: Series[float] = Measured()
    max_replicas: Series[float] = Measured()

    class Config:
        strict = False
