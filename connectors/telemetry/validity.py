"""Samples that are well formed but wrong: which are excluded, why, and how many (METHOD §3).

A kernel-activity sample outside its range (``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` outside [0, 1],
``DCGM_FI_DEV_GPU_UTIL`` outside [0, 100]) or not finite (NaN, ±Inf) is excluded: an interval's
busy fraction comes from its valid samples, and a GPU-interval with none is unmeasured. A counter
sample that is not finite or negative is excluded the same way; a counter that decreases to a
value of zero or more is a restart (a reset, counted). Every telemetry reader (OpenMetrics files,
``query_range`` dumps, Prometheus, dcgmi, nvidia-smi) applies these rules, so that the same samples
give the same counts, which the audit reports per source and metric.

Tables (``EXCLUDED``, ``RESETS``, ``UNMEASURED``): what each connector hands on beside its data.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from connectors.telemetry.distinct import by_values
from connectors.telemetry.families import COUNTERS, GPU_UTIL, GR_ENGINE_ACTIVE, SERVING_COUNTERS

OUT_OF_RANGE = "out of range"
NOT_FINITE = "not finite"
#: DCGM_FI_DEV_GPU_UTIL on a MIG instance: not defined there (only the profiling metrics are)
NOT_ON_MIG = "GPU_UTIL is not defined on a MIG instance (needs DCGM_FI_PROF_GR_ENGINE_ACTIVE)"
NEGATIVE_COUNTER = "negative counter value"
#: a DCGM sample whose series has neither a gpu nor a UUID label: no GPU to place it on
NO_GPU_LABEL = "no GPU label (gpu, UUID): placed on no GPU"
#: the same, for GR_ENGINE_ACTIVE where the labelled GPUs' busy_fraction came from GPU_UTIL
FELL_BACK = f"{NO_GPU_LABEL}; busy_fraction fell back to {GPU_UTIL}"

#: kernel-activity metric -> (low, high, how the range reads)
BUSY_RANGES = {GR_ENGINE_ACTIVE: (0.0, 1.0, "0 to 1"), GPU_UTIL: (0.0, 100.0, "0 to 100")}
COUNTER_RANGE = "a finite value of 0 or more"

#: the report's name of a counter, by (family, column) as the families describe its series
COUNTER_NAMES = {("vllm", column): name for name, column in COUNTERS.items()}
COUNTER_NAMES.update({pair: name for name, pair in SERVING_COUNTERS.items()})

EXCLUDED_COLUMNS = {"metric": "str", "reason": "str", "count": "int64", "expected": "str",
                    "example": "str", "first_ts": "datetime64[ns, UTC]"}
RESET_COLUMNS = {"metric": "str", "resets": "int64"}
UNMEASURED_COLUMNS = {"node": "str", "gpu": "str", "uuid": "str", "ts": "datetime64[ns, UTC]",
                      "metric": "str"}


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in columns.items()})


def no_exclusions() -> pd.DataFrame:
    """An ``excluded_samples`` table with no row."""
    return _empty(EXCLUDED_COLUMNS)


def no_resets() -> pd.DataFrame:
    """A ``counter_resets`` table with no row."""
    return _empty(RESET_COLUMNS)


def no_unmeasured() -> pd.DataFrame:
    """An ``unmeasured_intervals`` table with no row."""
    return _empty(UNMEASURED_COLUMNS)


def shown_value(value: float) -> str:
    """A sample value as the exposition format writes it: ``NaN``, ``+Inf``, ``-Inf``, ``7.5``."""
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def busy_reasons(metric: pd.Series, v: pd.Series) -> np.ndarray:
    """Per sample of a kernel-activity metric: "" when valid, else why it is excluded."""
    values = v.to_numpy(dtype=float)
    high = by_values(lambda m: BUSY_RANGES.get(m, (0.0, np.inf, ""))[1], metric).astype(float)
    finite = np.isfinite(values)
    with np.errstate(invalid="ignore"):
        inside = (values >= 0.0) & (values <= high)
    return _reasons(len(values), [(~inside, OUT_OF_RANGE), (~finite, NOT_FINITE)])


def counter_reasons(v: pd.Series | np.ndarray) -> np.ndarray:
    """Per counter sample: "" when valid, else why it is excluded (not finite, negative)."""
    values = np.asarray(v, dtype=float)
    finite = np.isfinite(values)
    with np.errstate(invalid="ignore"):
        negative = values < 0
    return _reasons(len(values), [(negative, NEGATIVE_COUNTER), (~finite, NOT_FINITE)])


def _reasons(n: int, rules: list[tuple[np.ndarray, str]]) -> np.ndarray:
    """An object array of "" with each rule's reason written where its mask holds (later rules
    win); one shared string object per reason, not one per sample."""
    out = np.full(n, "", dtype=object)
    for mask, reason in rules:
        out[mask] = reason
    return out


def expected_of(metric: str, reason: str) -> str:
    """What a valid sample of ``metric`` is."""
    if reason.startswith(NO_GPU_LABEL):
        return "a gpu or UUID label"
    if metric in BUSY_RANGES:
        return BUSY_RANGES[metric][2]
    return COUNTER_RANGE


def excluded_table(bad: pd.DataFrame) -> pd.DataFrame:
    """Counts per metric and reason of excluded samples (metric, reason, t in seconds, v).

    ``example`` is the earliest excluded value (ties: the smallest), ``first_ts`` its time.
    """
    if bad.empty:
        return no_exclusions()
    frame = bad[["metric", "reason", "t", "v"]].copy()
    frame["_order"] = np.where(np.isnan(frame["v"].to_numpy(dtype=float)), np.inf, frame["v"])
    frame = frame.sort_values(["metric", "reason", "t", "_order"], kind="stable")
    first = frame.drop_duplicates(["metric", "reason"])
    counts = frame.groupby(["metric", "reason"], sort=True).size().rename("count").reset_index()
    out = counts.merge(first[["metric", "reason", "t", "v"]], on=["metric", "reason"])
    out["expected"] = [expected_of(m, r) for m, r in zip(out["metric"], out["reason"])]
    out["example"] = [shown_value(v) for v in out["v"]]
    micros = np.rint(out["t"].to_numpy(dtype=float) * 1e6).astype(np.int64)
    out["first_ts"] = pd.to_datetime(micros * 1000, utc=True)
    return finish_table(out, EXCLUDED_COLUMNS)


def unplaced_table(unplaced: pd.DataFrame, activity: pd.DataFrame) -> pd.DataFrame:
    """``excluded_samples`` rows of DCGM samples without a GPU label (metric, t in seconds, v),
    per metric: GR_ENGINE_ACTIVE's say when the ``gpu_activity`` table took GPU_UTIL instead."""
    fell_back = bool(len(activity)) and bool((activity["source"] == GPU_UTIL).any())
    gr = (unplaced["metric"] == GR_ENGINE_ACTIVE).to_numpy() & fell_back
    return excluded_table(unplaced.assign(reason=np.where(gr, FELL_BACK, NO_GPU_LABEL).astype(object)))


