"""Pods of no service, by name (rule 5): ``undeclared_pods`` (audit/fit.py).

A pod that no ``[services]`` entry matches is counted as *undeclared workload*: its GPU time goes to
``unattributed.undeclared_workload`` and its requests count for no service. That is right for a pod
nobody meant to audit (a notebook), and quietly wrong for one a matcher just misses (a canary
``chat-…-canary`` beside ``re:^chat-[a-z0-9]{10}-[a-z0-9]{5}$``): the service's unit cost then leaves
out the canary's requests and GPU time, and nothing says so. This check names every such pod, with
the service it is nearest to and the matcher that does not hold:

* a service *near* a pod: every matcher of the service holds for the pod but one, and the pod's
  value for that one is close to the values of the pods the service does own (difflib ratio at
  least :data:`NEAR`), or shares their first word (``chat`` of ``chat-7c9d…``);
* the warning lists the pods near a service first, then the others, at most :data:`LISTED` by name.
"""
from __future__ import annotations

import difflib
import re
from typing import Mapping, Sequence

import pandas as pd

from audit.case import Case, Service
from audit.misfit import LISTED, Misfit, _matches, _written, listing, text
from audit.services import service_of

#: the difflib ratio above which a pod's value is near the values a service's own pods have
NEAR = 0.75


def orphan_pods(case: Case, pods: Sequence[Mapping[str, str]]) -> tuple[list[Mapping[str, str]], dict[str, list]]:
    """(the pods no service matches, each service's own pods); ``pods``: every distinct label set
    telemetry names (:func:`audit.fit.pod_labels`). No orphans where no service is matched by labels."""
    services = {name: s for name, s in case.services.items() if s.match}
    owned: dict[str, list[Mapping[str, str]]] = {}
    orphans = []
    for labels in pods if services else ():
        owner = service_of(labels, services, {})
        if owner is None:
            orphans.append(labels)
        else:
            owned.setdefault(owner, []).append(labels)
    return orphans, owned


def undeclared_fit(case: Case, orphans: Sequence[Mapping[str, str]],
                   owned: Mapping[str, list[Mapping[str, str]]]) -> list[Misfit]:
    """One ``undeclared_pods`` warning where some pod no service matches is near a service (its
    matchers all hold but one, :func:`nearest_service`), naming those pods first, then the others;
    none where no orphan is near a service (a notebook nobody meant to audit is named in the
    undeclared-workload part's reason instead)."""
    services = {name: s for name, s in case.services.items() if s.match}
    near = {pod_name(p): found for p in orphans if (found := nearest_service(p, services, owned))}
    if not near:
        return []
    names = sorted({pod_name(p) for p in orphans}, key=lambda n: (n not in near, n))
    shown = [f"{text(n)} ({_near_text(near[n], services)})" if n in near else text(n) for n in names[:LISTED]]
    more = f" … ({len(names) - LISTED} more)" if len(names) > LISTED else ""
    message = (f"{len(names)} pod(s) match no [services] entry: their GPU time is counted as undeclared "
               f"workload (unattributed) and their requests for no service: {', '.join(shown)}{more}; "
               "widen the matcher named, or declare the pod's own service, if it belongs to the audit")
    nearest_services = tuple(dict.fromkeys(text(service) for service, _ in near.values()))
    return [Misfit("undeclared_pods", "pods of no service", message, nearest_services)]


def nearest_service(pod: Mapping[str, str], services: Mapping[str, Service],
                    owned: Mapping[str, list[Mapping[str, str]]]) -> tuple[str, str] | None:
    """(service, matcher key) of the first service (in case order) every matcher of which holds for
    ``pod`` but that one, whose value is near those of the service's own pods; else None."""
    for name, service in services.items():
        failing = [k for k, pattern in service.match.items() if not _matches(pattern, pod.get(k, ""))]
        if len(failing) != 1:
            continue
        key = failing[0]
        values = [p.get(key, "") for p in owned.get(name, ())]
        if _close(pod.get(key, ""), values):
            return name, key
    return None


def _near_text(found: tuple[str, str], services: Mapping[str, Service]) -> str:
    name, key = found
    return f"nearest service {text(name)}: {_written(key, services[name].match[key])} does not hold"


def _close(value: str, values: Sequence[str]) -> bool:
    """``value`` is near one of ``values``: the same first word, or a difflib ratio of at least NEAR."""
    if not value:
        return False
    word = _first_word(value)
    return any(word and _first_word(v) == word for v in values) or bool(
        difflib.get_close_matches(value, list(dict.fromkeys(values)), n=1, cutoff=NEAR))


def _first_word(value: str) -> str:
    return re.split(r"[-_.]", value, maxsplit=1)[0]


def pod_name(labels: Mapping[str, str]) -> str:
    """A pod as the warning names it: namespace/pod, or the pod alone."""
    namespace, pod = labels.get("namespace", ""), labels.get("pod", "")
    return f"{namespace}/{pod}" if namespace else pod


def unread_pods(series: pd.DataFrame, pods: Sequence[Mapping[str, str]], name: str,
                service: Service) -> pd.DataFrame:
    """The rows of ``Telemetry.series_labels`` naming a pod no table the split reads names (``pods``:
    :func:`audit.fit.pod_labels`; a pod only on an evidence gauge, e.g. DRAM activity) that service
    ``name``'s matchers all hold for."""
    if not len(series):
        return series
    read = {(p.get("namespace", ""), p.get("pod", "")) for p in pods}
    keep = [bool(pod) and (ns, pod) not in read
            and service_of({"namespace": ns, "pod": pod, "container": "", "model_name": ""}, {name: service}, {}) == name
            for ns, pod in zip(series["namespace"].astype(str), series["pod"].astype(str))]
    return series[keep]


def pods_elsewhere(series: pd.DataFrame) -> tuple[str, list[str]]:
    """The pods telemetry names only on series no table of pods reads (``Telemetry.series_labels``),
    each with its namespace, node and series names, and the pods themselves ("" and [] where none)."""
    named = series[series["pod"].astype(str) != ""] if len(series) else series
    if not len(named):
        return "", []
    parts, pods = [], []
    for (namespace, pod), rows in named.groupby(["namespace", "pod"], sort=True):
        nodes = sorted({str(n) for n in rows["node"] if str(n)})
        where = f" in {text(namespace)}" if namespace else ""
        on = f" on node {listing(nodes)}" if nodes else ""
        metrics = sorted({str(m) for m in rows["metric"]})
        parts.append(f"pod {text(pod)}{where}{on}, only on {listing(metrics)}")
        pods.append(text(pod))
    return "; ".join(parts[:LISTED]) + (f" … ({len(parts) - LISTED} more)" if len(parts) > LISTED else ""), pods[:LISTED]
