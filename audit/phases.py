"""Model compute split into prefill and decode per service (METHOD §4), and what the prefix-cache and
generation-cap options read from the same measurements (METHOD §7).

The split is measured, never assumed: a service's share of prefill is its measured prefill time over
prefill + decode time, from

1. its kernel profile, where the profile tells prefill from decode steps and holds both
   (connectors.profiles.phases: phase annotations, else attention shapes and kernels): kernel time,
   the quantity ``model_compute.kernel_active`` measures;
2. else the servers' phase timers over the window, summed over the service's pod-intervals that time
   both phases (a pod-interval timing one phase only would weigh that phase with time the other
   phase never measured: it is left out and named, :func:`one_phase`; pods with no phase timer at
   all are stood for by the timed pods' ratio, and named, :func:`untimed_pods`): vLLM
   ``vllm:request_prefill_time_seconds_sum`` and ``vllm:request_decode_time_seconds_sum`` (decode
   falls back to ``vllm:time_per_output_token_seconds_sum`` or ``vllm:inter_token_latency_seconds_sum``,
   one observation per generated token after the first: their sum is decode time), TGI
   ``tgi_batch_forward_duration_sum{method="prefill|decode"}``.

Where neither measures both phases the split is *not measured*, with the reason. vLLM's per-request
``vllm:request_time_per_output_token_seconds`` (each request's *mean* time per token) is never read
as decode time: its sum is smaller than the decode time by about the mean generated length (the
OpenCost comparison in docs/telemetry.md).
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping

import numpy as np
import pandas as pd

from audit.misfit import listing
from audit.money import ZERO
from audit.services import service_of
from connectors.profiles.phases import PhaseSplit, split_phases
from connectors.telemetry.distinct import by_values
from connectors.telemetry.phase_families import distribution

PREFILL_TIMERS = {"vllm": "vllm:request_prefill_time_seconds_sum",
                  "tgi": 'tgi_batch_forward_duration_sum{method="prefill"}'}
DECODE_TIMERS = {"vllm": ("decode_seconds", "vllm:request_decode_time_seconds_sum"),
                 "vllm_tpot": ("tpot_seconds", "vllm:time_per_output_token_seconds_sum"),
                 "vllm_itl": ("itl_seconds", "vllm:inter_token_latency_seconds_sum"),
                 "tgi": ("decode_seconds", 'tgi_batch_forward_duration_sum{method="decode"}')}
GENERATION_HISTOGRAMS = {"vllm": "vllm:request_generation_tokens", "tgi": "tgi_request_generated_tokens"}
NO_TIMERS = ("no phase timers for its pods (vllm:request_prefill_time_seconds / vllm:request_decode_time_seconds, "
             'tgi_batch_forward_duration{method="prefill|decode"}; Triton does not time the phases)')


def _dec(value: float) -> Decimal:
    return Decimal(repr(float(value)))


@dataclass(frozen=True)
class Measured:
    """Prefill and decode time of one service from one source (seconds, or us for a profile)."""

    prefill: Decimal
    decode: Decimal
    source: str
    note: str | None = None      # the pod-intervals left out: they time one phase only (rule 5)
    one_phase: tuple[str, ...] = ()  # the pods with such pod-intervals, by name
    untimed: str | None = None   # the service's pods with no phase timer, which the split stands for (rule 1)
    untimed_pods: tuple[str, ...] = ()  # those pods, by name

    @property
    def notes(self) -> list[str]:
        """What the split leaves out or stands for, in words (none: every pod times both phases)."""
        return [n for n in (self.note, self.untimed) if n]

    @property
    def share(self) -> Decimal:
        """The prefill share: prefill / (prefill + decode), an exact quotient."""
        return self.prefill / (self.prefill + self.decode)


@dataclass(frozen=True)
class Split:
    """A service's phase split: the measurement used (None: not measured, with the reason) and the
    other sources that measured it too (compared in audit.json, never mixed in)."""

    service: str
    used: Measured | None
    reason: str | None
    others: tuple[Measured, ...] = ()


def service_rows(table: pd.DataFrame, services: Mapping[str, Any]) -> pd.DataFrame:
    """The table's rows with the declared service their pod labels match (``service`` column)."""
    if table is None or table.empty:
        return pd.DataFrame(columns=[*(table.columns if table is not None else []), "service"])
    # a pod's rows (one per interval) share one answer: matched once per distinct labels
    names = by_values(lambda ns, pod, model: service_of(
        {"namespace": str(ns), "pod": str(pod), "model_name": str(model), "container": ""}, services, {}),
        table["namespace"], table["pod"], table["model_name"])
    out = table.assign(service=names)
    return out.loc[out["service"].notna()]


