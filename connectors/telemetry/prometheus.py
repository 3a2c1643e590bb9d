"""Prometheus HTTP API → the tables of the OpenMetrics connector, aggregated by the server.

A ``[[telemetry]]`` source with ``format = "prometheus"`` and ``url = "https://host:9090"`` is
queried in place. The same API is served by Thanos Query (``http://thanos-query:9090``), Grafana
Mimir (``https://mimir.example/prometheus``: the ``/prometheus`` prefix belongs in the url; set
``COSTAUDIT_PROMETHEUS_ORG_ID`` for the tenant) and VictoriaMetrics (``http://vm:8428``, or
``…/select/0/prometheus`` on a cluster). Credentials and TLS: see ``connectors.telemetry.promhttp``.

The result equals what ``connectors.telemetry.openmetrics`` builds from the same samples as a file, but only
aggregates cross the network (see ``connectors.telemetry.promquery`` for how each interval is covered):

- gauges (DCGM activity, GPU requests, vLLM queue) as ``sum_over_time`` and ``count_over_time``
  summed by the labels the tables use, so that interval means pool samples exactly as the file
  connector does; ``DCGM_FI_DEV_GPU_UTIL`` is read only for GPUs without GR_ENGINE_ACTIVE;
- counters (vLLM requests and tokens) per series as ``last_over_time`` and ``min_over_time`` (the
  first value when ``resets`` is 0), differenced here with resets handled and each increase put
  in the interval of the earlier sample; never ``increase()`` or ``rate()``, which extrapolate;
- node and pod metadata as ``group by`` presence per interval;
- the evidence families (Triton / TGI / vLLM serving gauges, DCGM SM / tensor / DRAM / frame
  buffer / power, kube-state-metrics deployment and HPA replicas) as sums and counts like the
  gauges above, and the Triton / TGI / vLLM-extra counters (histogram ``_sum`` / ``_count``
  included) like the vLLM counters; each label set is described by the file connector's own
  function, so that both connectors key rows alike.

Ties that only sample times can break, and intervals holding a counter reset, are settled with the raw samples
of that one interval. Differences from the file connector: metadata samples outside the window are not read (the
file connector reads node and pod labels from the whole file), and ``covered`` is given to the interval, not to the sample.
"""
from __future__ import annotations

import json
import re
from datetime import datetime
from typing import ClassVar

import numpy as np
import pandas as pd

from connectors.base import Connector
from connectors.errors import InputError
from connectors.telemetry import promsettle as ps
from connectors.telemetry import promtables as pt
from connectors.telemetry.distinct import by_values
from connectors.telemetry.families import (
    DCGM_EVIDENCE,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    QUEUE_GAUGES,
    REPLICA_GAUGES,
    SERVING_COLUMNS,
    SERVING_GAUGES,
    mig_request_profile,
    mig_slice,
    new_families,
    unit_uuid,
)
from connectors.telemetry.grid import DEFAULT_STEP, Grid, utc_ns
from connectors.telemetry.openmetrics import OpenMetricsConnector, token_histograms
from connectors.telemetry.prom_span import held_elsewhere
from connectors.telemetry.promhttp import PromClient
from connectors.telemetry.promqueries import (
    COUNTER_NAMES,
    DCGM_BY,
    EVIDENCE_BY,
    NODE_BY,
    NODE_INFO,
    NODE_LABELS,
    POD_BY,
    POD_INFO,
    REPLICA_BY,
    REQUEST_BY,
    REQUEST_SELECTORS,
    SERVER_BY,
    SERVER_COUNTER_NAMES,
    SERVING_BY,
    WANTED,
    counter_points,
    dcgm_query,
    planned,
    presence_query,
    request_query,
    sum_count,
)
from connectors.telemetry.promquery import (
    MAX_POINTS,
    Progress,
    Puller,
    Window,
    chunks,
    matchers,
    probe_left_open,
    promql_string,
    seconds_text,
    source_step,
)
from connectors.telemetry.serving_stats import serving_stats
from connectors.telemetry.tables import (
    Busy,
    Counted,
    gpu_evidence,
    is_mig_unit,
    quality_tables,
    replicas,
)
from connectors.telemetry.validity import (
    counter_name,
    counter_reasons,
    excluded_table,
    merge_excluded,
    resets_table,
    unlabelled_table,
)

