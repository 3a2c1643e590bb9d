"""Prometheus aggregates spoiled by a wrong sample, settled from the raw samples of that interval.

PromQL cannot drop single samples from a range before ``sum_over_time``, so the Prometheus
connector asks, beside each aggregate, whether the interval holds a sample the file rules exclude
(``connectors.telemetry.validity``): for kernel activity a sum that is not finite, or a maximum above
the metric's range or a minimum below 0 (members present only then); for a counter a sum that is not
finite or a minimum below 0. Only those intervals are fetched raw; their valid samples replace the
aggregate and their excluded samples are counted, so that the tables and counts equal the file
connector's for the same samples.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from connectors.telemetry.families import GR_ENGINE_ACTIVE, mig_slice
from connectors.telemetry.tables import GPU_KEY
from connectors.telemetry.validity import (
    BUSY_RANGES,
    NOT_ON_MIG,
    UNMEASURED_COLUMNS,
    busy_reasons,
    finish_table,
    no_unmeasured,
)

#: raw(metric, (node, gpu, uuid), k) -> raw samples of one GPU in interval k, in table columns
RawBusy = Callable[[str, tuple[str, str, str], int], pd.DataFrame]
LABELS = ["node", "gpu", "uuid", "model_name", "pod", "namespace", "container"]


def _member(query: str, tag: str) -> str:
    return f'label_replace({query}, "costaudit_agg", "{tag}", "", "")'


def busy_query(selector: str, by: list[str], metric: str) -> str:
    """Per interval: sum and count of the samples, and ``high`` / ``low`` where one is out of range."""
    clause = ", ".join(by)
    high = BUSY_RANGES[metric][1]
    parts = [_member(f"sum by ({clause}) ({fn}_over_time({selector}[$R]))", fn)
             for fn in ("sum", "count")]
    parts.append(_member(f"max by ({clause}) (max_over_time({selector}[$R])) > {high:g}", "high"))
    parts.append(_member(f"min by ({clause}) (min_over_time({selector}[$R])) < 0", "low"))
    return " or ".join(parts)


def counter_bad(selector: str) -> str:
    """The ``bad`` member of a counter query: 1 where the samples' sum is not finite (a NaN or an
    infinite sample; ``x * 0`` is 0 for a finite x and NaN otherwise), in one pass over the samples.
    A negative sample shows in the query's ``min`` member, which the caller reads beside it."""
    return _member(f"(sum_over_time({selector}) * 0 != bool 0) == 1", "bad")


def preferred(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of GPUs with an identity, GR_ENGINE_ACTIVE where the GPU has any (valid or not)."""
    rows = rows.loc[(rows["gpu"] != "") | (rows["uuid"] != "")]
    if rows.empty:
        return rows
    is_gr = rows["metric"] == GR_ENGINE_ACTIVE
    has_gr = is_gr.groupby([rows[c] for c in GPU_KEY]).transform("any")
    return rows.loc[is_gr == has_gr]


def settle_busy(rows: pd.DataFrame, raw: RawBusy) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Rows with every dirty GPU-interval replaced by its valid raw samples' sums and counts.

    Returns the rows, the excluded samples (metric, t, v, reason) and the GPU-intervals left with
    no valid sample (node, gpu, uuid, k, metric).
    """
    keys = GPU_KEY + ["k"]
    if rows.empty or not rows["dirty"].any():
        return rows, _bad_frame(), pd.DataFrame(columns=keys + ["metric"])
    dirty = rows.loc[rows["dirty"], keys + ["metric"]].drop_duplicates(keys)
    marked = rows.merge(dirty[keys].assign(_dirty=True), on=keys, how="left")
    clean = rows.loc[marked["_dirty"].isna().to_numpy()]
    settled, bad, empty = [], [], []
    for node, gpu, uuid, k, metric in dirty.itertuples(index=False, name=None):
        samples = raw(metric, (node, gpu, uuid), int(k))
        reason = busy_reasons(pd.Series(metric, index=samples.index), samples["v"])
        if metric != GR_ENGINE_ACTIVE and mig_slice(uuid) is not None:
            reason = np.where(reason == "", NOT_ON_MIG, reason).astype(object)
        bad.append(samples.loc[reason != "", ["t", "v"]].assign(metric=metric,
                                                                  reason=reason[reason != ""]))
        valid = samples.loc[reason == ""]
        if valid.empty:
            empty.append((node, gpu, uuid, int(k), metric))
            continue
        pooled = valid.groupby(LABELS, sort=True)["v"].agg(["sum", "size"]).reset_index()
        settled.append(pooled.rename(columns={"size": "n"}).assign(k=int(k), metric=metric))
    out = pd.concat([clean, *settled], ignore_index=True) if settled else clean
    return (out.assign(dirty=False), pd.concat(bad, ignore_index=True),
            pd.DataFrame(empty, columns=keys + ["metric"]))


def valid_only(samples: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The raw samples a busy fraction may use."""
    if samples.empty:
        return samples
    reason = busy_reasons(pd.Series(metric, index=samples.index), samples["v"])
    return samples.loc[reason == ""]


def _bad_frame() -> pd.DataFrame:
    return pd.DataFrame({"t": pd.Series([], dtype=float), "v": pd.Series([], dtype=float),
                         "metric": pd.Series([], dtype=object), "reason": pd.Series([], dtype=object)})


def unmeasured_rows(empty: pd.DataFrame, grid) -> pd.DataFrame:
    """The ``unmeasured_intervals`` table from (node, gpu, uuid, k, metric) rows."""
    if empty.empty:
        return no_unmeasured()
    out = empty.sort_values(GPU_KEY + ["k"], kind="stable")
    out = out.assign(ts=grid.stamps(out["k"].to_numpy(dtype=np.int64)))
    return finish_table(out, UNMEASURED_COLUMNS)
