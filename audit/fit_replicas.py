"""Whether a service's ``gpus_per_replica`` is what its pods hold in telemetry.

The right-size and autoscaling options (METHOD §7) size replicas in GPUs by ``gpus_per_replica``,
which is 1 unless the case says otherwise. A vLLM deployment at tensor parallel 2 audited with the
default, or a case that says 64 where pods hold one GPU, prices those options on replicas that do not
exist (the demo's chat at 64: right-sizing went from 6,767.02 a month to "no saving"), and nothing in
the case matches nothing. :func:`replicas_fit` compares it with the GPUs a pod of the service holds per
interval in the GPU activity (the median over the service's pod-intervals) and warns where they
differ (``gpus_per_replica``), giving the value telemetry shows.

A service with no telemetry matchers (a CPU tier that claims its lines) holds no GPU: the GPU split
gives GPU time by pods, never by a claim. Its ``gpus_per_replica``, ``min_replicas`` and
``scale_reaction`` size GPU replicas it does not have: where the case sets one of them (other than
its default) it applies to nothing, and ``replica_settings_unused`` names them.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from audit.case import Case, Service
from audit.fit_step import duration_text
from audit.misfit import Misfit, text
from audit.normalised import Telemetry
from audit.services import telemetry_owners


def replicas_fit(case: Case, tele: Telemetry, owners: np.ndarray | None = None) -> list[Misfit]:
    """A ``gpus_per_replica`` warning per service whose pods hold another number of GPUs than it says.
    ``owners``: each activity row's service (:func:`audit.services.telemetry_owners`), where the
    caller has it."""
    held = gpus_per_pod(case, tele, owners)
    out = []
    for name, service in case.services.items():
        seen = held.get(name)
        if seen is None or seen == service.gpus_per_replica:
            continue
        subject = f"service {text(name)}"
        message = (f"{subject} sizes a replica at gpus_per_replica = {service.gpus_per_replica}, but its pods hold "
                   f"{seen} GPU(s) each in the GPU activity (the median over its pods and intervals): the "
                   f"right-size and autoscaling options would count replicas of the wrong size; "
                   f"gpus_per_replica = {seen} fits the data")
        out.append(Misfit("gpus_per_replica", subject, message, (str(seen),)))
    return out + [m for name, s in case.services.items() if name not in held and not s.match
                  for m in _unused_settings(s)]


#: the replica settings and their defaults (audit/case_services.py ``Service``)
REPLICA_DEFAULTS = (("gpus_per_replica", 1), ("min_replicas", 1), ("scale_reaction_seconds", 3600))


def _unused_settings(service: Service) -> list[Misfit]:
    """A ``replica_settings_unused`` warning where a service that holds no GPU sets a replica setting."""
    set_ = [(key, getattr(service, key)) for key, default in REPLICA_DEFAULTS if getattr(service, key) != default]
    if not set_:
        return []
    written = ", ".join(f'scale_reaction = "{duration_text(v)}"' if key == "scale_reaction_seconds" else f"{key} = {v}"
                        for key, v in set_)
    subject = f"service {text(service.name)}"
    return [Misfit("replica_settings_unused", subject,
                   f"{subject} sets {written}, which apply to nothing: it has no telemetry matchers and holds no GPU "
                   "in the data (the GPU split gives GPU time by pods, never by a claim), and these settings size "
                   "the GPU replicas of the right-size and autoscaling options; remove them (a CPU tier gets none)",
                   ())]


def gpus_per_pod(case: Case, tele: Telemetry, owners: np.ndarray | None = None) -> dict[str, int]:
    """Service -> the median number of distinct GPUs one of its pods holds in an interval."""
    activity = tele.activity
    if not len(activity) or "ts" not in activity.columns:
        return {}
    if owners is None:
        owners = telemetry_owners(activity, tele.traffic, case.services)
    mine = np.array([isinstance(o, str) for o in owners], dtype=bool)
    if not mine.any():
        return {}
    rows = activity.loc[mine]
    gpu = [c for c in ("node", "uuid", "gpu") if c in rows.columns]
    held = pd.DataFrame({"service": owners[mine],
                         "pod": rows.groupby(["namespace", "pod"], sort=False, dropna=False).ngroup().to_numpy(),
                         "ts": pd.DatetimeIndex(rows["ts"]).as_unit("ns").asi8,
                         "gpu": rows.groupby(gpu, sort=False, dropna=False).ngroup().to_numpy() if gpu else 0})
    counts = held.drop_duplicates().groupby(["service", "pod", "ts"], sort=False).size()
    return {str(name): int(np.median(group.to_numpy())) for name, group in counts.groupby(level="service")}