#: describe functions of the file connector, by sample name: the same metadata from both
_ROLES, _BY_NAME = new_families()
COUNTER_DESCRIBE = {name: _BY_NAME[name].describe for name in COUNTER_NAMES + SERVER_COUNTER_NAMES}
#: table columns from DCGM labels, and the pod columns (which prefer exported_<label>)
DCGM_PLAIN = {"node": "Hostname", "gpu": "gpu", "uuid": "UUID", "model_name": "modelName"}
POD_LABELS = {"pod": "pod", "namespace": "namespace", "container": "container"}
def gpu_units(frame: pd.DataFrame) -> pd.DataFrame:
    """``UUID`` as the GPU unit's identifier: a MIG instance's carries GPU_I_ID / GPU_I_PROFILE."""
    if "GPU_I_ID" not in frame or frame.empty:
        return frame
    out = frame.copy()
    blank = pd.Series("", index=out.index)
    parts = [out.get(c, blank).fillna("").astype(str) for c in ("UUID", "GPU_I_ID", "GPU_I_PROFILE")]
    codes, distinct = pd.MultiIndex.from_arrays(parts).factorize()  # unit_uuid once per label triple
    units = [unit_uuid({"UUID": u, "GPU_I_ID": i, "GPU_I_PROFILE": p}) for u, i, p in distinct]
    out["UUID"] = pd.array(units, dtype="str").take(codes)
    return out


def unit_matchers(gpu: tuple[str, str, str]) -> dict[str, str]:
    """Label matchers of one GPU unit (node, gpu, unit uuid)."""
    found = mig_slice(gpu[2])
    if found is None:
        return {"Hostname": gpu[0], "gpu": gpu[1], "UUID": gpu[2], "GPU_I_ID": ""}
    return {"Hostname": gpu[0], "gpu": gpu[1], "UUID": found[0], "GPU_I_ID": found[1],
            "GPU_I_PROFILE": gpu[2].rsplit("/", 2)[2]}


def labelled(frame: pd.DataFrame, plain: dict[str, str], exported: dict[str, str]) -> pd.DataFrame:
    """Table columns from label columns; ``exported`` ones prefer ``exported_<label>``."""
    out = frame.copy()
    blank = pd.Series("", index=frame.index, dtype="str")
    for column, source in plain.items():
        out[column] = frame[source] if source in frame else blank
    for column, source in exported.items():
        value = frame[source] if source in frame else blank
        other = frame.get("exported_" + source)
        out[column] = value if other is None else other.where(other != "", value)
    return out


