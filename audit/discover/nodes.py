"""Whether the billed GPU machines and the telemetry's nodes meet, and the ``[nodes]`` that make them.

The audit finds a billed machine's GPUs in telemetry by the identifiers both sides carry
(METHOD §2): the resource key of the line's ResourceId and of the node's ``provider_id``
(:func:`audit.lines.resource_key`), or a ``[nodes]`` entry. Where they do not meet, a ``[nodes]``
entry is proposed when one identifier still ties them (the line's ResourceName is the node's
instance name, as on GCP), or when one node and one billed machine are left of one instance type
(or, for nodes with no instance type, of one GPU count); every other node and machine is listed
with the identifiers it carries, so the user can write the entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from audit.discover.billing import GpuResource
from audit.discover.read import Read
from audit.lines import resource_key


@dataclass
class Node:
    """A telemetry node and what its sources say of it."""

    name: str
    provider_id: str = ""
    resource_id: str = ""
    instance_type: str = ""
    gpus: set[str] = field(default_factory=set)
    gpu_model: str = ""


@dataclass(frozen=True)
class NodeLink:
    """A proposed ``[nodes]`` entry and why."""

    node: str
    resource_id: str
    why: str


@dataclass
class NodeFit:
    """Links proposed, and what could not be tied, said in words."""

    links: list[NodeLink] = field(default_factory=list)
    met: list[str] = field(default_factory=list)
    unmet: list[str] = field(default_factory=list)


def telemetry_nodes(reads: list[Read]) -> dict[str, Node]:
    """Every node a telemetry source names, with its provider id, instance type and GPUs."""
    nodes: dict[str, Node] = {}
    for read in reads:
        if read.source.kind != "telemetry" or read.frame is None:
            continue
        info = read.tables.get("node_info")
        if info is not None:
            for r in info.itertuples(index=False):
                node = nodes.setdefault(str(r.node), Node(str(r.node)))
                node.provider_id = node.provider_id or str(r.provider_id)
                node.resource_id = node.resource_id or str(r.resource_id)
                node.instance_type = node.instance_type or str(r.instance_type)
        _gpus(nodes, read)
    return nodes


def _gpus(nodes: dict[str, Node], read: Read) -> None:
    activity = read.tables.get("gpu_activity")
    if activity is not None and len(activity):
        for (name, uuid, gpu, model), _ in activity.groupby(["node", "uuid", "gpu", "model_name"], sort=False):
            node = nodes.setdefault(str(name), Node(str(name)))
            node.gpus.add(str(uuid) or str(gpu))
            node.gpu_model = node.gpu_model or str(model)
    requests = read.tables.get("gpu_requests")
    if requests is not None and len(requests):
        for name, rows in requests[requests["gpus"] > 0].groupby("node", sort=False):
            node = nodes.setdefault(str(name), Node(str(name)))
            if not node.gpus:
                held = int(round(float(rows.groupby("ts")["gpus"].sum().max())))
                node.gpus = {f"requested-{i}" for i in range(held)}


def fit_nodes(resources: dict[str, GpuResource], nodes: dict[str, Node], declared: dict[str, str]) -> NodeFit:
    """Which billed GPU machines meet which nodes; ``[nodes]`` entries where they can be told."""
    fit = NodeFit()
    declared_keys = {resource_key(v) for v in declared.values()}
    left_r = dict(resources)
    left_n = {n.name: n for n in nodes.values() if n.gpus or n.resource_id}
    for node in list(left_n.values()):
        key = resource_key(node.resource_id)
        if key and key in left_r:
            fit.met.append(f"{node.name} = {left_r[key].resource_id} (by provider_id)")
            del left_r[key], left_n[node.name]
        elif node.name in declared:
            fit.met.append(f"{node.name} = {declared[node.name]} (by the case's [nodes])")
            left_r.pop(resource_key(declared[node.name]), None)
            del left_n[node.name]
    for key in [k for k in left_r if k in declared_keys]:
        del left_r[key]
    _by_name(fit, left_r, left_n)
    _by_type(fit, left_r, left_n)
    for node in sorted(left_n.values(), key=lambda n: n.name):
        if node.gpus:
            fit.unmet.append(f"telemetry node {node.name}: {describe_node(node)}; meets no billed GPU machine")
    for r in sorted(left_r.values(), key=lambda r: r.key):
        fit.unmet.append(f"billed GPU machine {r.resource_id}: {describe_resource(r)}; meets no telemetry node")
    return fit


def _by_name(fit: NodeFit, left_r: dict[str, GpuResource], left_n: dict[str, Node]) -> None:
    """A line whose ResourceName (or reduced id) is the node's instance name or node name."""
    for node in list(left_n.values()):
        names = {node.name, node.resource_id} - {""}
        hits = [r for r in left_r.values() if {r.resource_name, r.key} & names]
        if len(hits) == 1:
            fit.links.append(NodeLink(node.name, hits[0].resource_id,
                                      f"the line's ResourceName {hits[0].resource_name or hits[0].key!r} is the "
                                      f"node's instance name (provider_id {node.provider_id or 'none'})"))
            del left_r[hits[0].key], left_n[node.name]


def _by_type(fit: NodeFit, left_r: dict[str, GpuResource], left_n: dict[str, Node]) -> None:
    """One node and one billed machine left of one instance type (or GPU count): they are one."""
    for node in sorted(left_n.values(), key=lambda n: n.name):
        if not node.gpus:
            continue
        if node.instance_type:
            peers = [n for n in left_n.values() if n.instance_type == node.instance_type and n.gpus]
            hits = [r for r in left_r.values() if r.instance_type == node.instance_type]
            what = f"instance type {node.instance_type}"
        else:
            peers = [n for n in left_n.values() if not n.instance_type and len(n.gpus) == len(node.gpus)]
            hits = [r for r in left_r.values() if r.gpus == len(node.gpus) and _same_model(r, node)]
            what = f"{len(node.gpus)} GPU(s){' ' + node.gpu_model if node.gpu_model else ''}"
        if len(peers) == 1 and len(hits) == 1:
            r = hits[0]
            fit.links.append(NodeLink(node.name, r.resource_id, f"the only telemetry node and the only billed GPU "
                                      f"machine of {what} left unmatched ({r.gpu_hours:.1f} GPU-hours billed)"))
            del left_r[r.key], left_n[node.name]


def _same_model(resource: GpuResource, node: Node) -> bool:
    if not resource.gpu_model or not node.gpu_model:
        return True
    return resource.gpu_model.lower().replace("nvidia", "").strip() in node.gpu_model.lower()


def describe_node(node: Node) -> str:
    parts = [f"provider_id {node.provider_id!r}" if node.provider_id else "no provider_id (no kube_node_info)",
             f"instance type {node.instance_type}" if node.instance_type else "no instance type",
             f"{len(node.gpus)} GPU(s)" + (f" {node.gpu_model}" if node.gpu_model else "")]
    return ", ".join(parts)


def describe_resource(r: GpuResource) -> str:
    parts = [f"ResourceName {r.resource_name!r}" if r.resource_name else "no ResourceName",
             f"instance type {r.instance_type}" if r.instance_type else "no instance type",
             f"{r.gpus} GPU(s) {r.gpu_model}".strip() if r.gpus else (r.gpu_model or "GPU meter"),
             f"{r.gpu_hours:.1f} GPU-hours"]
    return ", ".join(parts)
