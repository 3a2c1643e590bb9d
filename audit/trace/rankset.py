"""The kernel evidence of a profile that is a rank set (connectors/profiles/rankset.py).

The evidence stage and the sync-point option need each rank's call paths, idle call paths,
findings and idle by class. Each rank is read again, on its own, by the runner the run names
(this process, worker processes or a Dask cluster: connectors/profiles/workers.py), and sends back
only those small parts; the set's figures are then put together here, once per set:

- call paths and idle call paths stay per rank, as in `costaudit trace`: each row names its rank;
  a call path's share is of its rank's GPU work, an idle path's of the set's GPU time (as the
  findings' ``share``);
- a finding's ``share`` and ``share_of_part`` are of the set: its GPU time over the sum of the
  ranks' GPU time (the windows), and over the sum of the ranks' time its part stands for (idle for
  ``in_flight_idle``, busy for ``kernel_active``), so that a service's findings never cost more
  than its part, whatever the number of ranks;
- idle by class as a share of the set's GPU time (the sync-point option's shares).

Every sum runs over the ranks in the order of the files, in exact decimals of each rank's floats,
so a set of one rank gives the figures of its trace read alone, and every runner the same figures.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from connectors.profiles.rankset import RankSet
from connectors.profiles.workers import collect, guarded, runner_for

ZERO = Decimal(0)
_CACHE: dict[RankSet, SetEvidence] = {}
CACHED_SETS = 4


@dataclass(frozen=True)
class SetEvidence:
    """A rank set's kernel evidence, as :func:`audit.trace.analyse.kernel_evidence` gives a trace's
    (``call_paths`` and ``idle`` one entry per rank with GPU work, ``findings`` of the set), and
    its idle by class as a share of the set's GPU time (None without GPU time)."""

    call_paths: list[dict]
    idle: list[dict]
    findings: list[dict]
    idle_shares: dict[str, Decimal] | None


def set_evidence(rank_set: RankSet) -> SetEvidence:
    """The set's evidence, analysed once per set (the evidence stage and the option models ask)."""
    found = _CACHE.get(rank_set)
    if found is None:
        if len(_CACHE) >= CACHED_SETS:
            _CACHE.clear()
        with runner_for(len(rank_set.files)) as (run, _):
            parts = collect(run(evidence_task, [(str(f), r) for f, r in zip(rank_set.files, rank_set.ranks)]))
        found = _CACHE[rank_set] = combined([p for p in parts if not p.get("empty")])
    return found


def evidence_task(path: str, rank: int) -> dict:
    """One rank's evidence parts (in a worker, or in this process); ``empty`` without GPU work."""
    return guarded(path, lambda: rank_evidence(Path(path), rank))


def rank_evidence(path: Path, rank: int) -> dict:
    """:func:`evidence_task`'s work: the rank's top call paths and idle call paths, its findings
    (each with its GPU time as an exact decimal string), its GPU time and idle by class."""
    import pandas  # noqa: F401  (loaded before the trace, as the single-process path does)

    from audit.trace.analyse import top_call_paths, top_idle_paths
    from audit.trace.findings import RULES, finding_dict, load_profile
    from audit.trace.idle import idle_by_category
    from audit.trace.profile_view import ProfileView
    from connectors.profiles.events import GPU_WORK
    from connectors.profiles.intervals import among

    trace = load_profile(path)
    if not among(trace.role, GPU_WORK).any():
        return {"empty": True}
    view = ProfileView(trace, rank)
    findings = [(finding_dict(f, view, None), repr(float(f.gpu_us))) for rule in RULES for f in rule(view)]
    return {"call_paths": top_call_paths(rank, trace, view), "idle": top_idle_paths(rank, trace, view, None),
            "findings": findings, "window_us": repr(view.window_us),
            "idle_us": {k: repr(v) for k, v in idle_by_category(view).items()}}


def combined(parts: list[dict]) -> SetEvidence:
    """The set's evidence from its ranks' parts (in the order of the files)."""
    from audit.trace.analyse import sorted_findings
    from audit.trace.findings_rules import IDLE

    window = sum((Decimal(p["window_us"]) for p in parts), ZERO)
    idle_total = [Decimal(repr(sum(float(v) for v in p["idle_us"].values()))) for p in parts]
    of_part = {IDLE: sum(idle_total, ZERO),
               "kernel_active": sum((Decimal(p["window_us"]) - i for p, i in zip(parts, idle_total)), ZERO)}
    findings = [_of_set(finding, Decimal(gpu_us), window, of_part[finding["part"]])
                for p in parts for finding, gpu_us in p["findings"]]
    shares = None
    if window > 0:
        classes = list(parts[0]["idle_us"])
        shares = {k: sum((Decimal(p["idle_us"][k]) for p in parts), ZERO) / window for k in classes}
    idle = [p["idle"] for p in parts] if len(parts) < 2 else [_idle_of_set(p["idle"], window) for p in parts]
    return SetEvidence([p["call_paths"] for p in parts], idle, sorted_findings(findings), shares)


def _idle_of_set(group: dict, window: Decimal) -> dict:
    """A rank's idle call paths among several ranks': each row names its rank, and its ``share`` is
    of the set's GPU time (the sum of the ranks' windows)."""
    return {**group, "top": [{**row, "rank": group["rank"],
                              "share": f"{Decimal(repr(row['idle_us'])) / window:.6f}" if window > 0 else None}
                             for row in group["top"]]}


def _of_set(finding: dict, gpu_us: Decimal, window: Decimal, part: Decimal) -> dict[str, Any]:
    """A rank's finding with its shares taken over the set (as :func:`audit.trace.findings.finding_dict`
    takes them over one trace)."""
    return {**finding, "share": f"{gpu_us / window:.6f}" if window > 0 else None,
            "share_of_part": f"{gpu_us / part:.6f}" if part > 0 else None}


def top_call_paths(evidence: SetEvidence, count: int) -> tuple[dict, ...]:
    """The set's busiest call paths over its ranks, each row naming its rank (its share is of its
    rank's GPU work), largest GPU time first (then rank, call path)."""
    rows = [{**row, "rank": group["rank"]} for group in evidence.call_paths for row in group["top"]]
    return tuple(sorted(rows, key=lambda r: (-r["gpu_us"], r["rank"], r["call_path"]))[:count])
