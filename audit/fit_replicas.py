"""Whether a service's ``gpus_per_replica`` is what its pods hold in telemetry.

The right-size and autoscaling options (METHOD §7) size replicas in GPUs by ``gpus_per_replica``,
which is 1 unless the case says otherwise. A vLLM deployment at tensor parallel 2 audited with the
default, or a case that says 64 where pods hold one GPU, prices those options on replicas that do not
exist (the demo's chat at 64: right-sizing went from 6,767.02 a month to "no saving"), and nothing in
the case matches nothing. :func:`replicas_fit` compares it with the GPUs a pod of the service holds per
interval in the GPU activity (the median over the service's pod-intervals) and warns where they
differ (``gpus_per_replica``), giving the value telemetry shows.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from audit.case import Case
from audit.misfit import Misfit, text
from audit.normalised import Telemetry
from audit.services import service_of

LABELS = ("namespace", "pod", "container", "model_name")


def replicas_fit(case: Case, tele: Telemetry) -> list[Misfit]:
    """A ``gpus_per_replica`` warning per service whose pods hold another number of GPUs than it says."""
    held = gpus_per_pod(case, tele)
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
    return out


def gpus_per_pod(case: Case, tele: Telemetry) -> dict[str, int]:
    """Service -> the median number of distinct GPUs one of its pods holds in an interval."""
    activity = tele.activity
    keys = [k for k in LABELS if k in activity.columns]
    if not len(activity) or "pod" not in keys or "ts" not in activity.columns:
        return {}
    gpu = [c for c in ("node", "uuid", "gpu") if c in activity.columns]
    pod = activity.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()  # a label set per code
    held = pd.DataFrame({"pod": pod, "ts": pd.DatetimeIndex(activity["ts"]).as_unit("ns").asi8,
                         "gpu": activity.groupby(gpu, sort=False, dropna=False).ngroup().to_numpy() if gpu else 0})
    counts = held.drop_duplicates().groupby(["pod", "ts"], sort=False).size()
    first = pd.Series(np.arange(len(pod))).groupby(pod, sort=False).first()  # a row of each label set
    labels = activity[keys].iloc[first.to_numpy()]
    owner = {code: service_of({k: "" if pd.isna(v) else str(v) for k, v in zip(keys, row)}, case.services, {})
             for code, row in zip(first.index, labels.itertuples(index=False))}
    services = pd.Series(counts.index.get_level_values("pod")).map(owner).to_numpy()
    out = {}
    for name in {s for s in services if isinstance(s, str) and s}:  # no service: None, or NaN from map
        out[name] = int(np.median(counts.to_numpy()[services == name]))
    return out
