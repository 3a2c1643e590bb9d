"""Per-interval aggregates from Prometheus → the tables the OpenMetrics connector builds.

Every function here reproduces one rule of ``connectors.telemetry.tables`` from aggregates instead of
samples, exactly: interval means are pooled as Σ sum / Σ count over the series of a key; "most
frequent value" picks count samples per value; counter increases come from the first and last
value of each interval (the first is the minimum when the interval holds no reset). Where the
aggregates cannot decide (a tie that the file rule breaks by the latest sample time, a reset inside
an interval), the raw samples of that one interval are fetched through a callback.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import pandas as pd

from connectors.telemetry.families import GR_ENGINE_ACTIVE, QUEUE_GAUGES
from connectors.telemetry.om_cells import EVIDENCE_NAMES
from connectors.telemetry.promqueries import REQUEST_BY
from connectors.telemetry.tables import (
    GPU_KEY,
    REQUEST_KEY,
    SERVING_KEY,
    empty_table,
    finish,
    per_interval_table,
    requests_table,
    resource_id,
    traffic_from_increases,
    with_pod_nodes,
)
from connectors.telemetry.validity import counter_reasons

#: raw(key values, interval) -> raw samples (resolved label columns, t, v) of that interval
Raw = Callable[[dict, int], pd.DataFrame]


def busy_sums(frame: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """Rows of a busy sum/count/high/low union query: labels, k, sum, n and ``dirty``.

    ``dirty``: the interval holds a sample that is not finite (the sum is not) or out of range
    (the ``high`` / ``low`` members are present only then); its raw samples settle it.
    """
    if frame.empty:
        return pd.DataFrame(columns=labels + ["k", "sum", "n", "dirty"])
    agg, v = frame["costaudit_agg"], frame["v"].to_numpy(dtype=float)
    flagged = frame.assign(bad=((agg == "sum") & ~np.isfinite(v)) | agg.isin(["high", "low"]))
    dirty = flagged.groupby(labels + ["k"], observed=True)["bad"].any().rename("dirty")
    counted = flagged.loc[agg.isin(["sum", "count"])]
    wide = counted.pivot_table(index=labels + ["k"], columns="costaudit_agg", values="v",
                               aggfunc="sum", observed=True)
    wide = wide.join(dirty, how="left").rename(columns={"count": "n"}).reset_index()
    wide["dirty"] = wide["dirty"].fillna(False).astype(bool)
    return wide.dropna(subset=["n"]).loc[lambda f: f["n"] > 0]


def unlabelled_evidence(rows: pd.DataFrame) -> pd.DataFrame:
    """(metric as DCGM names it, k, n) of the DCGM evidence rows (metric, node, gpu, uuid, k, sum, n)
    of series with no GPU label (gpu, UUID): no GPU can take their samples, so they are counted in
    ``excluded_samples`` as the busy gauges' are (the file readers set them aside in ``EvidenceCells``)."""
    lost = rows.loc[(rows["gpu"] == "") & (rows["uuid"] == ""), ["metric", "k", "n"]]
    return lost.assign(metric=lost["metric"].map(EVIDENCE_NAMES))