def _total(rows: pd.DataFrame, column: str) -> float:
    """Sum of a measured column (NaN = not measured; no value at all: NaN)."""
    if column not in rows or rows[column].isna().all():
        return math.nan
    return float(rows[column].sum(skipna=True))


def serving_total(serving: pd.DataFrame, services: Mapping[str, Any], service: str, column: str,
                  family: str | None = None) -> float:
    """Sum of a serving-stats column over the service's pods (NaN where no row measures it)."""
    rows = service_rows(serving, services)
    rows = rows.loc[rows["service"] == service]
    if family is not None and "family" in rows:
        rows = rows.loc[rows["family"] == family]
    return _total(rows, column)


def timer_split(rows: pd.DataFrame, service: str) -> Measured | str:
    """The service's phase timers over its pod-intervals that time both phases, or why they measure
    no split."""
    for family in ("vllm", "tgi"):
        mine = rows.loc[rows["family"] == family] if "family" in rows else rows.iloc[0:0]
        prefill = _total(mine, "prefill_seconds")
        if not math.isfinite(prefill):
            continue
        apart = False
        for key, (column, name) in DECODE_TIMERS.items():
            if not key.startswith(family):
                continue
            both = mine.loc[mine["prefill_seconds"].notna() & mine[column].notna()] if column in mine else mine.iloc[0:0]
            timed, decode = _total(both, "prefill_seconds"), _total(both, column)
            apart = apart or math.isfinite(_total(mine, column))
            if math.isfinite(decode) and timed > 0 and decode > 0:
                note, pods = one_phase(mine, column, PREFILL_TIMERS[family], name)
                untimed, bare, alone = untimed_pods(rows, both, PREFILL_TIMERS[family], name)
                return Measured(_dec(timed), _dec(decode),
                                f"{PREFILL_TIMERS[family]} and {name} over the window "
                                f"({measured_by(both, ['prefill_seconds', column])}){alone}", note, pods, untimed, bare)
        if apart:
            return f"{service}: its phase timers time prefill and decode on no common pod and interval"
        return (f"{service}: its phase timers measure {prefill:g} s of prefill and no decode time"
                if prefill > 0 else f"{service}: its phase timers measure no prefill time")
    return f"{service}: {NO_TIMERS}"


def one_phase(rows: pd.DataFrame, column: str, prefill_name: str, decode_name: str) -> tuple[str | None, tuple[str, ...]]:
    """The words naming the pod-intervals of ``rows`` that time one phase only (prefill without the
    decode timer ``column``, or the reverse), left out of the split, with the pods that time both
    beside them; and those one-phase pods (None, () where every pod-interval times both or neither)."""
    has_prefill, has_decode = rows["prefill_seconds"].notna(), rows[column].notna()
    clauses: list[str] = []
    pods: list[str] = []
    for only, timer, missing, seconds in ((has_prefill & ~has_decode, prefill_name, decode_name, "prefill_seconds"),
                                          (has_decode & ~has_prefill, decode_name, prefill_name, column)):
        left = rows.loc[only]
        if not len(left):
            continue
        per_pod = left.groupby("pod", sort=True).size()
        pods.extend(str(p) for p in per_pod.index)
        clauses.append(f"{len(left)} pod-intervals of {len(per_pod)} pod(s) time {timer} without {missing} "
                       f"({float(left[seconds].sum()):g} s left out): "
                       + listing([f"{p} ({n})" for p, n in per_pod.items()]))
    if not clauses:
        return None, ()
    both = rows.loc[has_prefill & has_decode, "pod"].astype(str)
    return ("phase split over the pod-intervals that time both phases only; " + "; ".join(clauses)
            + f"; the split stands on {len(both)} pod-intervals of {both.nunique()} pod(s): "
            + listing(sorted(set(both))), tuple(pods))


