"""Whether each profile was recorded on the GPU model its service runs on.

A profile's kernel-active time and gap ratio (METHOD §3) describe the GPU it was recorded on: an H100
trace attached to a service that runs on L40S splits the L40S GPU time by an H100's figures, and
nothing in the case matches nothing. :func:`profile_gpu_fit` compares the GPU the trace names (Kineto
``deviceProperties``, Nsight Systems ``TARGET_INFO_GPU``) with the GPU models of the service's nodes
(the billing's GPU lines of the resources those nodes are, else the node's instance type in
telemetry) by model family (H100, L40S, A10G, MI300X …) and warns where they differ
(``profile_gpu_model``). Where either side names no model, nothing is said.

One profile per service gives its gap ratio and kernel figures, the first declared:
:func:`profiles_unused_fit` names every later profile of the same service (``profile_unused``), and
:func:`profiles_uncounted_fit` each profile in use that states no ``requests`` count
(``profile_requests_missing``): its kernel-seconds per request, and so the reconciliation, go unmeasured.
"""
from __future__ import annotations

import re
from typing import Mapping

import numpy as np
import pandas as pd

from audit.case import Case
from audit.collected import Collected
from audit.lines import resource_key
from audit.misfit import LISTED, Misfit, text
from audit.normalised import NodeMap, Telemetry, node_types
from audit.services import telemetry_owners
from connectors.billing.catalogue import gpu_instances, normalise_instance

#: GPU model families, longest first where one name starts another (A10G before A10, L40S before L4)
FAMILY_RE = re.compile(r"(?i)(?<![A-Z0-9])(GB200|B200|B100|H200|H100|H800|H20|A800|A100|A40|A30|A10G|A10|L40S|L40|L4|"
                       r"RTX PRO 6000|T4G|T4|V100|P100|P40|P4|K80|M60|MI325X|MI300X|MI300A|MI250X|MI250|MI210|MI100|"
                       r"Inferentia2|Inferentia|Trainium2|Trainium)(?![A-Z0-9])")


def family(name: str) -> str:
    """The GPU model family a device or catalogue name holds, upper case ('' when none)."""
    found = FAMILY_RE.search(name or "")
    return found.group(1).upper() if found else ""


def profile_gpu_fit(case: Case, devices: Mapping[str, tuple[str, str]], gpu_lines: pd.DataFrame,
                    tele: Telemetry, nodes: NodeMap, owners: np.ndarray | None = None) -> list[Misfit]:
    """A ``profile_gpu_model`` warning per profile recorded on another GPU model than its service's.
    ``devices``: profile name -> (service, the device name its trace gives)."""
    out = []
    for name, (service, device) in devices.items():
        recorded = family(device)
        if not recorded or service not in case.services:
            continue
        if owners is None:
            owners = telemetry_owners(tele.activity, tele.traffic, case.services)
        models = service_models(case, service, gpu_lines, tele, nodes, owners)
        runs = {family(m) for m in models} - {""}
        if not runs or recorded in runs:
            continue
        shown = ", ".join(text(m) for m in sorted(models)[:LISTED])
        message = (f"profile {text(name)} was recorded on {text(device)} ({recorded}), but service {text(service)} runs "
                   f"on {shown}: the kernel-active time and gap ratio of one GPU model do not describe another, so "
                   f"the share of {text(service)}'s GPU time read as model compute is another GPU's; a profile "
                   f"recorded on {', '.join(sorted(runs))} fits")
        out.append(Misfit("profile_gpu_model", f"profile {text(name)}", message, tuple(sorted(runs))))
    return out


def service_models(case: Case, service: str, gpu_lines: pd.DataFrame, tele: Telemetry, nodes: NodeMap,
                   owners: np.ndarray) -> set[str]:
    """The GPU models of the nodes a service's pods ran on: from the GPU lines billing those nodes'
    resources, else from the node's instance type in telemetry."""
    activity = tele.activity
    if not len(activity) or "node" not in activity.columns:
        return set()
    on = {str(n) for n in activity["node"].to_numpy()[owners == service]}
    billed: dict[str, set[str]] = {}
    if on and len(gpu_lines) and {"resource_id", "gpu_model"} <= set(gpu_lines.columns):
        pairs = gpu_lines[["resource_id", "gpu_model"]].drop_duplicates()
        for resource, model in zip(pairs["resource_id"], pairs["gpu_model"]):
            for node in nodes.nodes_of.get(resource_key(str(resource)), ()):
                if model:
                    billed.setdefault(node, set()).add(str(model))
    types, catalogue = node_types(tele.nodes), gpu_instances()
    models: set[str] = set()
    for node in on:
        found = billed.get(node)
        kind = normalise_instance(types.get(node, ""))
        if not found and kind in catalogue:
            found = {catalogue[kind].gpu_model}
        models |= found or set()
    return models


def devices_of(collected: Collected) -> dict[str, tuple[str, str]]:
    """Profile name -> (its service, the device name its trace gives: '' when it gives none)."""
    out = {}
    for frame in collected.of("profiles"):
        table = frame.tables.get("profile")
        device = str(table["device"].iloc[0]) if table is not None and len(table) and "device" in table.columns else ""
        out[frame.spec.name] = (str(frame.spec.options.get("service") or ""), device)
    return out


def profiles_unused_fit(case: Case) -> list[Misfit]:
    """A ``profile_unused`` warning per profile of a service that a profile declared before it
    already describes (it was dropped without a word): nearest, the profile in use."""
    first: dict[str, str] = {}
    out = []
    for source in case.sources:
        service = source.options.get("service") if source.kind == "profiles" else None
        if not isinstance(service, str):
            continue
        if service not in first:
            first[service] = source.name
            continue
        message = (f"profile {text(source.name)} is not used: service {text(service)}'s gap ratio and kernel figures "
                   f"come from profile {text(first[service])}, declared before it (one profile per service); declare "
                   "first the one recorded on traffic like the service's, or leave the other out")
        out.append(Misfit("profile_unused", f"profile {text(source.name)}", message, (text(first[service]),)))
    return out


def profiles_fit(case: Case) -> list[Misfit]:
    """The profiles declared and not used, then those in use that state no requests."""
    return profiles_unused_fit(case) + profiles_uncounted_fit(case)


def profiles_uncounted_fit(case: Case) -> list[Misfit]:
    """A ``profile_requests_missing`` warning per profile in use (the first of its service) that states
    no ``requests``: kernel-seconds per request divides by it, so the bottom-up cost per request cannot
    be reconciled (audit/reconcile.py: not_measured)."""
    seen: set[str] = set()
    out = []
    for source in case.sources:
        service = source.options.get("service") if source.kind == "profiles" else None
        if not isinstance(service, str) or service in seen:
            continue
        seen.add(service)
        if source.options.get("requests") is not None:
            continue
        message = (f"profile {text(source.name)} of service {text(service)} states no requests count: its "
                   "kernel-seconds per request cannot be measured, so the bottom-up cost per request cannot be "
                   "reconciled (reconciliation not_measured); give requests = N, the requests served in the "
                   "traced window")
        out.append(Misfit("profile_requests_missing", f"profile {text(source.name)}", message, ()))
    return out
