"""Per-interval tables from per-family samples: GPU activity, nodes, requests, serving, replicas.

Samples are binned on a ``Grid``; gauges are averaged per interval, counters differenced with
resets handled; kernel-activity and counter samples that are out of range, not finite or negative
are excluded and counted (``connectors.telemetry.validity``). ``TABLE_COLUMNS`` is the contract
of every table (columns and dtypes); the file connectors build their tables here, and the
Prometheus connector (``promtables``) reproduces the same rules from aggregates. Per-sample
label columns are plain strings or, from the OpenMetrics reader, Categoricals over sorted
vocabularies (``connectors.telemetry.distinct``): the same rows either way.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd

from connectors.telemetry.distinct import by_values, plain, plain_index
from connectors.telemetry.families import (
    COUNTERS,
    DCGM_EVIDENCE,
    GR_ENGINE_ACTIVE,
    QUEUE_GAUGES,
    REPLICA_GAUGES,
    mig_slice,
)
from connectors.telemetry.grid import Grid
from connectors.telemetry.phase_families import PHASE_COLUMNS
from connectors.telemetry.validity import (
    NOT_ON_MIG,
    UNMEASURED_COLUMNS,
    busy_reasons,
    counter_name,
    counter_reasons,
    excluded_table,
    finish_table,
    merge_excluded,
    no_resets,
    no_unmeasured,
    resets_table,
    unplaced_table,
)

TABLE_COLUMNS: dict[str, dict[str, str]] = {
    "gpu_activity": {
        "node": "str", "gpu": "str", "uuid": "str", "model_name": "str", "pod": "str",
        "namespace": "str", "container": "str", "ts": "datetime64[ns, UTC]",
        "step_seconds": "int64", "busy_fraction": "float64", "source": "str"},
    "node_info": {"node": "str", "provider_id": "str", "resource_id": "str",
                  "instance_type": "str"},
    "gpu_requests": {"ts": "datetime64[ns, UTC]", "namespace": "str", "pod": "str",
                     "node": "str", "gpus": "float64", "mig_profile": "str"},
    "scheduled_nodes": {"node": "str", "start": "datetime64[ns, UTC]", "end": "datetime64[ns, UTC]"},
    "traffic": {"ts": "datetime64[ns, UTC]", "model_name": "str", "namespace": "str",
                "pod": "str", "requests": "float64", "prompt_tokens": "float64",
                "generated_tokens": "float64", "family": "str"},
    "queue": {"ts": "datetime64[ns, UTC]", "model_name": "str", "namespace": "str",
              "pod": "str", "running": "float64", "waiting": "float64"},
    "serving_stats": {
        "ts": "datetime64[ns, UTC]", "family": "str", "model_name": "str", "namespace": "str",
        "pod": "str", "requests": "float64", "failures": "float64", "received": "float64",
        "queue_seconds": "float64", "queue_requests": "float64",
        "queue_seconds_per_request": "float64", "batch_items": "float64",
        "batch_steps": "float64", "batch_size": "float64", "tokens_per_step": "float64",
        "running": "float64", "waiting": "float64", "compute_input_seconds": "float64",
        "compute_infer_seconds": "float64", "compute_output_seconds": "float64",
        "prefix_queries": "float64", "prefix_hits": "float64", "prefix_hit_rate": "float64",
        "kv_cache_usage": "float64", **dict.fromkeys(PHASE_COLUMNS, "float64")},
    "gpu_evidence": {
        "node": "str", "gpu": "str", "uuid": "str", "ts": "datetime64[ns, UTC]",
        "sm_active": "float64", "tensor_active": "float64", "dram_active": "float64",
        "fb_used_mib": "float64", "power_watts": "float64"},
    "replicas": {
        "ts": "datetime64[ns, UTC]", "namespace": "str", "kind": "str", "name": "str",
        "spec_replicas": "float64", "available_replicas": "float64",
        "current_replicas": "float64", "desired_replicas": "float64",
        "min_replicas": "float64", "max_replicas": "float64"},
}


def empty_table(name: str) -> pd.DataFrame:
    """A table with no rows and the contract's columns and dtypes."""
    return pd.DataFrame({c: pd.Series([], dtype=d) for c, d in TABLE_COLUMNS[name].items()})