def untimed_pods(rows: pd.DataFrame, both: pd.DataFrame, prefill_name: str,
                 decode_name: str) -> tuple[str | None, tuple[str, ...], str]:
    """The service's pods (``rows``, any family) none of whose pod-intervals carries a phase timer (a
    rolling upgrade's older servers, or a server that times no phase): the split measured on the
    pod-intervals ``both`` is applied to them too. The words naming them with the pods the split
    stands on, those pods, and the source's suffix; (None, (), "") where every pod carries a timer."""
    timers = [c for c in ("prefill_seconds", *(column for column, _ in DECODE_TIMERS.values())) if c in rows]
    timed = rows[timers].notna().any(axis=1).groupby(rows["pod"].astype(str)).any()
    bare = timed.index[~timed.to_numpy()]
    if not len(bare):
        return None, (), ""
    per_pod = rows.loc[rows["pod"].astype(str).isin(bare)].groupby(rows["pod"].astype(str), sort=True).size()
    on = both["pod"].astype(str)
    words = (f"{len(bare)} of the service's {len(timed)} pods carry no phase timer (neither {prefill_name} nor "
             f"{decode_name}) on {int(per_pod.sum())} of its {len(rows)} pod-intervals: "
             + listing([f"{p} ({n})" for p, n in per_pod.items()])
             + f"; the split stands on {len(on)} pod-intervals of {on.nunique()} pod(s): {listing(sorted(set(on)))}, "
             "and is their prefill / decode ratio applied to the whole service")
    return words, tuple(per_pod.index), f"; on {on.nunique()} of the service's {len(timed)} pods, applied to all"


def measured_by(rows: pd.DataFrame, columns: list[str]) -> str:
    """The sources of the rows that measure any of ``columns`` ("; "-joined): a source whose rows
    for the pods hold none of those series measured nothing of the figure."""
    if "source" not in rows:
        return ""
    measured = rows[columns].notna().any(axis=1)
    return "; ".join(sorted(set(rows.loc[measured, "source"].astype(str))))


_PROFILE_SPLITS: dict[int, tuple[weakref.ref, PhaseSplit]] = {}


def profile_split(profile) -> PhaseSplit | None:
    """The phase split of a profile's parsed trace (None where the profile has no trace); computed
    once per trace (the audit.json writer and the option models read it; a weak reference keeps
    the cache from holding a trace, or from answering for another one at the same address)."""
    rank_set = getattr(profile, "rank_set", None)
    if rank_set is not None:  # a rank set's split, added over its ranks as they were read
        return rank_set.phases
    trace = getattr(profile, "trace", None)
    if trace is None:
        return None
    found = _PROFILE_SPLITS.get(id(trace))
    if found is not None and found[0]() is trace:
        return found[1]
    if len(_PROFILE_SPLITS) > 64:
        _PROFILE_SPLITS.clear()
    split = split_phases(trace)
    _PROFILE_SPLITS[id(trace)] = (weakref.ref(trace), split)
    return split


def measured_splits(given, missing: list[str]):
    """(service, split) for each service of the rank stage's input whose prefill / decode split is
    measured; a service whose split is not measured adds its reason to ``missing`` (the options
    priced on the split: prefix cache, generation cap)."""
    for name in given.case.services:
        split = service_split(name, given.serving, given.case.services, given.profiles.get(name))
        if split.used is None:
            missing.append(split.reason or f"{name}: prefill / decode split not measured")
            continue
        yield name, split


