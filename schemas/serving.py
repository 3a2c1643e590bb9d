"""Serving traffic: request and token counts per interval; queue, batch and cache statistics."""
from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series


class ServiceTraffic(pa.DataFrameModel):
    """Per-interval increases of the serving counters of one pod."""

    ts: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    model_name: Series[str]
    namespace: Series[str]
    pod: Series[str]
    requests: Series[float] = pa.Field(ge=0)
    prompt_tokens: Series[float] = pa.Field(ge=0)
    generated_tokens: Series[float] = pa.Field(ge=0)
    #: the serving family that counted them: "vllm", "triton", "tgi" ("" or absent: another source)
    family: Series[str] = pa.Field(required=False)

    class Config:
        strict = False


class QueueDepth(pa.DataFrameModel):
    """Mean running and waiting requests per interval."""

    ts: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    model_name: Series[str]
    namespace: Series[str]
    pod: Series[str]
    running: Series[float] = pa.Field(ge=0)
    waiting: Series[float] = pa.Field(ge=0)


def _measured(**kwargs):
    """A float figure that is NaN where no series measured it (never a stand-in 0)."""
    return pa.Field(nullable=True, **kwargs)


class ServingStats(pa.DataFrameModel):
    """Queue time, batching, occupancy and prefix-cache figures of one pod's serving family over
    one interval (docs/telemetry.md lists the metric behind each column). NaN = not measured.

    Sums (requests … prefix_hits) are counter increases inside the interval, so that they add
    up over intervals and pods; the ratios beside them are per interval.
    """

    ts: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    family: Series[str] = pa.Field(isin=["vllm", "triton", "tgi"])
    model_name: Series[str]
    namespace: Series[str]
    pod: Series[str]
    requests: Series[float] = _measured(ge=0)
    failures: Series[float] = _measured(ge=0)
    queue_seconds: Series[float] = _measured(ge=0)
    queue_requests: Series[float] = _measured(ge=0)
    queue_seconds_per_request: Series[float] = _measured(ge=0)
    batch_items: Series[float] = _measured(ge=0)
    batch_steps: Series[float] = _measured(ge=0)
    batch_size: Series[float] = _measured(ge=0)
    tokens_per_step: Series[float] = _measured(ge=0)
    running: Series[float] = _measured(ge=0)
    waiting: Series[float] = _measured(ge=0)
    compute_input_seconds: Series[float] = _measured(ge=0)
    compute_infer_seconds: Series[float] = _measured(ge=0)
    compute_output_seconds: Series[float] = _measured(ge=0)
    prefix_queries: Series[float] = _measured(ge=0)
    prefix_hits: Series[float] = _measured(ge=0)
    prefix_hit_rate: Series[float] = _measured(ge=0, le=1)
    kv_cache_usage: Series[float] = _measured(ge=0)

    class Config:
        strict = False
