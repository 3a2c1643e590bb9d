"""Stage: the evidence that explains the buckets without moving money (METHOD §3, §6).

:func:`gather` returns, per declared service, the serving figures of the window (queue, batching,
occupancy, prefix-cache, DCGM-activity and replica figures, each with its source or, unmeasured,
null and the reason), the measured figures that bear on each option, and per kernel profile its
top call paths, its top idle call paths (audit/trace/idle.py) and its findings, costed on the part
of the ledger they lie in. Each trace is the
one its profiles connector parsed (``ProfileSummary.trace``); a profile given without one is
parsed here, once, when its file exists.
"""
from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd

from audit.case import Case, Service
from audit.ledger import Ledger
from audit.normalised import ProfileSummary, Telemetry
from audit.result import Evidence, Figure, KernelFinding
from audit.services import service_of
from connectors.telemetry.distinct import by_values

if TYPE_CHECKING:
    from connectors.profiles.events import Trace

TOP_CALL_PATHS = 10  # call paths listed per profile in audit.json
OTHER_IDLE = "(every other idle call path)"

#: figure -> (table, the families/metrics that can measure it, per family)
EVIDENCE_METRICS = {
    "queue_seconds_per_request": {"vllm": "vllm:request_queue_time_seconds (V0: vllm:time_in_queue_requests)",
                                  "triton": "nv_inference_queue_duration_us / nv_inference_request_success+failure",
                                  "tgi": "tgi_request_queue_duration"},
    "batch_size": {"triton": "nv_inference_count / nv_inference_exec_count",
                   "tgi": "tgi_batch_current_size"},
    "tokens_per_step": {"vllm": "vllm:iteration_tokens_total"},
    "mean_running": {"vllm": "vllm:num_requests_running", "tgi": "tgi_batch_current_size"},
    "mean_waiting": {"vllm": "vllm:num_requests_waiting", "triton": "nv_inference_pending_request_count",
                     "tgi": "tgi_queue_size"},
    "prefix_cache_hit_rate": {"vllm": "vllm:prefix_cache_hits / vllm:prefix_cache_queries"
                                      " (V0: vllm:gpu_prefix_cache_hit_rate)"},
    "kv_cache_usage": {"vllm": "vllm:kv_cache_usage_perc (V0: vllm:gpu_cache_usage_perc)"},
    "failed_requests": {"triton": "nv_inference_request_failure", "tgi": "tgi_request_failure"},
    "compute_input_seconds_per_request": {"triton": "nv_inference_compute_input_duration_us"},
    "compute_infer_seconds_per_request": {"triton": "nv_inference_compute_infer_duration_us"},
    "compute_output_seconds_per_request": {"triton": "nv_inference_compute_output_duration_us"},
}
GPU_EVIDENCE = {"sm_active": "DCGM_FI_PROF_SM_ACTIVE", "tensor_active": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                "dram_active": "DCGM_FI_PROF_DRAM_ACTIVE", "fb_used_mib": "DCGM_FI_DEV_FB_USED",
                "power_watts": "DCGM_FI_DEV_POWER_USAGE"}
REPLICA_EVIDENCE = {"replicas_spec": ("deployment", "spec_replicas", "kube_deployment_spec_replicas"),
                    "replicas_available": ("deployment", "available_replicas",
                                           "kube_deployment_status_replicas_available (or _replicas)"),
                    "hpa_current": ("hpa", "current_replicas", "kube_horizontalpodautoscaler_status_current_replicas"),
                    "hpa_desired": ("hpa", "desired_replicas", "kube_horizontalpodautoscaler_status_desired_replicas"),
                    "hpa_min": ("hpa", "min_replicas", "kube_horizontalpodautoscaler_spec_min_replicas"),
                    "hpa_max": ("hpa", "max_replicas", "kube_horizontalpodautoscaler_spec_max_replicas")}