def finish(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """Select and type the contract's columns, in order, with a fresh index."""
    if frame.empty:
        return empty_table(name)
    columns = TABLE_COLUMNS[name]
    out = frame[list(columns)].reset_index(drop=True)
    return out.astype({c: d for c, d in columns.items() if c != "ts"})


def most_frequent(frame: pd.DataFrame, keys: list[str], column: str,
                  carried: tuple[str, ...] = ()) -> pd.DataFrame:
    """Per ``keys``, the most frequent non-empty ``column`` (ties: latest seen, then smallest).

    ``carried`` columns come from the latest sample holding the chosen value.
    """
    named = frame.loc[frame[column] != ""].sort_values("t", kind="stable", na_position="first")
    aggs = {"n": ("v", "size"), "last": ("t", "max")}
    aggs.update({c: (c, "last") for c in carried})
    counts = named.groupby(keys + [column], sort=False).agg(**aggs).reset_index()
    return pick_most_frequent(counts, keys, column, carried)


def pick_most_frequent(counts: pd.DataFrame, keys: list[str], column: str, carried=()):
    """Per ``keys``, the ``column`` of the row with the largest ``n`` (then ``last``, then the
    smallest value), from rows of ``keys``, ``column``, ``n``, ``last`` and ``carried``."""
    counts = counts.sort_values(["n", "last", column], ascending=[False, False, True],
                                kind="stable", na_position="last")
    return counts.drop_duplicates(keys)[keys + [column, *carried]]


GPU_KEY = ["node", "gpu", "uuid"]


class Busy(NamedTuple):
    """The ``gpu_activity`` table and what its valid samples left out (connectors.telemetry.validity)."""

    activity: pd.DataFrame
    excluded: pd.DataFrame
    unmeasured: pd.DataFrame


def prefer_engine_active(frame: pd.DataFrame) -> pd.DataFrame:
    """Per GPU: GR_ENGINE_ACTIVE samples when it has any in the window (valid or not), else GPU_UTIL."""
    is_gr = frame["metric"] == GR_ENGINE_ACTIVE
    has_gr = is_gr.groupby([frame[c] for c in GPU_KEY]).transform("any")
    return frame.loc[is_gr == has_gr]


def busy_samples(dcgm: pd.DataFrame, grid: Grid) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The preferred metric's samples of each GPU in the window: valid ones as fractions (GPU_UTIL
    / 100), the excluded ones with their ``reason`` (out of range, not finite), and the samples
    of series with no GPU label (gpu, UUID), which no GPU can take."""
    frame = grid.window(dcgm)
    placed = (frame["gpu"] != "") | (frame["uuid"] != "")
    unplaced = frame.loc[~placed]
    frame = prefer_engine_active(frame.loc[placed])
    reason = mig_reasons(frame, busy_reasons(frame["metric"], frame["v"]))
    ok = reason == ""
    valid = frame.loc[ok]
    scale = np.where(valid["metric"] == GR_ENGINE_ACTIVE, 1.0, 0.01)
    return valid.assign(v=valid["v"] * scale), frame.loc[~ok].assign(reason=reason[~ok]), unplaced


def is_mig_unit(uuid: pd.Series) -> np.ndarray:
    """Per row: whether the GPU unit is a MIG instance (connectors.telemetry.families.unit_uuid)."""
    return by_values(lambda u: mig_slice(u) is not None, uuid).astype(bool)


def mig_reasons(frame: pd.DataFrame, reason: np.ndarray) -> np.ndarray:
    """GPU_UTIL samples of a MIG instance are excluded (METHOD §3: the profiling metrics only)."""
    util = (frame["metric"] != GR_ENGINE_ACTIVE).to_numpy() & is_mig_unit(frame["uuid"])
    return np.where(util & (reason == ""), NOT_ON_MIG, reason).astype(object)


def time_shared(frame: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Per GPU-interval (``keys``): whether several pods held it at once (time-slicing, virtual
    GPUs): two pods' series of the GPU have a sample at the same time. A pod handing the GPU to
    the next one within the interval is not sharing."""
    named = frame.loc[frame["pod"] != "", keys + ["t", "namespace", "pod"]]
    if named.empty:
        return pd.Series(False, index=pd.MultiIndex.from_arrays([[]] * len(keys), names=keys))
    per_time = named.drop_duplicates().groupby(keys + ["t"], sort=False).size()
    return (per_time > 1).groupby(level=keys).any()