def unlabelled_table(counts: pd.DataFrame, activity: pd.DataFrame,
                     first_samples: Callable[[str, int], pd.DataFrame]) -> pd.DataFrame:
    """``excluded_samples`` rows of DCGM series with no GPU label, from the per-interval sample
    counts a server aggregated (metric, k, n): each metric's count, and as its example the earliest
    of the raw samples (t, v) ``first_samples(metric, k)`` gives of its first interval, as
    :func:`unplaced_table` gives them of a file."""
    parts = []
    for metric, group in counts.groupby("metric", sort=True):
        samples = first_samples(metric, int(group["k"].min()))
        if len(samples):
            table = unplaced_table(samples[["t", "v"]].assign(metric=metric), activity)
            parts.append(table.assign(count=int(group["n"].sum())))
    return merge_excluded(*parts)


def merge_excluded(*tables: pd.DataFrame) -> pd.DataFrame:
    """Several ``excluded_samples`` tables as one: counts added, the earliest example kept."""
    parts = [t for t in tables if len(t)]
    if not parts:
        return no_exclusions()
    frame = pd.concat(parts, ignore_index=True).sort_values(
        ["metric", "reason", "first_ts"], kind="stable")
    counts = frame.groupby(["metric", "reason"], sort=True)["count"].sum().reset_index()
    first = frame.drop_duplicates(["metric", "reason"]).drop(columns="count")
    return finish_table(counts.merge(first, on=["metric", "reason"]), EXCLUDED_COLUMNS)


def resets_table(metrics: pd.Series | np.ndarray, resets: pd.Series | np.ndarray) -> pd.DataFrame:
    """Resets summed per metric (metrics with none left out)."""
    frame = pd.DataFrame({"metric": np.asarray(metrics, dtype=object),
                          "resets": np.asarray(resets, dtype=np.int64)})
    frame = frame.groupby("metric", sort=True)["resets"].sum().reset_index()
    return finish_table(frame.loc[frame["resets"] > 0], RESET_COLUMNS)


def counter_name(family: pd.Series, column: pd.Series) -> np.ndarray:
    """The counter a series' increases come from, as the report names it."""
    return by_values(lambda f, c: COUNTER_NAMES.get((f, c.partition("@")[0]), c), family, column)


def finish_table(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """The columns in order, typed, with a fresh index."""
    if frame.empty:
        return _empty(columns)
    out = frame[list(columns)].reset_index(drop=True)
    return out.astype({c: d for c, d in columns.items() if not d.startswith("datetime")})


def renamed(table: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """A table with its ``metric`` column renamed (a reader naming its own columns)."""
    if table.empty:
        return table
    return table.assign(metric=table["metric"].map(lambda m: names.get(m, m)))