def gather(case: Case, tele: Telemetry, profiles: Mapping[str, ProfileSummary], ledger: Ledger) -> Evidence:
    """Serving figures per service, the figures that bear on each option, and the kernel evidence."""
    from audit.trace.analyse import kernel_evidence  # the trace analyzers (numpy, msgspec) load when it runs

    serving = serving_evidence(tele, case.services)
    call_paths: dict[str, tuple[Mapping[str, Any], ...]] = {}
    idle_paths: dict[str, tuple[Mapping[str, Any], ...]] = {}
    findings: list[KernelFinding] = []
    amounts = ledger.amounts()
    for service, profile in sorted(profiles.items()):
        if profile.rank_set is not None:
            from audit.trace.rankset import set_evidence, top_call_paths

            of_set = set_evidence(profile.rank_set)
            found, idle = of_set.findings, of_set.idle
            call_paths[service] = top_call_paths(of_set, TOP_CALL_PATHS)
        else:
            trace = _trace_of(profile)
            if trace is None:
                continue
            paths, found, idle = kernel_evidence([trace])
            call_paths[service] = tuple(row for group in paths for row in group["top"])[:TOP_CALL_PATHS]
        idle_paths[service] = _costed_idle(idle, service, amounts)
        findings += [_costed(finding, service, profile.name, amounts) for finding in found]
    return Evidence(serving, option_evidence(serving), call_paths, tuple(findings), idle_paths)


def _costed_idle(idle: Sequence[Mapping[str, Any]], service: str,
                 amounts: Mapping[tuple[str, str, str | None], Decimal]) -> tuple[dict[str, Any], ...]:
    """A profile's top idle call paths, each costed as the idle findings are: its idle as a share of
    the profile's idle (``share_of_part``: the GPU time serving_path.in_flight_idle stands for) × the
    service's in_flight_idle (unrounded; None unmeasured). ``share`` stays its share of the
    profile's GPU time. The idle the listed paths leave out is one last row, ``category`` "other",
    so that the rows partition the part's cost."""
    amount = amounts.get(("serving_path", "in_flight_idle", service))
    total = sum((Decimal(repr(v)) for group in idle for v in group["by_category_us"].values()), Decimal(0))
    rows = sorted((row for group in idle for row in group["top"]), key=lambda r: -r["idle_us"])[:TOP_CALL_PATHS]
    rest = total - sum((Decimal(repr(r["idle_us"])) for r in rows), Decimal(0))
    if rows and rest > Decimal("0.0005"):
        window = sum((Decimal(repr(group.get("window_us") or 0)) for group in idle), Decimal(0))
        rows.append({"callpath": OTHER_IDLE, "category": "other", "idle_us": float(round(rest, 3)), "gaps": None,
                     "share": f"{rest / window:.6f}" if window > 0 else None})
    out = []
    for row in rows:
        of_part = Decimal(repr(row["idle_us"])) / total if total > 0 else None
        out.append({**row, "share_of_part": None if of_part is None else f"{of_part:.6f}",
                    "cost": of_part * amount if amount is not None and of_part is not None else None})
    return tuple(out)


def _trace_of(profile: ProfileSummary) -> Trace | None:
    """The trace the connector parsed; else the profile's file, parsed here (None without a file)."""
    if profile.trace is not None:
        return profile.trace
    if Path(profile.path).is_file():
        from audit.trace.findings import load_profile

        return load_profile(Path(profile.path))
    return None  # a profile given in memory (tests) has no trace to read


def _costed(finding: Mapping[str, Any], service: str, profile: str,
            amounts: Mapping[tuple[str, str, str | None], Decimal]) -> KernelFinding:
    """A finding's cost: its share of the part it lies in (``share_of_part``: of the profile's idle
    for in_flight_idle, of its busy time for kernel_active) × that part's amount (unrounded)."""
    amount = amounts.get((finding["bucket"], finding["part"], service))
    share_of = Decimal(finding["share_of_part"]) if finding.get("share_of_part") else None
    cost = share_of * amount if amount is not None and share_of is not None else None
    return KernelFinding(service, profile, finding, cost)


def _figure(value, source, reason=None) -> dict[str, str | None]:
    """One evidence figure: a 6-place decimal string with its source, or null with the reason."""
    if value is None or not math.isfinite(float(value)):
        return {"value": None, "source": source or None, "reason": reason}
    return {"value": f"{float(value):.6f}", "source": source, "reason": None}


