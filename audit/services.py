"""Which declared service a pod belongs to: the case's ``[services]`` matchers over pod labels.

Shared by the stages that meet pods (the GPU split, normalisation, unit costs, evidence) and the
audit.json writer.
"""
from __future__ import annotations

import re
from typing import Mapping

import pandas as pd

from audit.case import Service

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
        return re.search(pattern[3:], value) is not None
    return pattern == value


def pod_models(traffic: pd.DataFrame) -> dict[tuple[str, str], str]:
    """(namespace, pod) -> served model name, from the serving counters."""
    columns = (traffic[c].to_numpy(dtype=object) for c in ("namespace", "pod", "model_name"))  # not itertuples
    return {(namespace, pod): model for namespace, pod, model in zip(*columns) if pod}
