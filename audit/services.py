"""Which declared service a pod belongs to: the case's ``[services]`` matchers over pod labels.

Shared by the stages that meet pods (the GPU split, normalisation, unit costs, evidence) and the
audit.json writer.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from audit.case import Service
from audit.patterns import search
from connectors.telemetry.distinct import by_values

#: (namespace, pod) -> the model name the pod serves
PodModels = Mapping[tuple[str, str], str]


def service_of(labels: Mapping[str, str], services: Mapping[str, Service], pod_models: PodModels) -> str | None:
    """The declared service whose matchers all hold for a pod's labels (a service with no matchers,
    one that only claims billing lines, owns no pod)."""
    values = dict(labels)
    values.setdefault("model_name", pod_models.get((labels.get("namespace", ""), labels.get("pod", "")), ""))
    for name, service in services.items():
        if service.match and all(matches(pattern, values.get(key, "")) for key, pattern in service.match.items()):
            return name
    return None


def matches(pattern: str, value: str) -> bool:
    """A case value matches: exactly, or ``re:<regex>`` searched (the case checked the regex)."""
    if pattern.startswith("re:"):
        return search(pattern[3:], value)
    return pattern == value


def pod_models(traffic: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(namespace, pod) -> served model name, from the serving counters."""
    columns = (traffic[c].to_numpy(dtype=object) for c in ("namespace", "pod", "model_name"))  # not itertuples
    return {(namespace, pod): model for namespace, pod, model in zip(*columns) if pod}


def telemetry_owners(activity: pd.DataFrame, traffic: pd.DataFrame, services: Mapping[str, Service]) -> np.ndarray:
    """:func:`activity_services` with the served models read from the serving counters ``traffic``:
    the fit checks work it out once and share it."""
    return activity_services(activity, services, pod_models(traffic) if len(traffic) else {})


def activity_services(activity: pd.DataFrame, services: Mapping[str, Service], models: PodModels) -> np.ndarray:
    """The declared service of each GPU activity row's pod (None for a row of no service, or of no
    pod), as the GPU split assigns holders: the row's namespace, pod and container, the model the
    pod serves from the counters (``models``); each distinct pod once."""
    if not len(activity) or "pod" not in activity.columns:
        return np.full(len(activity), None, dtype=object)
    columns = [activity[c] if c in activity.columns else pd.Series([""] * len(activity), index=activity.index)
               for c in ("namespace", "pod", "container")]
    def owner(namespace, pod, container) -> str | None:
        if pd.isna(pod) or not str(pod):
            return None
        labels = {"namespace": "" if pd.isna(namespace) else str(namespace), "pod": str(pod),
                  "container": "" if pd.isna(container) else str(container)}
        return service_of(labels, services, models)
    return by_values(owner, *columns)