def _unmeasured(figure: str, table, column: str, metrics: str) -> dict:
    """Not measured: no such family in the sources, or none of its series matched the service."""
    present = column in table and table[column].notna().any()
    why = (f"no series of {metrics} matched this service" if present
           else f"no such family in the sources ({metrics})")
    return _figure(None, None, why)


def _of_service(frame: pd.DataFrame, services: Mapping[str, Service],
                columns=("namespace", "pod", "model_name", "container")) -> pd.DataFrame:
    """The frame with a ``service`` column (rows that match no service dropped)."""
    if frame.empty:
        return frame.assign(service=[])
    keys = [c for c in columns if c in frame]

    def match(*row) -> str | None:
        labels = {"namespace": "", "pod": "", "model_name": "", "container": "", **dict(zip(keys, map(str, row)))}
        return service_of(labels, services, {})

    out = frame.assign(service=by_values(match, *(frame[k] for k in keys)) if keys else [match()] * len(frame))
    return out.loc[out["service"].notna()]


def _provenance(rows, column: str, metrics: dict) -> str:
    """"<metric> (<source>)" of the rows that measured ``column``."""
    used = rows.loc[rows[column].notna()]
    return "; ".join(sorted({f"{metrics.get(f, f)} ({src})" for f, src in zip(used["family"], used["source"])}))


def _serving_figures(rows, table) -> dict:
    """The serving-server figures of one service's serving_stats rows."""
    m = EVIDENCE_METRICS
    out = {}

    def ratio(num, den, name, column):
        both = rows.loc[rows[num].notna() & rows[den].notna()]
        if both.empty:
            return _unmeasured(name, table, column, ", ".join(m[name].values()))
        total = float(both[den].sum())
        source = _provenance(both, num, m[name])
        if total <= 0:
            return _figure(None, source, f"no {den.replace('_', ' ')} in the window")
        return _figure(float(both[num].sum()) / total, source)

    def mean(column, name):
        used = rows.loc[rows[column].notna()]
        if used.empty:
            return _unmeasured(name, table, column, ", ".join(m[name].values()))
        return _figure(float(used[column].mean()), _provenance(used, column, m[name]))

    out["queue_seconds_per_request"] = ratio("queue_seconds", "queue_requests", "queue_seconds_per_request",
                                             "queue_seconds")
    triton = rows.loc[rows["family"] == "triton"]
    if triton["batch_items"].notna().any() and triton["batch_steps"].notna().any():
        out["batch_size"] = _ratio_rows(triton, "batch_items", "batch_steps", m["batch_size"])
    else:
        out["batch_size"] = mean("batch_size", "batch_size")
    vllm = rows.loc[rows["family"] == "vllm"]
    out["tokens_per_step"] = (_ratio_rows(vllm, "batch_items", "batch_steps", m["tokens_per_step"])
                              if (vllm["batch_items"].notna() & vllm["batch_steps"].notna()).any()
                              else _unmeasured("tokens_per_step", table, "tokens_per_step",
                                               m["tokens_per_step"]["vllm"]))
    out["mean_running"] = mean("running", "mean_running")
    out["mean_waiting"] = mean("waiting", "mean_waiting")
    if (rows["prefix_queries"].notna() & rows["prefix_hits"].notna()).any():
        out["prefix_cache_hit_rate"] = ratio("prefix_hits", "prefix_queries", "prefix_cache_hit_rate",
                                             "prefix_hit_rate")
    else:
        out["prefix_cache_hit_rate"] = mean("prefix_hit_rate", "prefix_cache_hit_rate")
    out["kv_cache_usage"] = mean("kv_cache_usage", "kv_cache_usage")
    failed = rows.loc[rows["failures"].notna()]
    out["failed_requests"] = (_figure(float(failed["failures"].sum()),
                                      _provenance(failed, "failures", m["failed_requests"]))
                              if len(failed) else _unmeasured("failed_requests", table, "failures",
                                                              ", ".join(m["failed_requests"].values())))
    for part in ("input", "infer", "output"):
        name = f"compute_{part}_seconds_per_request"
        out[name] = ratio(f"compute_{part}_seconds", "requests", name, f"compute_{part}_seconds")
    return out