class PrometheusConnector(Connector):
    """Queries a Prometheus-compatible HTTP API in place (``url``)."""

    format_name: ClassVar[str] = "prometheus"
    kind: ClassVar[str] = "telemetry"
    schemas: ClassVar[dict] = OpenMetricsConnector.schemas
    #: the longest span one range query covers (a server timing out halves it further)
    chunk_seconds: ClassVar[int] = 7 * 86400
    max_points: ClassVar[int] = MAX_POINTS

    step_seconds: int | None = None
    untimestamped: int = 0

    def __repr__(self) -> str:
        """Name and url only: options may carry secrets."""
        return f"PrometheusConnector({self.spec.name!r}, {self.spec.where!r})"

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Pull every family's aggregates, then build the tables."""
        url = self.spec.options.get("url")
        if not url:
            raise InputError(self.spec.where, "a prometheus source needs a url", column="url",
                             expected="url = \"http://host:9090\"")
        self.client = client = PromClient(str(url), self.spec.options)
        progress = Progress(f"prometheus {self.spec.name}")
        try:
            self.puller = self._puller(client, progress)
            tables = self._tables()
        finally:
            progress.close()
            client.close()
        return tables, self.puller.points, self._covered

    def fingerprint(self) -> str:
        """sha256 of the answers received, in the order asked (PromClient.gather)."""
        client = getattr(self, "client", None)
        return client.digest.hexdigest() if client is not None else ""

    # ----------------------------------------------------------------------------------------
    # Set-up
    # ----------------------------------------------------------------------------------------

    def _puller(self, client: PromClient, progress: Progress) -> Puller:
        """The grid (case step, else the source's), the server's range rule, the chunk plan."""
        start_ns, end_ns = utc_ns(self.ctx.start), utc_ns(self.ctx.end)
        if end_ns <= start_ns:
            raise InputError(self.spec.where, "the case window is empty", expected="start < end")
        start_ms, end_ms = start_ns // 10**6, end_ns // 10**6
        names = client.label_values("__name__", "{__name__=~%s}" % promql_string("|".join(
            WANTED)), seconds_text(start_ms), seconds_text(end_ms))
        self.names = [n for n in WANTED if n in names]
        if not self.names:
            raise InputError(self.spec.where, "no series the audit reads in the case window"
                             + held_elsewhere(client, WANTED, (start_ms, end_ms)),
                             expected="DCGM, kube-state-metrics or vLLM series (check the url, "
                             "the tenant and the window)")
        step = self.ctx.step_seconds or source_step(client, start_ms, end_ms, self.names)
        self.step_seconds = step = int(step or DEFAULT_STEP)
        self.grid = Grid(start_ns, end_ns, step)
        window = Window(start_ms, end_ms, step * 1000, probe_left_open(client, start_ms))
        return Puller(client, window, chunks(window, self.max_points, self.chunk_seconds),
                      progress, planned(self.names))

    def _tables(self) -> dict[str, pd.DataFrame]:
        """Every table, from the families the server holds."""
        self._seen: list[np.ndarray] = []
        info = self._presence(NODE_INFO)
        labels = self._presence(NODE_LABELS)
        increases = self._increases()
        queue_table = pt.queue(self._queue(), self.grid)
        activity = pt.gpu_activity(self._dcgm(), self.grid, self._raw_dcgm)
        evidence = self._gauge_means(DCGM_EVIDENCE, "dcgm_evidence", EVIDENCE_BY, "Hostname")  # after _dcgm
        unlabelled = unlabelled_table(self._unlabelled, activity, self._raw_unlabelled)  # counted, never dropped
        busy = Busy(activity, merge_excluded(excluded_table(self._busy_bad), unlabelled),
                    ps.unmeasured_rows(self._unmeasured, self.grid))
        return {
            "gpu_activity": activity,
            "node_info": pt.node_info(info, labels, self._raw_nodes(NODE_INFO),
                                      self._raw_nodes(NODE_LABELS)),
            "gpu_requests": self._gpu_requests(),
            "traffic": pt.traffic(increases, self.grid),
            "queue": queue_table,
            "serving_stats": serving_stats(
                increases, self._gauge_means(SERVING_GAUGES, "server_gauges", SERVER_BY, "pod"),
                queue_table, self.grid),
            "gpu_evidence": gpu_evidence(evidence, self.grid),
            "replicas": replicas(
                self._gauge_means(REPLICA_GAUGES, "replicas", REPLICA_BY, "namespace"), self.grid),
            "token_histograms": token_histograms(increases, self.grid),
            **quality_tables(busy, [self._counted]),
        }

    def _grid(self, template: str, by: list[str] | None, shard: str | None = None,
              selector: str = "") -> pd.DataFrame:
        """One templated query over the whole grid; remembers which intervals held data."""
        frame = self.puller.grid(template, by, shard, selector)
        self._seen.append(frame["k"].to_numpy())
        return frame

    @property
    def _covered(self) -> tuple[datetime | None, datetime | None]:
        """The first and last interval that held any sample, clipped to the window."""
        seen = np.concatenate(self._seen) if self._seen else np.empty(0)
        if not len(seen):
            return (None, None)
        window = self.puller.window
        first, last = window.lo(int(seen.min())), window.hi(int(seen.max()))
        return tuple(pd.Timestamp(ms, unit="ms", tz="UTC").to_pydatetime() for ms in (first, last))

    # ----------------------------------------------------------------------------------------
    # Families
    # ----------------------------------------------------------------------------------------

    def _dcgm(self) -> pd.DataFrame:
        """DCGM sums and counts: GR_ENGINE_ACTIVE, and GPU_UTIL for the GPUs lacking it."""
        parts, self._gr_gpus = [], set()
        if GR_ENGINE_ACTIVE in self.names:
            parts.append(self._dcgm_rows(GR_ENGINE_ACTIVE, ""))
            self._gr_gpus = set(parts[0][["node", "gpu", "uuid"]].drop_duplicates().itertuples(index=False, name=None))
        if GPU_UTIL in self.names:
            hosts = self._util_only_hosts()
            if hosts:
                pattern = "|".join(re.escape(h) for h in hosts)
                parts.append(self._dcgm_rows(GPU_UTIL, f"Hostname=~{promql_string(pattern)},"))
        parts = [p for p in parts if len(p)]
        rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[
            "node", "gpu", "uuid", "model_name", "pod", "namespace", "container", "metric", "k",
            "sum", "n", "dirty"])
        self._unlabelled = rows.loc[(rows["gpu"] == "") & (rows["uuid"] == ""), ["metric", "k", "n"]]
        rows = ps.preferred(rows)
        if len(rows):  # GPU_UTIL of a MIG instance: its raw samples are excluded (NOT_ON_MIG)
            util_on_mig = (rows["metric"] != GR_ENGINE_ACTIVE).to_numpy() & is_mig_unit(rows["uuid"])
            rows = rows.assign(dirty=rows["dirty"].to_numpy(dtype=bool) | util_on_mig)
        rows, self._busy_bad, self._unmeasured = ps.settle_busy(rows, self._raw_busy)
        return rows

    def _dcgm_rows(self, metric: str, restrict: str) -> pd.DataFrame:
        """Per GPU label set and interval: sum and count of one DCGM gauge, and whether a sample
        the busy rules exclude spoils them (``dirty``)."""
        frame = self._grid(dcgm_query(metric, restrict), DCGM_BY, "Hostname", f"{metric}{{{restrict.rstrip(',')}}}")
        rows = gpu_units(pt.busy_sums(frame, DCGM_BY))
        return labelled(rows, DCGM_PLAIN, POD_LABELS).assign(metric=metric)

    def _util_only_hosts(self) -> list[str]:
        """Hosts with a GPU that reports GPU_UTIL but never GR_ENGINE_ACTIVE in the window."""
        found = self.puller.spans(
            f"group by (Hostname, gpu, UUID, GPU_I_ID, GPU_I_PROFILE) (last_over_time({GPU_UTIL}[$R]))")
        found = gpu_units(found)
        keys = set(found[["Hostname", "gpu", "UUID"]].itertuples(index=False, name=None))
        return sorted({host for host, gpu, uuid in keys - self._gr_gpus
                       if gpu != "" or uuid != ""})

    def _raw_dcgm(self, key: dict, k: int) -> pd.DataFrame:
        """Valid raw samples of one GPU's preferred metric in interval k."""
        gpu = (key["node"], key["gpu"], key["uuid"])
        metric = GR_ENGINE_ACTIVE if gpu in self._gr_gpus else GPU_UTIL
        return ps.valid_only(self._raw_busy(metric, gpu, k), metric)

    def _raw_busy(self, metric: str, gpu: tuple[str, str, str], k: int) -> pd.DataFrame:
        """Every raw sample of one GPU's ``metric`` in interval k, in table columns."""
        selector = metric + "{" + matchers(unit_matchers(gpu)) + "}"
        return labelled(gpu_units(self.puller.raw(selector, k)), DCGM_PLAIN, POD_LABELS)

    def _raw_unlabelled(self, metric: str, k: int) -> pd.DataFrame:
        """The raw samples (t, v) in interval k of ``metric``'s series with neither gpu nor UUID."""
        return self.puller.raw(metric + "{" + matchers({"gpu": "", "UUID": ""}) + "}", k)

    def _presence(self, metric: str) -> pd.DataFrame:
        """Node metadata label sets present per interval (node, provider_id, instance_type, k)."""
        if metric not in self.names:
            return pd.DataFrame(columns=["node", "provider_id", "instance_type", "k"])
        frame = self._grid(presence_query(metric), NODE_BY, "node", metric)
        return _node_columns(frame)

    def _raw_nodes(self, metric: str):
        """A callback: raw samples of one node's metadata series in interval k."""
        def raw(key: dict, k: int) -> pd.DataFrame:
            """Series naming the node as node or exported_node."""
            parts = [self.puller.raw(f"{metric}{{{name}={promql_string(key['node'])}}}", k)
                     for name in ("node", "exported_node")]
            return _node_columns(pd.concat(parts, ignore_index=True))
        return raw

    def _gpu_requests(self) -> pd.DataFrame:
        """GPU requests per pod and interval; pod placement only when a series lacks the node."""
        frames = [self._grid(request_query(selector), REQUEST_BY, "namespace", name)
                  for name, selector in REQUEST_SELECTORS.items() if name in self.names]
        if not frames:
            return pt.gpu_requests(pd.DataFrame(), None, self.grid, None)
        frame = pd.concat(frames, ignore_index=True)
        rows = labelled(pt.request_sums(frame), {"resource": "resource"},
                        {c: c for c in ("namespace", "pod", "container", "node")})
        rows["mig_profile"] = by_values(lambda r: mig_request_profile(r) or "", rows["resource"])
        pods = None
        if (rows["node"] == "").any() and POD_INFO in self.names:
            template = f"sum by ({', '.join(POD_BY)}) (count_over_time({POD_INFO}{{$M}}[$R]))"
            placed = self._grid(template, POD_BY, "namespace", POD_INFO)
            pods = labelled(placed.rename(columns={"v": "n"}), {},
                            {c: c for c in ("namespace", "pod", "node")})
        return pt.gpu_requests(rows, pods, self.grid, self._raw_pods)

    def _raw_pods(self, key: dict, k: int) -> pd.DataFrame:
        """Raw kube_pod_info samples of one pod in interval k."""
        parts = [self.puller.raw(f"{POD_INFO}{{{name}={promql_string(key['pod'])}}}", k)
                 for name in ("pod", "exported_pod")]
        return labelled(pd.concat(parts, ignore_index=True), {},
                        {c: c for c in ("namespace", "pod", "node")})

    def _queue(self) -> pd.DataFrame:
        """vLLM running / waiting sums and counts per pod, engine and interval."""
        parts = []
        for name, column in QUEUE_GAUGES.items():
            if name in self.names:
                frame = self._grid(sum_count(f"{name}{{$M}}", SERVING_BY), SERVING_BY, "pod", name)
                rows = pt.sums_and_counts(frame, SERVING_BY)
                parts.append(labelled(rows, {"model_name": "model_name", "engine": "engine"},
                                      {"namespace": "namespace", "pod": "pod"}).assign(metric=column))
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def _gauge_means(self, names, role: str, by: list[str], shard: str) -> pd.Series:
        """Pooled interval means (Σ sum / Σ count) of gauges, keyed as the file connector keys
        them: each label set is described by the file connector's own describe function (DCGM
        evidence series with no GPU label counted into ``_unlabelled``)."""
        columns = list(_ROLES[role].columns)
        parts = []
        for name in names:
            if name not in self.names:
                continue
            frame = self._grid(sum_count(f"{name}{{$M}}", by), by, shard, name)
            rows = pt.sums_and_counts(frame, by)
            if rows.empty:
                continue
            rows = rows.assign(_combo=rows.groupby(by, sort=False).ngroup())
            combos = rows.drop_duplicates("_combo")
            describe = _BY_NAME[name].describe
            meta = pd.DataFrame([describe(name, {b: str(r[b]) for b in by})
                                 for _, r in combos.iterrows()], columns=columns)
            meta["_combo"] = combos["_combo"].to_numpy()
            parts.append(rows[["_combo", "k", "sum", "n"]].merge(meta, on="_combo"))
        if not parts:
            return pd.Series([], dtype=float)
        pooled = pd.concat(parts, ignore_index=True)
        if role == "dcgm_evidence":  # series with no GPU label: counted as the busy gauges' are, never dropped
            self._unlabelled = pd.concat([self._unlabelled, pt.unlabelled_evidence(pooled)], ignore_index=True)
        pooled = pooled.groupby(columns + ["k"])[["sum", "n"]].sum()
        return pooled["sum"] / pooled["n"]

    def _increases(self) -> pd.DataFrame:
        """Per-series counter increases of every serving counter name the server holds; their
        excluded samples and resets are kept in ``_counted``."""
        parts = [self._counter(name) for name in COUNTER_NAMES + SERVER_COUNTER_NAMES
                 if name in self.names]
        increases = [p for p, _ in parts if len(p)]
        bad = [b for _, b in parts if len(b)]
        out = pd.concat(increases, ignore_index=True) if increases else pd.DataFrame()
        resets = (resets_table(counter_name(out["family"], out["metric"]), out["resets"])
                  if len(out) else resets_table([], []))
        self._counted = Counted(out, excluded_table(pd.concat(bad, ignore_index=True))
                                if bad else excluded_table(pd.DataFrame()), resets)
        return out

    def _counter(self, name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        """One counter: first/last/resets per series and interval, settled and differenced; and
        its excluded samples (metric, t, v, reason)."""
        frame = self._grid(counter_points(name), None, "pod", name)
        if frame.empty:
            return frame, pd.DataFrame()
        wide = frame.pivot_table(index=["id", "k"], columns="costaudit_agg", values="v",
                                 aggfunc="first").reset_index()
        for column in ("last", "min", "resets", "single", "bad"):
            if column not in wide:
                wide[column] = np.nan
        settle = (wide["resets"].fillna(0) > 0) | wide["bad"].notna() | (wide["min"] < 0)
        wide = wide.loc[settle | (wide["last"].notna() & wide["min"].notna())].assign(
            _settle=settle)
        wide["first"], wide["within"] = wide["min"], wide["last"] - wide["min"]
        wide["count"] = np.where(wide["single"].notna(), 1, 2)
        wide["resets"] = 0
        metric = _report_name(name)
        bad = []
        for i in wide.index[wide["_settle"]]:
            raw = self._raw_counter(name, wide.at[i, "id"], int(wide.at[i, "k"]))
            wide.loc[i, ["first", "last", "within", "count", "resets"]] = [
                raw.first, raw.last, raw.within, raw.samples, raw.resets]
            bad.append(raw.bad.assign(metric=metric))
        wide = wide.loc[wide["count"] > 0]
        ends, end_bad = self._end_values(name)
        bad.append(end_bad.assign(metric=metric))
        meta = _series_meta(wide["id"], name)
        points = wide.merge(meta, on="id", how="left")
        return pt.counter_increases(points, ends), pd.concat(bad, ignore_index=True)

    def _raw_counter(self, name: str, series_id: str, k: int) -> pt.RawCounter:
        """First and last value, inner increase, samples, resets and excluded samples of one
        series in interval k, from raw."""
        labels = dict(json.loads(series_id))
        samples = self.puller.raw(f"{name}{{{matchers(labels)}}}", k)
        return pt.raw_counter_stats(samples.loc[samples["id"] == series_id])

    def _end_values(self, name: str) -> tuple[pd.Series, pd.DataFrame]:
        """Valid values of samples exactly at the window end (the file connector keeps them),
        and the excluded ones (t, v, reason)."""
        window = self.puller.window
        _, result = self.client.query(f"{name}[1ms]", seconds_text(window.end_ms))
        ends, bad = {}, []
        for series in result:
            labels = {k: v for k, v in (series.get("metric") or {}).items() if k != "__name__"}
            for t, v in series.get("values") or []:
                if round(float(t) * 1000) == window.end_ms:
                    reason = counter_reasons([float(v)])[0]
                    if reason:
                        bad.append((window.end_ms / 1000, float(v), reason))
                    else:
                        ends[json.dumps(sorted(labels.items()))] = float(v)
        self.puller.points += len(ends) + len(bad)
        return pd.Series(ends, dtype=float), pd.DataFrame(bad, columns=["t", "v", "reason"])


def _node_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """node (exported first), provider_id and instance_type (kubernetes.io label, beta fallback)."""
    out = labelled(frame, {"provider_id": "provider_id"}, {"node": "node"})
    new = frame.get("label_node_kubernetes_io_instance_type", pd.Series("", index=frame.index))
    beta = frame.get("label_beta_kubernetes_io_instance_type", pd.Series("", index=frame.index))
    out["instance_type"] = new.where(new != "", beta).astype("str")
    return out


def _report_name(name: str) -> str:
    """The counter a sample name's increases are reported under (as the file connector names it)."""
    meta = COUNTER_DESCRIBE[name](name, {})
    column, family = meta[:2] if meta else (name, "")
    return str(counter_name([family], [column])[0])


def _series_meta(ids: pd.Series, name: str) -> pd.DataFrame:
    """metric, family, model_name, namespace and pod of each counter series id, as the file
    connector describes the same series."""
    describe = COUNTER_DESCRIBE[name]
    columns = ["metric", "family", "model_name", "namespace", "pod"]
    rows = []
    for series_id in ids.unique():
        meta = describe(name, dict(json.loads(series_id)))
        rows.append({"id": series_id, **dict(zip(SERVING_COLUMNS, meta))})
    return pd.DataFrame(rows, columns=["id", *columns])
