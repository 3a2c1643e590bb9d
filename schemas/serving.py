"""Serving traffic: request and token counts per interval."""
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