def service_split(service: str, serving: pd.DataFrame, services: Mapping[str, Any], profile=None) -> Split:
    """The service's split: its profile where the profile separates both phases, else its phase timers."""
    found = []
    reasons = []
    phases = profile_split(profile) if profile is not None else None
    if phases is not None and phases.separated:
        left = (f"; {phases.mixed_us + phases.unlabelled_us:.0f} us of mixed or unlabelled kernel time left out"
                if phases.mixed_us + phases.unlabelled_us else "")
        found.append(Measured(_dec(phases.prefill_us), _dec(phases.decode_us),
                              f"kernel profile {profile.name}: kernel time of prefill and decode steps "
                              f"({phases.basis}: {phases.evidence}{left})"))
    elif phases is not None:
        reasons.append(f"{service}: profile {profile.name}: {phases.reason()}")
    elif profile is None:
        reasons.append(f"{service}: no kernel profile")
    rows = service_rows(serving, services)
    timers = timer_split(rows.loc[rows["service"] == service], service)
    if isinstance(timers, Measured):
        found.append(timers)
    else:
        reasons.append(timers)
    if not found:
        return Split(service, None, "; ".join(reasons))
    return Split(service, found[0], None, tuple(found[1:]))


def hit_rate(serving: pd.DataFrame, services: Mapping[str, Any], service: str) -> tuple[Decimal, str] | str:
    """The measured prefix-cache hit rate h0 of the service over the window, or why it is not measured:
    vLLM V1 ``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries`` (tokens), else the mean of V0's
    ``vllm:gpu_prefix_cache_hit_rate`` gauge."""
    rows = service_rows(serving, services)
    rows = rows.loc[rows["service"] == service]
    queries, hits = _total(rows, "prefix_queries"), _total(rows, "prefix_hits")
    if math.isfinite(queries) and queries > 0 and math.isfinite(hits):
        return (_dec(hits) / _dec(queries), "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total "
                f"over the window ({measured_by(rows, ['prefix_queries', 'prefix_hits'])})")
    if "prefix_hit_rate" in rows and rows["prefix_hit_rate"].notna().any():
        return (_dec(float(rows["prefix_hit_rate"].mean())), "vllm:gpu_prefix_cache_hit_rate, mean per pod "
                f"and interval ({measured_by(rows, ['prefix_hit_rate'])})")
    return (f"{service}: no prefix-cache counters (vllm:prefix_cache_queries / vllm:prefix_cache_hits, or "
            "vllm:gpu_prefix_cache_hit_rate) for its pods")


def generated_distribution(histograms: pd.DataFrame, services: Mapping[str, Any],
                           service: str) -> tuple[np.ndarray, np.ndarray, str] | str:
    """(bucket upper edges, requests per bucket, source) of the service's generated tokens per request,
    from the servers' histograms over the window, or why there is none."""
    rows = service_rows(histograms, services)
    rows = rows.loc[rows["service"] == service] if len(rows) else rows
    for family, name in GENERATION_HISTOGRAMS.items():
        mine = rows.loc[rows["family"] == family] if len(rows) else rows
        edges, counts = distribution(mine, "generation_tokens") if len(mine) else (np.empty(0), np.empty(0))
        if counts.sum() > 0:
            sources = "; ".join(sorted(set(mine["source"].astype(str)))) if "source" in mine else ""
            return edges, counts, f"{name}_bucket increases over the window ({sources})"
    return (f"{service}: no generated-token histogram (vllm:request_generation_tokens_bucket, "
            "tgi_request_generated_tokens_bucket) for its pods")


def model_compute(ledger, service: str) -> Decimal:
    """The service's ``model_compute.kernel_active`` over the window (the ledger part)."""
    part = ledger.parts.get(("model_compute", "kernel_active", service))
    return part.amount if part is not None else ZERO


def prefill_cost(split: Split, amount: Decimal) -> Decimal | None:
    """``amount`` × the prefill share (None where the split is not measured)."""
    return None if split.used is None else amount * split.used.share
