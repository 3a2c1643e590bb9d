"""The ``serving_stats`` table: queue time, batch size, occupancy and prefix-cache figures per
interval, pod and serving family (vLLM, Triton, TGI), built from per-key counter increases and
gauge means, so that the file connectors (sample means) and Prometheus (pooled sums / counts)
share it. A figure no series gives is NaN (not measured), never 0.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from connectors.telemetry.distinct import by_values, plain_index
from connectors.telemetry.families import FRACTION_GAUGES, SERVING_SCALE
from connectors.telemetry.grid import NS, Grid
from connectors.telemetry.tables import TABLE_COLUMNS, empty_table, finish

SERVING_STAT_KEY = ["k", "family", "model_name", "namespace", "pod"]


def _ratio(num: pd.Series, den: pd.Series) -> pd.Series:
    """num / den where den > 0, else NaN (not measured, never 0)."""
    return (num / den.where(den > 0)).astype(float)


def serving_stats(increases: pd.DataFrame, gauges: pd.Series, queue_table: pd.DataFrame,
                  grid: Grid) -> pd.DataFrame:
    """Queue time, batch size, occupancy and prefix-cache figures per interval, pod and family.

    ``increases``: per-series counter increases (metric, family, model_name, namespace, pod, k,
    increase) of vLLM, Triton and TGI. ``gauges``: interval means indexed by (metric, family,
    model_name, namespace, pod, engine, k). ``queue_table``: the ``queue`` table (vLLM running /
    waiting). A figure no series gives is NaN (not measured), never 0.
    """
    parts = []
    if len(increases):
        inc = increases[SERVING_STAT_KEY + ["metric", "increase"]].copy()
        scale = by_values(lambda f, m: SERVING_SCALE.get((f, m), 1.0), inc["family"], inc["metric"])
        inc["increase"] = inc["increase"].to_numpy(dtype=float) * scale.astype(float)
        parts.append(plain_index(inc.groupby(SERVING_STAT_KEY + ["metric"]).increase.sum()))
    if len(gauges):
        g = gauges.rename("v").reset_index()
        fraction = g["metric"].isin(FRACTION_GAUGES)
        parts.append(g.loc[~fraction].groupby(SERVING_STAT_KEY + ["metric"]).v.sum())
        parts.append(g.loc[fraction].groupby(SERVING_STAT_KEY + ["metric"]).v.mean())
    if len(queue_table):
        q = queue_table.assign(family="vllm", k=(queue_table["ts"].astype("int64") - grid.start_ns)
                               // (grid.step * NS))
        q = q.melt(id_vars=SERVING_STAT_KEY, value_vars=["running", "waiting"], var_name="metric")
        parts.append(q.set_index(SERVING_STAT_KEY + ["metric"])["value"])
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_table("serving_stats")
    wide = pd.concat(parts).groupby(level=SERVING_STAT_KEY + ["metric"]).sum(min_count=1)
    out = wide.unstack("metric").reset_index()
    out.columns.name = None
    for column in list(TABLE_COLUMNS["serving_stats"]) + ["queue_seconds_v0", "queue_requests_v0",
                                                         "kv_cache_usage_v0", "prefix_hit_rate_v0"]:
        if column not in out:
            out[column] = np.nan
    v0 = out["queue_seconds"].isna() & out["queue_requests"].isna()
    out.loc[v0, "queue_seconds"] = out.loc[v0, "queue_seconds_v0"]
    out.loc[v0, "queue_requests"] = out.loc[v0, "queue_requests_v0"]
    out["kv_cache_usage"] = out["kv_cache_usage"].fillna(out["kv_cache_usage_v0"])
    triton = (out["family"] == "triton") & out["queue_seconds"].notna()
    answered = out[["requests", "failures"]].sum(axis=1, min_count=1)
    out.loc[triton, "queue_requests"] = answered[triton]
    out["queue_seconds_per_request"] = _ratio(out["queue_seconds"], out["queue_requests"])
    per_step = _ratio(out["batch_items"], out["batch_steps"])
    out["batch_size"] = np.where(out["family"] == "triton", per_step,
                                 np.where(out["family"] == "tgi", out["running"], np.nan))
    out["tokens_per_step"] = np.where(out["family"] == "vllm", per_step, np.nan)
    out["prefix_hit_rate"] = _ratio(out["prefix_hits"], out["prefix_queries"]).fillna(
        out["prefix_hit_rate_v0"])
    out["ts"] = grid.stamps(out["k"])
    return finish("serving_stats", out.sort_values(SERVING_STAT_KEY, kind="stable"))
