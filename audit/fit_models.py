"""Whether billing and telemetry agree on the GPU model of each node they join (no silent misfit).

A billed GPU resource is joined to a telemetry node by the identifiers both sides carry (METHOD §2:
the instance id, the GCP instance name, the scale-set instance, ``[nodes]``); the join says nothing
of what the machine is. A bill of T4 GPU-hours joined to a node whose exporter reports NVIDIA L4
splits the T4's money by the L4's activity: either the join or the bill is wrong, and the figures
read as right. :func:`gpu_models_fit` compares the GPU model classification gives each GPU line
(audit/classify.py: the shipped catalogue of instance types, or the GPU SKU) with the model telemetry
reports for each node its resource joins: DCGM's ``modelName`` label, else (a node whose GPUs report
none) the shipped catalogue's model of the instance type its kube node label gives. Models are
compared by family (audit/fit_profiles.py ``family``: "NVIDIA L4" is L4, "NVIDIA H100 80GB HBM3" and
"H100 80GB" are H100, "Tesla T4" is T4); where either side names no family, nothing is said. Each
node whose billed family telemetry does not report gets a ``billed_gpu_model`` warning naming the
node, the billed model with its first line, and the telemetry's model (the nearest value).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import pandas as pd

from audit.fit_profiles import family
from audit.lines import resource_key
from audit.misfit import Misfit, text
from audit.normalised import NodeMap, Telemetry, node_types
from connectors.billing.catalogue import gpu_instances, normalise_instance
from schemas.billing import line_total

#: the columns of a GPU line the warning reads (machine_type where classification gave it)
BILLED_COLUMNS = ("resource_id", "gpu_model", "line_id", "charge_description")


@dataclass(frozen=True)
class Billed:
    """A GPU model billed on one resource: its lines counted, the first named."""

    model: str
    lines: int
    line_id: str
    description: str
    machine: str


def gpu_models_fit(gpu_lines: pd.DataFrame, tele: Telemetry, nodes: NodeMap) -> list[Misfit]:
    """A ``billed_gpu_model`` warning per joined node whose telemetry reports another GPU model
    family than a GPU line of its resource bills."""
    if not len(gpu_lines) or not set(BILLED_COLUMNS) <= set(gpu_lines.columns):
        return []
    reported = reported_models(tele)
    out = []
    for key, billed in billed_models(gpu_lines).items():
        for node in nodes.nodes_of.get(key, ()):
            models, source = reported.get(node, ((), ""))
            families = {family(m) for m in models} - {""}
            if family(billed.model) and families and family(billed.model) not in families:
                out.append(_mismatch(node, key, billed, models, source))
    return out


def billed_models(gpu_lines: pd.DataFrame) -> dict[str, Billed]:
    """resource key -> the GPU model its GPU lines bill (the first line that names one), with how many
    lines bill that model and the machine the first names."""
    named = gpu_lines[gpu_lines["gpu_model"].fillna("").astype(str) != ""]
    out: dict[str, Billed] = {}
    for (rid, model), rows in named.groupby(["resource_id", "gpu_model"], sort=False):
        key = resource_key(str(rid))
        if not key or key in out:
            continue
        first = rows.iloc[0]
        machine = str(first.get("machine_type", "") or first.get("instance_type", "") or "")
        out[key] = Billed(str(model), line_total(rows), str(first["line_id"]), str(first["charge_description"]),
                          machine)
    return out


def reported_models(tele: Telemetry) -> dict[str, tuple[tuple[str, ...], str]]:
    """node -> (the GPU models telemetry reports for it, which source says so)."""
    out: dict[str, tuple[tuple[str, ...], str]] = {}
    catalogue, kinds = gpu_instances(), node_types(tele.nodes)
    for node, kind in kinds.items():
        found = catalogue.get(normalise_instance(kind))
        if found is not None and found.gpu_model:
            out[node] = ((found.gpu_model,), f"the shipped catalogue's model of instance type {text(kind)}, "
                                             "its kube node label")
    activity = tele.activity
    if len(activity) and {"node", "model_name"} <= set(activity.columns):
        pairs = activity[["node", "model_name"]].drop_duplicates()  # a row per GPU-interval repeats them
        dcgm: dict[str, set[str]] = {}
        for node, model in zip(pairs["node"].astype(str), pairs["model_name"].fillna("").astype(str)):
            if model:
                dcgm.setdefault(node, set()).add(model)
        out.update({node: (tuple(sorted(models)), "DCGM modelName" + (
            f"; instance type {text(kinds[node])} in its kube node label" if node in kinds else ""))
            for node, models in dcgm.items()})
    return out


def _mismatch(node: str, key: str, billed: Billed, models: tuple[str, ...], source: str) -> Misfit:
    machine = f"{text(billed.machine)}, " if billed.machine else ""
    shown = ", ".join(text(m) for m in models)
    message = (f"node {text(node)} is billed as {text(billed.model)} ({machine}{billed.lines:,} line(s) of resource "
               f"{text(key)}, the first {text(billed.line_id)} \"{text(billed.description)}\"), but telemetry "
               f"reports {shown} ({source}) on it: the bill's GPU-hours and money are split by another GPU model's "
               f"activity, so the join of the resource to the node or the bill is wrong; [nodes] can join the "
               f"resource to the node it is")
    return Misfit("billed_gpu_model", f"node {text(node)}", message, tuple(text(m) for m in models))


def node_gpu_models(tele: Telemetry) -> dict[str, set[str]]:
    """node -> every GPU model telemetry reports for it: :func:`reported_models`, and the ``modelName``
    of any series a family reads (``Telemetry.series_labels``: a GPU named only on evidence gauges)."""
    out = {node: set(models) for node, (models, _) in reported_models(tele).items()}
    named = tele.series_labels
    if len(named):
        for node, model in named[["node", "gpu_model"]].drop_duplicates().itertuples(index=False):
            if str(node) and str(model):
                out.setdefault(str(node), set()).add(str(model))
    return out


def same_model_nodes(billed: str, node_models: Mapping[str, set[str]]) -> list[str]:
    """The telemetry nodes whose GPU model family is the billed one's (none where it names no family)."""
    wanted = family(billed) if billed else ""
    return sorted(node for node, models in node_models.items() if wanted and wanted in {family(m) for m in models})