def shared_activity(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per pod of each time-shared GPU-interval: the mean of that pod's own samples."""
    pod_keys = keys + ["namespace", "pod"]
    named = frame.loc[frame["pod"] != ""]
    return plain(named.groupby(pod_keys, sort=True).agg(
        busy_fraction=("v", "mean"), source=("metric", "first"),
        container=("container", "last")).reset_index())


def unmeasured_intervals(bad: pd.DataFrame, valid_keys: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """GPU-intervals that had kernel-activity samples, every one of them excluded."""
    if bad.empty:
        return no_unmeasured()
    keys = GPU_KEY + ["k"]
    out = bad.drop_duplicates(keys)[keys + ["metric"]]
    out = out.merge(valid_keys[keys].drop_duplicates(), on=keys, how="left", indicator=True)
    out = out.loc[out["_merge"] == "left_only"].sort_values(keys, kind="stable")
    return finish_table(out.assign(ts=grid.stamps(out["k"])), UNMEASURED_COLUMNS)


def gpu_activity(dcgm: pd.DataFrame, grid: Grid) -> Busy:
    """Mean kernel-active fraction per GPU and interval over its valid samples, with the pod that
    held the GPU; excluded samples counted, and the GPU-intervals they leave unmeasured."""
    frame, bad, unplaced = busy_samples(dcgm, grid)
    unmeasured = unmeasured_intervals(bad, frame, grid)
    if frame.empty:
        return placed_busy(empty_table("gpu_activity"), bad, unplaced, unmeasured)
    keys = GPU_KEY + ["k"]
    shared = time_shared(frame, keys)
    shared = shared[shared]
    is_shared = frame.set_index(keys).index.isin(shared.index) if len(shared) else np.zeros(len(frame), bool)
    single = frame.loc[~is_shared]
    busy = plain(single.groupby(keys, sort=True).agg(busy_fraction=("v", "mean"),
                                                     source=("metric", "first")).reset_index())
    busy = busy.merge(plain(most_frequent(single, keys, "pod", ("namespace", "container"))),
                      on=keys, how="left")
    if is_shared.any():
        busy = pd.concat([busy, shared_activity(frame.loc[is_shared], keys)], ignore_index=True)
        busy = busy.sort_values(keys + ["namespace", "pod"], kind="stable", na_position="first")
    models = plain(most_frequent(frame, GPU_KEY, "model_name"))
    return placed_busy(activity_table(busy, models, grid), bad, unplaced, unmeasured)


def placed_busy(activity: pd.DataFrame, bad: pd.DataFrame, unplaced: pd.DataFrame,
                unmeasured: pd.DataFrame) -> Busy:
    """``Busy`` with the excluded samples: the invalid ones (``bad``) and those of series with no
    GPU label (``unplaced``: metric, t, v)."""
    return with_unplaced(Busy(activity, excluded_table(bad), unmeasured), unplaced)


def with_unplaced(busy: Busy, unplaced: pd.DataFrame) -> Busy:
    """``busy`` with DCGM samples of series with no GPU label (metric, t, v) counted among its
    excluded samples, GR_ENGINE_ACTIVE's naming the metric busy_fraction fell back to."""
    excluded = merge_excluded(busy.excluded, unplaced_table(unplaced, busy.activity))
    return busy._replace(excluded=excluded)


def activity_table(busy: pd.DataFrame, models: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """``gpu_activity`` from the GPU-interval (and pod) means with their pods, and GPU models."""
    out = busy.merge(models, on=GPU_KEY, how="left")
    out[["pod", "namespace", "container", "model_name"]] = (
        out[["pod", "namespace", "container", "model_name"]].fillna(""))
    out["busy_fraction"] = out["busy_fraction"].clip(0.0, 1.0)  # float rounding only: samples are in range
    out["ts"] = grid.stamps(out["k"])
    out["step_seconds"] = grid.step
    return finish("gpu_activity", out)


def quality_tables(busy: Busy, counted: Sequence[Counted] = ()) -> dict[str, pd.DataFrame]:
    """The data-quality tables of a source: excluded samples (kernel activity and counters),
    counter resets, and the GPU-intervals left unmeasured by exclusions."""
    excluded = merge_excluded(busy.excluded, *(c.excluded for c in counted))
    resets = [c.resets for c in counted if len(c.resets)]
    reset_table = (resets_table(pd.concat(resets)["metric"], pd.concat(resets)["resets"])
                   if resets else no_resets())
    return {"excluded_samples": excluded, "counter_resets": reset_table,
            "unmeasured_intervals": busy.unmeasured}


def resource_id(provider_id: str) -> str:
    """The billing resource id inside a Kubernetes provider id."""
    scheme, sep, rest = provider_id.partition("://")
    if not sep:
        return provider_id
    if scheme in ("aws", "gce"):
        return rest.rstrip("/").rsplit("/", 1)[-1] or provider_id
    if scheme == "azure":
        path = rest.lower()
        found = re.match(r"(/subscriptions/.+?/virtualmachinescalesets/[^/]+)/virtualmachines/",
                         path)
        return found.group(1) if found else path.rstrip("/")
    return provider_id


def node_info(info: pd.DataFrame, node_labels: pd.DataFrame) -> pd.DataFrame:
    """One row per node: provider id, resource id, instance type (kube_node_labels fallback)."""
    nodes = _latest_per_node(info)
    if nodes.empty:
        return empty_table("node_info")
    extra = _latest_per_node(node_labels)[["node", "instance_type"]]
    nodes = nodes.merge(extra, on="node", how="left", suffixes=("", "_labels"))
    missing = nodes["instance_type"] == ""
    nodes.loc[missing, "instance_type"] = nodes.loc[missing, "instance_type_labels"].fillna("")
    nodes["resource_id"] = nodes["provider_id"].map(resource_id)
    return finish("node_info", nodes.sort_values("node"))


def _latest_per_node(frame: pd.DataFrame) -> pd.DataFrame:
    """Per node, the latest non-empty provider id and instance type (no timestamp = oldest)."""
    frame = frame.loc[frame["node"] != ""].sort_values("t", kind="stable", na_position="first")
    columns = ["provider_id", "instance_type"]
    values = frame[columns].where(frame[columns] != "")
    latest = values.groupby(frame["node"]).last().fillna("")
    return latest.reset_index().astype("str")


def pod_nodes(pod_info: pd.DataFrame, grid: Grid) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The node of each pod per interval, and over the whole file (for intervals without one)."""
    per_interval = most_frequent(grid.gauges(pod_info), ["namespace", "pod", "k"], "node")
    overall = most_frequent(pod_info, ["namespace", "pod"], "node")
    return per_interval, overall


def gpu_requests(requests: pd.DataFrame, pod_info: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """GPUs requested per pod and interval: container interval means summed, node filled in, each
    times the share of the interval's scrapes it was present in (``requests_table``)."""
    frame = grid.gauges(requests)
    if frame.empty:
        return empty_table("gpu_requests")
    counts = frame.groupby(["k", "sid"]).size().rename("n").reset_index()
    frame = with_pod_nodes(frame.merge(counts, on=["k", "sid"]), *pod_nodes(pod_info, grid))
    grouped = frame.groupby(REQUEST_KEY)
    return requests_table(plain_index(grouped.v.mean()), plain_index(grouped.n.max()),
                          counts.groupby("k").n.max(), grid)


REQUEST_KEY = ["k", "namespace", "pod", "container", "node", "mig_profile"]


def with_pod_nodes(frame: pd.DataFrame, per_interval: pd.DataFrame, overall: pd.DataFrame):
    """Request rows with an empty node filled in: the pod's node in the interval, else overall."""
    frame = frame.merge(per_interval.rename(columns={"node": "node_k"}),
                        on=["namespace", "pod", "k"], how="left")
    frame = frame.merge(overall.rename(columns={"node": "node_all"}),
                        on=["namespace", "pod"], how="left")
    fill = frame["node_k"].fillna(frame["node_all"]).fillna("")
    frame["node"] = frame["node"].where(frame["node"] != "", fill)
    return frame


def requests_table(means: pd.Series, present: pd.Series, scrapes: pd.Series,
                   grid: Grid) -> pd.DataFrame:
    """The ``gpu_requests`` table from the container means per ``REQUEST_KEY``, each times its
    share of the interval: ``present`` (per ``REQUEST_KEY``, the most samples one of its series
    has in the interval) ÷ ``scrapes`` (per k, the most samples any GPU-request series has in it:
    kube-state-metrics' scrapes of the interval). A pod gone for half the interval's scrapes holds
    half its GPUs for it (METHOD §3); a scrape the exporter missed lowers both, so it is no 0."""
    share = present.to_numpy() / scrapes.reindex(present.index.get_level_values("k")).to_numpy()
    out = (means * share).groupby(level=["k", "namespace", "pod", "node", "mig_profile"]).sum().rename("gpus")
    out = out.reset_index()
    out["ts"] = grid.stamps(out["k"])
    return finish("gpu_requests", out)


SERVING_KEY = ["k", "model_name", "namespace", "pod"]


class Counted(NamedTuple):
    """Per-series counter increases, and the samples and resets behind them."""

    increases: pd.DataFrame
    excluded: pd.DataFrame
    resets: pd.DataFrame


def counter_increases(counters: pd.DataFrame, grid: Grid) -> Counted:
    """Increase between consecutive valid samples of each series, at the interval of the earlier one.

    Samples in [start, end] that are not finite or negative are excluded and counted; a decrease
    between valid samples is a restart from 0 (its increase is the later value), counted as a reset.
    """
    t = counters["t"]
    frame = counters.loc[(t >= grid.start) & (t <= grid.end)]
    reason = counter_reasons(frame["v"])
    ok = reason == ""
    bad = frame.loc[~ok]
    bad = bad.assign(metric=counter_name(bad["family"], bad["metric"]), reason=reason[~ok])
    frame = frame.loc[ok]
    frame = frame.iloc[np.lexsort((frame["t"].to_numpy(), frame["sid"].to_numpy()))]
    frame = frame.drop_duplicates(["sid", "t"], keep="last")
    sid, t, v = (frame[c].to_numpy() for c in ("sid", "t", "v"))
    same = np.zeros(len(sid), dtype=bool)
    same[1:] = sid[1:] == sid[:-1]
    later, earlier = v[1:][same[1:]], v[:-1][same[1:]]
    dropped = later < earlier
    increase = np.where(dropped, later, later - earlier)  # a drop: restarted from 0
    k = grid.index(t[:-1][same[1:]])
    pairs = frame.loc[same]
    # resets are whole numbers: counted per series, then named once per series
    runs = np.flatnonzero(np.diff(sid[same], prepend=-1) != 0) if len(pairs) else np.zeros(0, int)
    drops = np.add.reduceat(dropped.astype(np.int64), runs) if len(runs) else np.zeros(0, int)
    named = pairs.iloc[runs]
    return Counted(pairs.assign(increase=increase, k=k), excluded_table(bad),
                   resets_table(counter_name(named["family"], named["metric"]), drops))


def traffic_from_increases(increases: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """The traffic table from per-series increases (metric, family, serving labels, k, increase).

    Rows of every serving family (vLLM, Triton, TGI) that counts requests or tokens; ``family``
    says which. Other serving counters (queue time, batches) are left to ``serving_stats``.
    A token count no series of the row's pod and interval measured (Triton counts none; a TGI or
    vLLM export without its token series) is NaN, "not measured", never 0: a token series that
    counted nothing is 0. So is a request count where the pod has token series and no request
    series in that interval (an export without ``request_success``): not measured, not 0 requests.
    """
    if increases.empty:
        return empty_table("traffic")
    increases = increases.loc[increases["metric"].isin(list(COUNTERS.values()))]
    if increases.empty:
        return empty_table("traffic")
    sums = plain_index(increases.groupby(SERVING_KEY + ["family", "metric"]).increase.sum())
    return per_interval_table("traffic", sums, COUNTERS.values(), grid, unmeasured=("requests", *TOKEN_COLUMNS))


#: traffic columns a request counter does not give: NaN where no token series measured them
TOKEN_COLUMNS = ("prompt_tokens", "generated_tokens")


def per_interval_table(name: str, sums: pd.Series, columns, grid: Grid,
                       unmeasured: Sequence[str] = ()) -> pd.DataFrame:
    """One column per metric, interval starts as ``ts``, finished as table ``name``. A cell no
    series gave is 0, or NaN (not measured) in the ``unmeasured`` columns."""
    out = sums.unstack("metric").reset_index()
    for column in columns:
        if column not in out:
            out[column] = np.nan
        if column not in unmeasured:
            out[column] = out[column].fillna(0.0)
    out["ts"] = grid.stamps(out["k"])
    return finish(name, out)


def queue(means: pd.Series, grid: Grid) -> pd.DataFrame:
    """Mean running and waiting requests per interval and pod (summed over vLLM engines), from
    the interval means per series key (index ``SERVING_KEY`` + engine, metric)."""
    if not len(means):
        return empty_table("queue")
    sums = means.groupby(level=SERVING_KEY + ["metric"]).sum()
    return per_interval_table("queue", sums, QUEUE_GAUGES.values(), grid)


# ---- GPU evidence, replicas: built from per-key means, so that the file connectors (sample
# ---- means) and Prometheus (pooled sums / counts) share them

def gpu_evidence(means: pd.Series, grid: Grid) -> pd.DataFrame:
    """DCGM evidence columns per GPU and interval (means indexed by metric, node, gpu, uuid, k).

    Evidence only: busy_fraction (gpu_activity) alone moves money.
    """
    if not len(means):
        return empty_table("gpu_evidence")
    frame = means.rename("v").reset_index()
    frame = frame.loc[(frame["gpu"] != "") | (frame["uuid"] != "")]
    if frame.empty:
        return empty_table("gpu_evidence")
    out = frame.pivot_table(index=GPU_KEY + ["k"], columns="metric", values="v",
                            aggfunc="sum").reset_index()
    out.columns.name = None
    for column in DCGM_EVIDENCE.values():
        if column not in out:
            out[column] = np.nan
    out["ts"] = grid.stamps(out["k"])
    return finish("gpu_evidence", out.sort_values(GPU_KEY + ["k"], kind="stable"))


def replicas(means: pd.Series, grid: Grid) -> pd.DataFrame:
    """Replica counts per deployment / HPA and interval (means indexed by metric, kind,
    namespace, name, k); available falls back to status.replicas where a ksm lacks it."""
    if not len(means):
        return empty_table("replicas")
    frame = means.rename("v").reset_index()
    frame = frame.loc[frame["name"] != ""]
    if frame.empty:
        return empty_table("replicas")
    key = ["kind", "namespace", "name", "k"]
    out = frame.pivot_table(index=key, columns="metric", values="v", aggfunc="sum").reset_index()
    out.columns.name = None
    for column in [c for _, c in REPLICA_GAUGES.values()]:
        if column not in out:
            out[column] = np.nan
    out["available_replicas"] = out["available_replicas"].fillna(out["status_replicas"])
    out["ts"] = grid.stamps(out["k"])
    return finish("replicas", out.sort_values(key, kind="stable"))


def covered(frames: list[pd.DataFrame], grid: Grid) -> tuple[datetime | None, datetime | None]:
    """First and last sample time within [start, end] of the families used."""
    times = [f["t"].to_numpy() for f in frames if len(f)]
    t = np.concatenate(times) if times else np.empty(0)
    t = t[(t >= grid.start) & (t <= grid.end)]
    if not len(t):
        return (None, None)
    # whole microseconds: a datetime holds no nanoseconds (fractional-second timestamps)
    first, last = (pd.Timestamp(int(round(x * 1_000_000)) * 1000, tz="UTC") for x in (t.min(), t.max()))
    return (first.to_pydatetime(), last.to_pydatetime())
