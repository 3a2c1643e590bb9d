"""Serving traffic: request and token counts per interval; queue, batch and cache statistics."""
from __future__ import annotations

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas.fields import Measured


class ServiceTraffic(pa.DataFrameModel):
    """Per-interval increases of the serving counters of one pod."""

    ts: Series[pd.DatetimeTZDtype] = pa.Field(dtype_kwargs={"unit": "ns", "tz": "UTC"})
    model_name: Series[str]
    namespace: Series[str]
    pod: Series[str]
    #: NaN where the pod had no request series in the interval (only token series): not measured
    requests: Series[float] = Measured()
    #: NaN where no token series measured them (Triton counts none; request logs neither)
    prompt_tokens: Series[float] = Measured()
    generated_tokens: Series[float] = Measured()
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
    requests: Series[float] = Measured()
    failures: Series[float] = Measured()
    received: Series[float] = Measured()
    queue_seconds: Series[float] = Measured()
    queue_requests: Series[float] = Measured()
    queue_seconds_per_request: Series[float] = Measured()
    batch_items: Series[float] = Measured()
    batch_steps: Series[float] = Measured()
    batch_size: Series[float] = Measured()
    tokens_per_step: Series[float] = Measured()
    running: Series[float] = Measured()
    waiting: Series[float] = Measured()
    compute_input_seconds: Series[float] = Measured()
    compute_infer_seconds: Series[float] = Measured()
    compute_output_seconds: Series[float] = Measured()
    prefix_queries: Series[float] = Measured()
    prefix_hits: Series[float] = Measured()
    prefix_hit_rate: Series[float] = Measured(le=1)
    kv_cache_usage: Series[float] = Measured()
    #: phase timers (connectors.telemetry.phase_families): seconds and observations summed per interval
    prefill_seconds: Series[float] = Measured(required=False)
    prefill_requests: Series[float] = Measured(required=False)
    decode_seconds: Series[float] = Measured(required=False)
    decode_requests: Series[float] = Measured(required=False)
    tpot_seconds: Series[float] = Measured(required=False)
    itl_seconds: Series[float] = Measured(required=False)
    request_tpot_seconds: Series[float] = Measured(required=False)
    generated_tokens: Series[float] = Measured(required=False)

    class Config:
        strict = False
