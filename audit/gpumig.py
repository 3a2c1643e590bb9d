"""MIG instances the GPU split cannot read whole: requests for a MIG profile, instances of unknown profile.

- The device plugin's mixed strategy lets a pod ask the scheduler for a MIG instance by its profile
  (``nvidia.com/mig-3g.40gb``; kube-state-metrics' ``nvidia_com_mig_3g_40gb``: the requests table's
  ``mig_profile``). Such a request holds an unlabelled MIG instance of its profile on its node, its
  compute-slice share (METHOD §3: allocation from the scheduler's requests; a MIG instance is its
  share), and requests for one profile share that profile's unlabelled instances as requests share a
  node's unlabelled GPUs (audit/gpusplit.py ``GpuSplitter._mig_held``). A request no such instance
  takes holds nothing and is named (``mig_request_unplaced``, rule 5).
- A MIG instance without a readable ``GPU_I_PROFILE`` has no known share: audit/gpuunits.py splits
  what the instances of known profile leave equally among such instances, and
  :class:`MigLedger` names each GPU where it did (``mig_profile_unknown``).
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from audit.gpuunits import instance_profile, units_of, whole_weight
from audit.misfit import LISTED, Misfit, listing, text


def asked_profile(req) -> str:
    """The MIG profile a request asks for; "" for whole GPUs (also where its table has no
    ``mig_profile`` column: a table built by hand)."""
    return getattr(req, "mig_profile", "")


def mig_groups(free: list, pending: list, placeable: list[int]) -> list[tuple[str, list[int], list]]:
    """(profile, indices of ``pending`` asking for it, the unlabelled units of that profile) per MIG
    profile the requests at ``placeable`` ask for, in the requests' order. Each request's count of
    instances becomes the GPU share it holds (an instance's mean weight each), so that the requests
    share the units as requests share whole GPUs."""
    out = []
    for profile in dict.fromkeys(asked_profile(pending[i]) for i in placeable if asked_profile(pending[i])):
        wanted = [i for i in placeable if asked_profile(pending[i]) == profile]
        slots = [u for u in free if instance_profile(u.row) == profile]
        if slots:
            each = sum((u.weight for u in slots), Decimal(0)) / len(slots)
            for i in wanted:
                pending[i] = pending[i]._replace(gpus=whole_weight(pending[i].gpus * each))
        out.append((profile, wanted, slots))
    return out


class MigLedger:
    """What the split could not read whole on MIG GPUs, for the warnings: requests no instance of their
    profile took, per node; instances of unknown profile, per GPU."""

    def __init__(self):
        #: node -> MIG profile -> (pods, intervals, the node's unlabelled instances' profiles then)
        self.unplaced: dict[str, dict[str, tuple[set, set, set]]] = {}
        #: (node, GPU) -> (instances, pods, intervals) of MIG instances of unknown profile
        self.unknown: dict[tuple[str, str], tuple[set, set, set]] = {}

    def units(self, device: list) -> list:
        """The units of one physical GPU (:func:`audit.gpuunits.units_of`), its instances of unknown
        profile noted."""
        units, share = units_of(device)
        if share is not None and share.unknown:
            instances, pods, times = self.unknown.setdefault((share.node, share.gpu), (set(), set(), set()))
            instances.update(share.unknown)
            pods.update(share.pods)
            times.add(device[0].ts)
        return units

    def unplaced_at(self, node: str, ts: datetime, profile: str, pods: list[str], free: list) -> None:
        """Requests of ``pods`` for ``profile`` that no unlabelled instance on the node took in ``ts``."""
        named, times, seen = self.unplaced.setdefault(node, {}).setdefault(profile, (set(), set(), set()))
        named.update(pods)
        times.add(ts)
        seen.update(instance_profile(u.row) or "?" for u in free if instance_profile(u.row) is not None)

    def misfits(self) -> list[Misfit]:
        """``mig_request_unplaced`` per node, then ``mig_profile_unknown`` per GPU, in node order."""
        return ([unplaced_misfit(node, found) for node, found in sorted(self.unplaced.items())]
                + [unknown_profile_misfit(*key, *found) for key, found in sorted(self.unknown.items())])


def _span(times: set) -> str:
    """How many intervals, and the first and last."""
    return (f"{len(times)} interval{'s' if len(times) > 1 else ''} "
            f"({min(times):%Y-%m-%d %H:%M} – {max(times):%Y-%m-%d %H:%M} UTC)")


def unplaced_misfit(node: str, found: dict[str, tuple[set, set, set]]) -> Misfit:
    """A ``mig_request_unplaced`` warning: ``found`` (profile -> pods, intervals, the profiles of the
    node's unlabelled MIG instances then) are MIG requests that no unlabelled instance of their profile
    on the node takes; they hold nothing, and the node's GPU time stays with the pod labels, the other
    requests and unallocated (rule 5: named, with the instances the node does have)."""
    parts, seen = [], set()
    for profile, (pods, times, there) in sorted(found.items()):
        seen |= there
        parts.append(f"{text(profile)} by {listing(sorted(pods))} in {_span(times)}")
    return Misfit("mig_request_unplaced", f"node {text(node)}",
                  f"node {text(node)}: the scheduler's MIG requests ({'; '.join(parts)}) find no MIG instance of "
                  f"their profile without a DCGM pod label on the node (its unlabelled MIG instances: "
                  f"{listing(sorted(seen))}): they hold none of its GPU time, which stays with the pod labels, "
                  "the other requests and unallocated", tuple(text(p) for p in sorted(seen)[:LISTED]))


def unknown_profile_misfit(node: str, gpu: str, instances: set, pods: set, times: set) -> Misfit:
    """A ``mig_profile_unknown`` warning: GPU ``gpu`` of the node is split into MIG instances some of
    which carry no readable ``GPU_I_PROFILE``, so their compute slices are unknown: they shared equally
    what the instances of known profile leave, no slice assumed free (audit/gpuunits.py ``_mig_units``)."""
    return Misfit("mig_profile_unknown", f"node {text(node)} GPU {text(gpu)}",
                  f"node {text(node)} GPU {text(gpu)}: the MIG instances (GPU_I_ID) {listing(sorted(instances))} "
                  f"carry no readable GPU_I_PROFILE in {_span(times)}, so their compute slices are unknown: the "
                  "slices the instances of known profile leave were split equally among them (assumed, no slice "
                  "free; METHOD §3 splits a shared GPU evenly where nothing measures each part), held by the "
                  f"pods {listing(sorted(pods))}", tuple(text(p) for p in sorted(pods)[:LISTED]))


def mig_request_notes(requests) -> list[str]:
    """One note per node whose pods asked the scheduler for MIG instances by profile (the requests
    table's ``mig_profile``), in node order: the profiles and pods, and what such a request holds
    (those no instance took are the ``mig_request_unplaced`` warning's)."""
    if not len(requests) or "mig_profile" not in requests:
        return []
    asked = requests.loc[((requests["mig_profile"] != "") & (requests["gpus"] > 0)).to_numpy(dtype=bool)]
    out = []
    for node, rows in asked.groupby("node", sort=True):
        named = rows["namespace"].str.cat(rows["pod"], sep="/").where(rows["namespace"] != "", rows["pod"])
        parts = "; ".join(f"{text(profile)} by {listing(sorted(set(pods)))}"
                          for profile, pods in named.groupby(rows["mig_profile"], sort=True))
        out.append(f"MIG instances requested through the scheduler on node {text(node)} ({parts}): each "
                   "request holds an instance of its profile without a DCGM pod label on the node, that "
                   "instance's compute slices of the GPU (where none does: fit mig_request_unplaced).")
    return out
