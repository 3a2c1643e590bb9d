"""MIG instances the GPU split cannot read whole: requests for a MIG profile, instances of unknown profile.

- The device plugin's mixed strategy lets a pod ask the scheduler for a MIG instance by its profile
  (``nvidia.com/mig-3g.40gb``; kube-state-metrics' ``nvidia_com_mig_3g_40gb``: the requests table's
  ``mig_profile``). Such a request holds an unlabelled MIG instance of its profile on its node, its
  compute-slice share (METHOD §3: allocation from the scheduler's requests; a MIG instance is its
  share), and requests for one profile share that profile's unlabelled instances as requests share a
  node's unlabelled GPUs (audit/gpusplit.py ``GpuSplitter._mig_held``). A request no such instance
  takes holds nothing and is named (``mig_request_unplaced``, rule 5). A whole-GPU request
  (``nvidia.com/gpu``) on such a node holds only GPUs not in MIG mode (:func:`whole_gpu_units`).
- A MIG instance without a readable ``GPU_I_PROFILE`` has no known share: audit/gpuunits.py splits
  what the instances of known profile leave equally among such instances, and
  :class:`MigLedger` names each GPU where it did (``mig_profile_unknown``).
"""
from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from audit.gpuunits import instance_profile, pod_name, units_of, whole_weight
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


def whole_gpu_units(free: list, units: list, requests: list | None) -> tuple[list, set[int]]:
    """The unlabelled units of ``free`` that requests for whole GPUs (``nvidia.com/gpu``) may hold (none
    where ``requests`` is None: no such request to place), and the ids of those no such request may
    hold, which stay unallocated.
    Under the device plugin's mixed strategy (the node's observed ``units`` include a GPU not in MIG
    mode, or a pod on it asks for a MIG profile: its ``requests``) ``nvidia.com/gpu`` counts only the
    GPUs not in MIG mode, whose series carry no GPU_I_ID: a MIG instance is asked for by its profile,
    and one no such request took is unallocated, not a whole-GPU pod's. Under the single strategy
    (every GPU of the node in MIG mode, no profile asked for) ``nvidia.com/gpu`` is what the device
    plugin gives MIG instances as: all of ``free``."""
    if requests is None:
        whole = []
    elif all(instance_profile(u.row) is not None for u in units) and not any(asked_profile(r) for r in requests):
        whole = free
    else:
        whole = [u for u in free if instance_profile(u.row) is None]
    return whole, {id(u) for u in free} - {id(u) for u in whole}


class MigLedger:
    """What the split could not read whole on MIG GPUs, for the warnings: requests no instance of their
    profile took, per node; instances of unknown profile, per GPU."""

    def __init__(self, step: int):
        #: the telemetry interval in seconds: a span of intervals ends where its last one does
        self.step = timedelta(seconds=step)
        #: node -> MIG profile -> (pods, intervals, the node's unlabelled instances' profiles then)
        self.unplaced: dict[str, dict[str, tuple[set, set, set]]] = {}
        #: (node, GPU) -> (instances, pods, intervals) of MIG instances of unknown profile
        self.unknown: dict[tuple[str, str], tuple[set, set, set]] = {}
        #: node -> MIG profile -> instance ("GPU 0 instance 1") -> the intervals it was sampled in
        self.instances: dict[str, dict[str, dict[str, set]]] = {}
        #: node -> (pods, intervals, the unlabelled MIG instances' profiles then) of whole-GPU requests
        #: that no GPU outside MIG mode took beside MIG instances they may not hold (:func:`whole_gpu_units`)
        self.whole: dict[str, tuple[set, set, set]] = {}

    def units(self, device: list) -> list:
        """The units of one physical GPU (:func:`audit.gpuunits.units_of`), its MIG instances and those
        of unknown profile noted."""
        for row in device:
            profile = instance_profile(row)
            if profile:
                seen = self.instances.setdefault(row.node, {}).setdefault(profile, {})
                seen.setdefault(f"GPU {row.gpu} instance {row.uuid.rsplit('/', 2)[1]}", set()).add(row.ts)
        units, share = units_of(device)
        if share is not None and share.unknown:
            instances, pods, times = self.unknown.setdefault((share.node, share.gpu), (set(), set(), set()))
            instances.update(share.unknown)
            pods.update(share.pods)
            times.add(device[0].ts)
        return units

    def unplaced_at(self, node: str, ts: datetime, profile: str, pods: list[str], free: list, units: list) -> None:
        """Requests of ``pods`` for ``profile`` that no unlabelled instance on the node (``free``: those
        the requests before them left) took in ``ts``. Not where none of the node's observed ``units``
        then is a MIG instance: the exporter was silent on its MIG GPUs, which are unmeasured
        (no_activity_sample), not misplaced."""
        if all(instance_profile(u.row) is None for u in units):
            return
        named, times, seen = self.unplaced.setdefault(node, {}).setdefault(profile, (set(), set(), set()))
        named.update(pods)
        times.add(ts)
        seen.update(instance_profile(u.row) or "?" for u in free if instance_profile(u.row) is not None)

    def whole_unplaced_at(self, node: str, ts: datetime, requests: list, instances: list) -> None:
        """Whole-GPU ``requests`` (after pooling: what each still asks for) left unplaced in ``ts`` on a
        node whose unlabelled MIG ``instances`` they may not hold (the mixed strategy)."""
        pods = [pod_name(req) for req in requests if req.gpus > 0]
        if pods and instances:
            named, times, seen = self.whole.setdefault(node, (set(), set(), set()))
            named.update(pods)
            times.add(ts)
            seen.update(instance_profile(u.row) or "?" for u in instances)

    def misfits(self) -> list[Misfit]:
        """``mig_request_unplaced`` per node, ``whole_gpu_request_unplaced`` per node, then
        ``mig_profile_unknown`` per GPU, in node order."""
        return ([unplaced_misfit(node, found, self.instances.get(node, {}), self.step)
                 for node, found in sorted(self.unplaced.items())]
                + [whole_unplaced_misfit(node, *found, self.step) for node, found in sorted(self.whole.items())]
                + [unknown_profile_misfit(*key, *found, self.step) for key, found in sorted(self.unknown.items())])