def _ratio_rows(rows, num: str, den: str, metrics: dict) -> dict:
    both = rows.loc[rows[num].notna() & rows[den].notna()]
    total = float(both[den].sum())
    source = _provenance(both, num, metrics)
    if total <= 0:
        return _figure(None, source, f"no {den.replace('_', ' ')} in the window")
    return _figure(float(both[num].sum()) / total, source)


def serving_evidence(tele: Telemetry, services: Mapping[str, Service]) -> dict[str, dict[str, Figure]]:
    """Per declared service, over the window: queue time, batching, occupancy, prefix cache,
    DCGM activity and replicas, each figure with its source or, unmeasured, null and the reason."""
    serving = _of_service(tele.serving, services)
    activity = tele.activity
    evidence = tele.gpu_evidence
    if len(evidence) and len(activity):
        owners = activity[["node", "gpu", "uuid", "ts", "namespace", "pod", "model_name", "container"]]
        evidence = evidence.merge(owners.drop_duplicates(["node", "gpu", "uuid", "ts"]),
                                  on=["node", "gpu", "uuid", "ts"], how="inner")
        evidence = _of_service(evidence, services)
    else:
        evidence = evidence.iloc[0:0].assign(service=[])
    replicas = tele.replicas
    if len(replicas):
        keys = list(zip(replicas["kind"], replicas["namespace"], replicas["name"]))
        replicas = replicas.assign(service=[tele.replica_services.get(k) for k in keys])
        replicas = replicas.loc[replicas["service"].notna()]
    out = {}
    for name in services:
        rows = serving.loc[serving["service"] == name] if len(serving) else serving
        entry = _serving_figures(rows, tele.serving)
        gpus = evidence.loc[evidence["service"] == name]
        for column, metric in GPU_EVIDENCE.items():
            used = gpus.loc[gpus[column].notna()] if column in gpus else gpus.iloc[0:0]
            if used.empty:
                entry[column] = _unmeasured(column, tele.gpu_evidence, column, metric)
            else:
                sources = ", ".join(sorted(set(used["source"])))
                entry[column] = _figure(float(used[column].mean()), f"{metric} ({sources})")
        mine = replicas.loc[replicas["service"] == name] if len(replicas) else replicas
        for figure, (kind, column, metric) in REPLICA_EVIDENCE.items():
            used = mine.loc[(mine["kind"] == kind) & mine[column].notna()] if len(mine) else mine
            if used.empty:
                entry[figure] = _unmeasured(figure, tele.replicas, column, metric)
            else:
                per_interval = used.groupby("ts")[column].sum()
                sources = ", ".join(sorted(set(used["source"])))
                names = ", ".join(sorted(set(used["namespace"] + "/" + used["name"])))
                entry[figure] = _figure(float(per_interval.mean()), f"{metric} {names} ({sources})")
        out[name] = dict(sorted(entry.items()))
    return out


# Serving-evidence figures that bear on an option (shown beside it; they never change its figures).
OPTION_EVIDENCE = {
    "batching_limits": ("batch_size", "tokens_per_step", "mean_running", "mean_waiting",
                        "queue_seconds_per_request"),
    "prefix_kv_cache": ("prefix_cache_hit_rate", "kv_cache_usage"),
    "right_size_replicas": ("replicas_spec", "replicas_available", "hpa_desired"),
    "autoscaling_policy": ("hpa_current", "hpa_desired", "hpa_min", "hpa_max"),
    "consolidate_models": ("sm_active", "fb_used_mib"),
    "quantise": ("tensor_active", "dram_active"),
    "fuse_kernels_compile": ("sm_active", "dram_active"),
}


def option_evidence(serving: Mapping[str, Mapping[str, Figure]]) -> dict[str, tuple[dict[str, Any], ...]]:
    """Option id -> the measured serving-evidence figures that bear on it, per service."""
    return {option: tuple({"service": service, "figure": key, "value": figure["value"], "source": figure["source"]}
                          for service, figures in sorted(serving.items())
                          for key in keys
                          if (figure := figures.get(key)) and figure.get("value") is not None)
            for option, keys in OPTION_EVIDENCE.items()}
