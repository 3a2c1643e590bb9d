"""GPU telemetry and scheduler tables."""
from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas.fields import Fraction


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
    gpus: Series[float] = pa.Field(ge=0)
