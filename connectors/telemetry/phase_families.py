"""Prefill / decode phase timers and per-request token histograms of the serving servers (METHOD §4).

The sample names below join the serving counters of ``families`` (``SERVING_COUNTERS``), so that
the file connectors and the Prometheus connector read them as every other serving counter: the
increase per series and interval, resets handled. Two kinds:

- **phase timers** (histogram ``_sum`` / ``_count``, cumulative seconds and observations): vLLM's
  ``vllm:request_prefill_time_seconds`` and ``vllm:request_decode_time_seconds`` (per request,
  observed when it finishes), ``vllm:time_per_output_token_seconds`` (V0 and early V1: one
  observation per generated token after the first, so its sum is decode time too) and its later
  name ``vllm:inter_token_latency_seconds``, ``vllm:request_time_per_output_token_seconds`` (one
  observation per request: that request's *mean* time per token, so its sum is not a time spent;
  read for the OpenCost comparison only), and TGI's ``tgi_batch_forward_duration{method=prefill|
  decode}`` (batch forward passes per method: GPU-side phase time). They land in ``serving_stats``
  columns (docs/telemetry.md).
- **token histograms** (``_bucket`` series, one per ``le`` edge): ``vllm:request_prompt_tokens``,
  ``vllm:request_generation_tokens``, TGI's ``tgi_request_input_length`` and
  ``tgi_request_generated_tokens``. Their increases become the ``token_histograms`` table: per
  interval and pod, the requests counted at or below each edge (cumulative, as Prometheus keeps
  them); the generation-cap option reads the distribution from it, and the generated-token
  total from ``serving_stats.generated_tokens`` (vLLM ``vllm:generation_tokens_total``, TGI
  ``tgi_request_generated_tokens_sum``).

Triton's own counters do not tell the phases apart (``nv_inference_compute_infer_duration_us`` is
the whole forward pass); its TensorRT-LLM backend counts context and generation requests per
iteration but times neither, so a Triton service's phases stay *not measured*.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from connectors.telemetry.distinct import by_values, plain

#: sample name -> (family, column); ``{method}`` columns take TGI's ``method`` label, ``bucket:``
#: columns the bucket's ``le`` (never the name of another counter's column: validity.COUNTER_NAMES)
PHASE_COUNTERS = {
    "vllm:request_prefill_time_seconds_sum": ("vllm", "prefill_seconds"),
    "vllm:request_prefill_time_seconds_count": ("vllm", "prefill_requests"),
    "vllm:request_decode_time_seconds_sum": ("vllm", "decode_seconds"),
    "vllm:request_decode_time_seconds_count": ("vllm", "decode_requests"),
    "vllm:time_per_output_token_seconds_sum": ("vllm", "tpot_seconds"),
    "vllm:inter_token_latency_seconds_sum": ("vllm", "itl_seconds"),
    "vllm:request_time_per_output_token_seconds_sum": ("vllm", "request_tpot_seconds"),
    "tgi_batch_forward_duration_sum": ("tgi", "{method}_seconds"),
    "vllm:request_prompt_tokens_bucket": ("vllm", "bucket:prompt_tokens"),
    "vllm:request_generation_tokens_bucket": ("vllm", "bucket:generation_tokens"),
    "tgi_request_input_length_bucket": ("tgi", "bucket:prompt_tokens"),
    "tgi_request_generated_tokens_bucket": ("tgi", "bucket:generation_tokens"),
}
#: serving_stats columns the phase timers fill (docs/telemetry.md)
PHASE_COLUMNS = ("prefill_seconds", "prefill_requests", "decode_seconds", "decode_requests",
                 "tpot_seconds", "itl_seconds", "request_tpot_seconds", "generated_tokens")
METHODS = {"prefill", "decode"}
BUCKET = "bucket:"
HISTOGRAM_COLUMNS = {"ts": "datetime64[ns, UTC]", "family": "str", "model_name": "str",
                     "namespace": "str", "pod": "str", "histogram": "str", "le": "float64",
                     "requests": "float64"}


def phase_column(name: str, column: str, labels: dict[str, str]) -> str:
    """The column of one series: TGI's method filled in, a bucket named with its edge
    (``bucket:generation_tokens@128``); other columns as they are."""
    if "{method}" in column:
        method = labels.get("method", "")
        return column.format(method=method if method in METHODS else "other")
    if column.startswith(BUCKET):
        return f"{column}@{labels.get('le', '')}"
    return column


def _edge(text: str) -> float:
    """A bucket's upper edge (``+Inf`` included); NaN when unreadable."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def token_histograms(increases: pd.DataFrame, grid) -> pd.DataFrame:
    """Table ``token_histograms``: requests at or below each edge per interval, pod and histogram.

    ``increases``: the per-series counter increases of the serving counters (metric, family,
    model_name, namespace, pod, k, increase), of which the bucket series are kept.
    """
    if increases.empty:
        return empty_histograms()
    rows = increases.loc[by_values(lambda m: str(m).startswith(BUCKET),
                                   increases["metric"]).astype(bool)]
    if rows.empty:
        return empty_histograms()
    named = [str(m)[len(BUCKET):].rsplit("@", 1) for m in pd.unique(rows["metric"])]
    histogram = by_values(lambda m: str(m)[len(BUCKET):].rsplit("@", 1)[0], rows["metric"])
    le = by_values(lambda m: _edge(_after_at(str(m)[len(BUCKET):])), rows["metric"])
    rows = rows.assign(histogram=pd.Categorical(histogram, categories=sorted(
        {parts[0] for parts in named})), le=le.astype(float))
    rows = rows.loc[rows["le"].notna()]
    keys = ["k", "family", "model_name", "namespace", "pod", "histogram", "le"]
    out = plain(rows.groupby(keys, sort=True)["increase"].sum().rename("requests").reset_index())
    out["ts"] = grid.stamps(out["k"])
    return out[list(HISTOGRAM_COLUMNS)].astype(
        {c: d for c, d in HISTOGRAM_COLUMNS.items() if c != "ts"}).reset_index(drop=True)


def _after_at(text: str) -> str:
    """What follows a bucket column's last ``@`` (its edge); "" when there is none."""
    parts = text.rsplit("@", 1)
    return parts[1] if len(parts) > 1 else ""


def empty_histograms() -> pd.DataFrame:
    """A ``token_histograms`` table with no rows."""
    return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in HISTOGRAM_COLUMNS.items()})


def distribution(table: pd.DataFrame, histogram: str) -> tuple[np.ndarray, np.ndarray]:
    """(edges ascending, requests in each bucket) of one histogram summed over the rows given:
    bucket i holds the requests above edge i-1 and at or below edge i (cumulative counts
    differenced; a negative difference from counts taken at different times is clipped to 0)."""
    rows = table.loc[table["histogram"] == histogram]
    if rows.empty:
        return np.empty(0), np.empty(0)
    cumulative = rows.groupby("le", sort=True)["requests"].sum()
    edges = cumulative.index.to_numpy(dtype=float)
    counts = np.diff(np.concatenate([[0.0], cumulative.to_numpy(dtype=float)]))
    return edges, np.clip(counts, 0.0, None)