def sums_and_counts(frame: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """Rows of a sum/count union query side by side: labels, k, sum, n."""
    if frame.empty:
        return pd.DataFrame(columns=labels + ["k", "sum", "n"])
    wide = frame.pivot_table(index=labels + ["k"], columns="costaudit_agg", values="v",
                             aggfunc="sum", observed=True)
    wide = wide.rename(columns={"count": "n"}).reset_index()
    return wide.dropna(subset=["sum", "n"]).loc[lambda f: f["n"] > 0]


def request_sums(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows of GPU-request queries (``promqueries.request_query``) side by side: ``REQUEST_BY``,
    k, sum, n and ``most`` (a label set named by both request names keeps its larger count)."""
    rows = sums_and_counts(frame.loc[frame["costaudit_agg"] != "most"], REQUEST_BY)
    if rows.empty:
        return rows.assign(most=pd.Series([], dtype=float))
    most = frame.loc[frame["costaudit_agg"] == "most"].groupby(REQUEST_BY + ["k"])["v"].max()
    return rows.merge(most.rename("most").reset_index(), on=REQUEST_BY + ["k"], how="left")


# --------------------------------------------------------------------------------------------
# Choosing one value per key, as tables.most_frequent and tables.node_info do
# --------------------------------------------------------------------------------------------

def pick(rows: pd.DataFrame, keys: list[str], column: str, carried: tuple[str, ...] = (),
         raw: Raw | None = None, by_count: bool = True) -> pd.DataFrame:
    """Per key, the most frequent non-empty value (ties: latest sample, then smallest).

    ``rows`` hold keys, column, carried, n (samples) and k (interval). With by_count False the
    latest value wins whatever the counts. Ties the intervals cannot break go to ``raw``.
    """
    named = rows.loc[rows[column] != ""]
    if named.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in keys + [column, *carried]})
    per = named.groupby(keys + [column], sort=False).agg(n=("n", "sum"), last=("k", "max"))
    per = per.reset_index()
    if not by_count:
        per["n"] = 0
    per = per.sort_values(["n", "last", column], ascending=[False, False, True], kind="stable")
    best = per.drop_duplicates(keys).reset_index(drop=True)
    contenders = per.merge(best[keys + ["n", "last"]], on=keys + ["n", "last"])
    sizes = contenders.groupby(keys, as_index=False).size()
    best = best.merge(sizes, on=keys, how="left")
    best["_ambiguous"] = best["size"] > 1
    if carried:
        best = _carry(named, keys, column, carried, best)
    for i in best.index[best["_ambiguous"]]:
        key = {c: best.at[i, c] for c in keys}
        mask = np.logical_and.reduce([contenders[c] == v for c, v in key.items()])
        values = _from_raw(raw, key, int(best.at[i, "last"]), set(contenders.loc[mask, column]),
                           column, carried)
        for name, value in zip([column, *carried], values):
            best.at[i, name] = value
    return best[keys + [column, *carried]]


def _carry(named, keys, column, carried, best) -> pd.DataFrame:
    """Carried columns of the chosen value in its last interval; several candidates = ambiguous."""
    at_last = named.merge(best[keys + [column, "last"]], on=keys + [column])
    at_last = at_last.loc[at_last["k"] == at_last["last"]]
    combos = at_last.drop_duplicates(keys + list(carried))
    counts = combos.groupby(keys, as_index=False).size().rename(columns={"size": "_combos"})
    out = best.merge(combos.drop_duplicates(keys)[keys + list(carried)], on=keys, how="left")
    out = out.merge(counts, on=keys, how="left")
    out["_ambiguous"] = out["_ambiguous"] | (out["_combos"] > 1)
    return out


def _from_raw(raw: Raw | None, key: dict, k: int, candidates: set, column: str,
              carried: tuple[str, ...]) -> list:
    """Break a tie with the raw samples of interval k: latest sample, then smallest value."""
    samples = raw(key, k) if raw is not None else pd.DataFrame(columns=[column, "t"])
    for name, value in key.items():
        if name != "k" and name in samples:
            samples = samples.loc[samples[name] == value]
    samples = samples.loc[samples[column].isin(candidates) & samples["v"].notna()]
    if samples.empty:
        raise LookupError(f"no raw samples to settle {column} for {key}")
    samples = samples.sort_values("t", kind="stable")
    latest = samples.groupby(column)["t"].max().reset_index()
    value = latest.sort_values(["t", column], ascending=[False, True]).iloc[0][column]
    holder = samples.loc[samples[column] == value].iloc[-1]
    return [value, *(holder[c] for c in carried)]


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

def gpu_activity(rows: pd.DataFrame, grid, raw: Raw) -> pd.DataFrame:
    """Pooled mean busy fraction per GPU and interval, with the pod that held it (file rules).

    ``rows``: node, gpu, uuid, model_name, pod, namespace, container, metric, k, sum, n.
    ``raw(key, k)`` fetches the preferred metric's samples of one GPU and interval.
    """
    rows = rows.loc[(rows["gpu"] != "") | (rows["uuid"] != "")]
    if rows.empty:
        return empty_table("gpu_activity")
    is_gr = rows["metric"] == GR_ENGINE_ACTIVE
    has_gr = is_gr.groupby([rows[c] for c in GPU_KEY]).transform("any")
    rows = rows.loc[is_gr == has_gr].copy()
    rows["sum"] = rows["sum"] * np.where(rows["metric"] == GR_ENGINE_ACTIVE, 1.0, 0.01)
    keys = GPU_KEY + ["k"]
    is_shared = _in_keys(rows, keys, shared_intervals(rows, keys, raw))
    single = rows.loc[~is_shared]
    busy = single.groupby(keys, sort=True).agg(total=("sum", "sum"), n=("n", "sum"),
                                               source=("metric", "first")).reset_index()
    busy["busy_fraction"] = (busy["total"] / busy["n"]).clip(0.0, 1.0)
    busy = busy.merge(pick(single, keys, "pod", ("namespace", "container"), raw), on=keys, how="left")
    if is_shared.any():
        busy = pd.concat([busy, _per_pod(rows.loc[is_shared], keys)], ignore_index=True)
        busy = busy.sort_values(keys + ["namespace", "pod"], kind="stable", na_position="first")
    models = pick(rows, GPU_KEY, "model_name", (), raw)
    out = busy.merge(models, on=GPU_KEY, how="left")
    labels = ["pod", "namespace", "container", "model_name"]
    out[labels] = out[labels].fillna("")
    out["ts"] = grid.stamps(out["k"])
    out["step_seconds"] = grid.step
    return finish("gpu_activity", out)


def shared_intervals(rows: pd.DataFrame, keys: list[str], raw: Raw) -> list[tuple]:
    """GPU-intervals several pods held at once (tables.time_shared): where the aggregates name
    two pods, the raw samples of that interval say whether their series overlap in time."""
    named = rows.loc[rows["pod"] != ""]
    pods = named.drop_duplicates(keys + ["namespace", "pod"]).groupby(keys, sort=True).size()
    out = []
    for key in pods.index[pods > 1]:
        values = dict(zip(keys, key))
        samples = raw(values, int(values["k"]))
        samples = samples.loc[samples["pod"] != "", ["t", "namespace", "pod"]].drop_duplicates()
        if len(samples) and (samples.groupby("t").size() > 1).any():
            out.append(tuple(key))
    return out


def _in_keys(rows: pd.DataFrame, keys: list[str], found: list[tuple]) -> np.ndarray:
    if not found:
        return np.zeros(len(rows), dtype=bool)
    return rows.set_index(keys).index.isin(pd.MultiIndex.from_tuples(found, names=keys))


def _per_pod(rows: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per pod of a time-shared GPU-interval: the pooled mean of that pod's own series."""
    rows = rows.loc[rows["pod"] != ""].sort_values("n", kind="stable")
    out = rows.groupby(keys + ["namespace", "pod"], sort=True).agg(
        total=("sum", "sum"), n=("n", "sum"), source=("metric", "first"),
        container=("container", "last")).reset_index()
    out["busy_fraction"] = (out["total"] / out["n"]).clip(0.0, 1.0)
    return out


def node_info(info: pd.DataFrame, node_labels: pd.DataFrame, raw_info: Raw,
              raw_labels: Raw) -> pd.DataFrame:
    """One row per node: the latest non-empty provider id and instance type (labels fallback).

    ``info`` / ``node_labels``: node, provider_id, instance_type, k (presence per interval).
    """
    nodes = _latest_per_node(info, raw_info)
    if nodes.empty:
        return empty_table("node_info")
    extra = _latest_per_node(node_labels, raw_labels)[["node", "instance_type"]]
    nodes = nodes.merge(extra, on="node", how="left", suffixes=("", "_labels"))
    missing = nodes["instance_type"] == ""
    nodes.loc[missing, "instance_type"] = nodes.loc[missing, "instance_type_labels"].fillna("")
    nodes["resource_id"] = nodes["provider_id"].map(resource_id)
    return finish("node_info", nodes.sort_values("node"))


def _latest_per_node(frame: pd.DataFrame, raw: Raw) -> pd.DataFrame:
    """Per node, the latest non-empty provider id and instance type."""
    frame = frame.loc[frame["node"] != ""].assign(n=1)
    out = pd.DataFrame({"node": sorted(frame["node"].unique())}, dtype="str")
    for column in ("provider_id", "instance_type"):
        chosen = pick(frame, ["node"], column, (), raw, by_count=False)
        out = out.merge(chosen, on="node", how="left")
    return out.fillna("").astype("str")


def gpu_requests(requests: pd.DataFrame, pod_info: pd.DataFrame | None, grid,
                 raw_pods: Raw) -> pd.DataFrame:
    """GPUs requested per pod and interval: pooled container means, each times its share of the
    interval's scrapes (``tables.requests_table``), summed; node filled in.

    ``requests``: namespace, pod, container, node, k, sum, n, most. ``pod_info``: namespace, pod,
    node, k, n (needed only when some request series lacks a node).
    """
    if requests.empty:
        return empty_table("gpu_requests")
    frame = requests.copy()
    if (frame["node"] == "").any() and pod_info is not None and len(pod_info):
        per_interval = pick(pod_info, ["namespace", "pod", "k"], "node", (), raw_pods)
        overall = pick(pod_info, ["namespace", "pod"], "node", (), raw_pods)
        frame = with_pod_nodes(frame, per_interval, overall)
    grouped = frame.groupby(REQUEST_KEY)
    pooled = grouped[["sum", "n"]].sum()
    return requests_table(pooled["sum"] / pooled["n"], grouped["most"].max(),
                          frame.groupby("k")["most"].max(), grid)


def queue(rows: pd.DataFrame, grid) -> pd.DataFrame:
    """Mean running and waiting requests per interval and pod (pooled per engine, then summed).

    ``rows``: metric (running | waiting), model_name, namespace, pod, engine, k, sum, n.
    """
    if rows.empty:
        return empty_table("queue")
    pooled = rows.groupby(SERVING_KEY + ["engine", "metric"])[["sum", "n"]].sum()
    means = pooled["sum"] / pooled["n"]
    sums = means.groupby(level=SERVING_KEY + ["metric"]).sum()
    return per_interval_table("queue", sums, QUEUE_GAUGES.values(), grid)


def traffic(increases: pd.DataFrame, grid) -> pd.DataFrame:
    """Requests and tokens per interval and pod: per-series increases summed."""
    return traffic_from_increases(increases, grid)


def counter_increases(points: pd.DataFrame, ends: pd.Series) -> pd.DataFrame:
    """Per series and interval, the increase of the pairs whose earlier sample lies in it.

    ``points``: id, metric, model_name, namespace, pod, k, first, last, within (the increase
    inside the interval, resets handled) and count (samples, 2 meaning "at least two").
    ``ends``: per series id, the value of a valid sample exactly at the window end (the file rule
    keeps it). The pair from an interval's last sample to the series' next sample counts in it; a
    drop means the counter restarted from 0, so that pair's increase is the later value.
    ``resets`` (restarts inside the interval, when the points have it) gains the one across.
    """
    if points.empty:
        return points.assign(increase=pd.Series([], dtype=float), resets=pd.Series([], dtype=int))
    p = points.sort_values(["id", "k"], kind="stable").reset_index(drop=True)
    following = p.groupby("id", sort=False)["first"].shift(-1)
    at_end = p["id"].map(ends) if len(ends) else pd.Series(np.nan, index=p.index)
    following = following.where(following.notna(), at_end)
    has_next = following.notna().to_numpy()
    later, earlier = following.to_numpy(dtype=float), p["last"].to_numpy(dtype=float)
    cross = np.where(later >= earlier, later - earlier, later)
    p["increase"] = p["within"].to_numpy(dtype=float) + np.where(has_next, cross, 0.0)
    inside = p["resets"].fillna(0).to_numpy(dtype=int) if "resets" in p else 0
    p["resets"] = inside + (has_next & (later < earlier)).astype(int)
    return p.loc[has_next | (p["count"].to_numpy() >= 2)]


class RawCounter(NamedTuple):
    """One series' valid raw samples in one interval, summed up; ``bad``: its excluded samples."""

    first: float
    last: float
    within: float
    samples: int
    resets: int
    bad: pd.DataFrame


def raw_counter_stats(samples: pd.DataFrame) -> RawCounter:
    """First and last valid value, increase inside the interval (resets handled), valid samples,
    resets, and the excluded samples (t, v, reason: not finite or negative) of raw samples."""
    ordered = samples.sort_values("t", kind="stable").drop_duplicates("t", keep="last")
    reason = counter_reasons(ordered["v"])
    bad = ordered.loc[reason != "", ["t", "v"]].assign(reason=reason[reason != ""])
    v = ordered["v"].to_numpy(dtype=float)[reason == ""]
    if not len(v):
        return RawCounter(np.nan, np.nan, 0.0, 0, 0, bad)
    later, earlier = v[1:], v[:-1]
    within = float(np.where(later >= earlier, later - earlier, later).sum())
    return RawCounter(float(v[0]), float(v[-1]), within, len(v), int((later < earlier).sum()), bad)