def _span(times: set, step: timedelta) -> str:
    """How many intervals, from the start of the first to the end of the last."""
    return (f"{len(times)} interval{'s' if len(times) > 1 else ''} "
            f"({min(times):%Y-%m-%d %H:%M} – {max(times) + step:%Y-%m-%d %H:%M} UTC)")


def unplaced_misfit(node: str, found: dict[str, tuple[set, set, set]], instances: dict[str, dict[str, set]],
                    step: timedelta) -> Misfit:
    """A ``mig_request_unplaced`` warning: ``found`` (profile -> pods, intervals, the profiles of the
    node's unlabelled MIG instances then) are MIG requests that no unlabelled instance of their profile
    on the node takes in intervals where the node's MIG instances were sampled; they hold nothing, and
    the node's GPU time stays with the pod labels, the other requests and unallocated (rule 5: named,
    with the instances the node does have: ``instances`` (profile -> instance -> intervals sampled) of
    the requested profiles in the window, else the unlabelled ones then)."""
    parts, seen, alike = [], set(), []
    for profile, (pods, times, there) in sorted(found.items()):
        seen |= there
        parts.append(f"{text(profile)} by {listing(sorted(pods))} in {_span(times, step)}")
        alike += [(f"{name} ({profile})", at) for name, at in sorted(instances.get(profile, {}).items())]
    elsewhere = "".join(f"; {text(name)} in {_span(at, step)}" for name, at in alike)
    nearest = [name for name, _ in alike] or sorted(seen)
    return Misfit("mig_request_unplaced", f"node {text(node)}",
                  f"node {text(node)}: the scheduler's MIG requests ({'; '.join(parts)}) find no MIG instance of "
                  f"their profile without a DCGM pod label on the node (its unlabelled MIG instances then: "
                  f"{listing(sorted(seen))}; its instances of those profiles sampled in the window: "
                  f"{elsewhere[2:] or 'none'}): they hold none of its GPU time, which stays with the pod labels, "
                  "the other requests and unallocated", tuple(text(p) for p in nearest[:LISTED]))


def whole_unplaced_misfit(node: str, pods: set, times: set, profiles: set, step: timedelta) -> Misfit:
    """A ``whole_gpu_request_unplaced`` warning: whole-GPU requests (``nvidia.com/gpu``) of ``pods``
    that no unlabelled GPU outside MIG mode on the node took in ``times``, beside unlabelled MIG
    instances (of ``profiles``) that under the mixed strategy only a request for their profile holds:
    those stay unallocated, and the requests hold none of the node's observed GPU time (rule 5: named,
    with the instances the node does have)."""
    return Misfit("whole_gpu_request_unplaced", f"node {text(node)}",
                  f"node {text(node)}: the scheduler's whole-GPU requests (nvidia.com/gpu) by {listing(sorted(pods))} "
                  f"in {_span(times, step)} find no GPU outside MIG mode without a DCGM pod label on the node (its "
                  f"unlabelled MIG instances then: {listing(sorted(profiles))}, which only a request for their "
                  "profile holds under the mixed strategy: unallocated): they hold none of its observed GPU time, "
                  "only its GPUs billed without a sample where it has them", tuple(sorted(profiles))[:LISTED])


def unknown_profile_misfit(node: str, gpu: str, instances: set, pods: set, times: set, step: timedelta) -> Misfit:
    """A ``mig_profile_unknown`` warning: GPU ``gpu`` of the node is split into MIG instances some of
    which carry no readable ``GPU_I_PROFILE``, so their compute slices are unknown: they shared equally
    what the instances of known profile leave, no slice assumed free (audit/gpuunits.py ``_mig_units``)."""
    return Misfit("mig_profile_unknown", f"node {text(node)} GPU {text(gpu)}",
                  f"node {text(node)} GPU {text(gpu)}: the MIG instances (GPU_I_ID) {listing(sorted(instances))} "
                  f"carry no readable GPU_I_PROFILE in {_span(times, step)}, so their compute slices are unknown: the "
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
