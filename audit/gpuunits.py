"""GPU units of a node's GPU in one interval: whole GPUs, MIG instances, time-shared GPUs.

A GPU's cost goes to its units by weight, the weights of one GPU summing to exactly 1 (METHOD §3):
- a whole GPU held by one pod (or none) is one unit of weight 1;
- a MIG instance (dcgm-exporter's ``GPU_I_ID`` / ``GPU_I_PROFILE``) weighs its compute slices over
  the GPU's 7 (3g.40gb = 3/7; an A30's 4), with its own activity; slices no instance holds are a unit no
  workload held (unallocated) for their share;
- a GPU time-sliced between pods (several pods' series of the GPU at once) goes to the pods by
  their share of the GPU's activity where it is measured per pod, else evenly (the exporter copies
  the device's value to every pod): the GPU's kernel-active time is counted once.
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, Mapping, NamedTuple

from audit.misfit import LISTED, Misfit, listing, text
from connectors.telemetry.families import mig_compute_slices, mig_slice
from connectors.telemetry.tables import is_mig_unit

ONE = Decimal(1)
EVEN = "split evenly (the exporter reports one value per device)"
BY_ACTIVITY = "split by each pod's share of the GPU's activity (measured per pod)"


class Unit(NamedTuple):
    """One holder's part of a GPU in an interval: the activity row (None: free MIG slices),
    its weight (share of the GPU's cost and time) and its kernel-active fraction of that share."""

    row: Any
    weight: Any  # int 1 for a whole GPU (outputs unchanged), else an exact-sum Decimal
    busy: Decimal


class Sharing(NamedTuple):
    """How a shared GPU was split, for the notes: node, GPU, kind, pods, method, and the MIG
    instances of unknown profile whose share was assumed."""

    node: str
    gpu: str
    kind: str  # "mig" or "time-sliced"
    pods: tuple[str, ...]
    method: str
    unknown: tuple[str, ...] = ()  # MIG instances (GPU_I_ID) of unknown profile, split equally


def device_key(row) -> tuple[str, str]:
    """The physical GPU a row belongs to: MIG instances of one GPU share (gpu index, device UUID)."""
    found = mig_slice(row.uuid)
    return (str(row.gpu), found[0] if found else row.uuid)


def devices(rows: list) -> list[list]:
    """The rows of one node and interval grouped per physical GPU, in first-seen order."""
    out: dict[tuple[str, str], list] = {}
    for row in rows:
        out.setdefault(device_key(row), []).append(row)
    return list(out.values())


def fraction(value: float) -> Decimal:
    """A kernel-active fraction as the split has always read it."""
    return Decimal(repr(float(value)))


def exact_weights(parts: list[Decimal], total: Decimal) -> list[Decimal]:
    """parts / total, the last one set so that the weights sum to exactly 1 (conservation)."""
    weights = [p / total for p in parts[:-1]]
    return weights + [ONE - sum(weights, Decimal(0))]


def units_of(device: list) -> tuple[list[Unit], Sharing | None]:
    """The units of one physical GPU and, when it is shared, how it was split."""
    if mig_slice(device[0].uuid) is not None:
        return _mig_units(device)
    if len(device) == 1:
        row = device[0]
        return [Unit(row, 1, fraction(row.busy_fraction))], None
    return _time_sliced(device)


def instance_profile(row) -> str | None:
    """The MIG profile of a unit's row (``GPU-…/1/3g.40gb`` -> ``3g.40gb``; "" where dcgm-exporter
    gave none); None for a whole GPU."""
    return row.uuid.rsplit("/", 2)[2] if mig_slice(row.uuid) is not None else None


def _mig_units(device: list) -> tuple[list[Unit], Sharing]:
    """MIG instances by compute slices; the GPU's free slices as one unit without a row.

    An instance whose profile is missing or unreadable (no compute slices) has no known share: the
    instances of unknown profile share equally what those of known profile leave, no slice assumed
    free (METHOD §3 splits a shared GPU evenly where nothing measures each part, said so: the
    Sharing's ``unknown`` instances, warned of as ``mig_profile_unknown``), so that the pods that
    held them keep the GPU and none of it becomes "no workload held"."""
    slices = [Decimal(max(0, mig_slice(r.uuid)[2])) for r in device]  # type: ignore[index]
    unknown = tuple(mig_slice(r.uuid)[1] for r, n in zip(device, slices) if n == 0)  # type: ignore[index]
    held = sum(slices, Decimal(0))
    total = max(Decimal(mig_compute_slices(instance_profile(r) for r in device)), held)
    free = Decimal(0) if unknown else total - held  # the last weight takes what the others leave
    if unknown:
        slices = [n or (total - held) / len(unknown) for n in slices]
    parts = slices + ([free] if free > 0 else [])
    weights = exact_weights(parts, total)
    units = [Unit(r, w, fraction(r.busy_fraction)) for r, w in zip(device, weights)]
    if free > 0:
        units.append(Unit(None, weights[-1], Decimal(0)))
    profiles = ", ".join(f"{instance_profile(r) or '?'} ({r.pod or 'no pod'})" for r in device)
    method = (f"MIG instances {profiles}: each its compute slices of {total}"
              + (f"; {free} free slice(s) unallocated" if free > 0 else "")
              + (f"; profile unknown (?): the {_figure(total - held)} slice(s) the others leave split "
                 f"equally among the {len(unknown)} such instance(s), assumed" if unknown else ""))
    return units, Sharing(device[0].node, str(device[0].gpu), "mig",
                          tuple(r.pod for r in device if r.pod), method, unknown)


def _time_sliced(device: list) -> tuple[list[Unit], Sharing]:
    """Pods sharing one GPU: by activity share where each pod's value is its own, else evenly."""
    values = [fraction(r.busy_fraction) for r in device]
    copied = len(set(values)) == 1
    total = sum(values, Decimal(0))
    if copied or total == 0:
        weights = exact_weights([ONE] * len(device), Decimal(len(device)))
        busy = [values[0] if copied else Decimal(0)] * len(device)
        method = EVEN
    else:
        weights = exact_weights(values, total)
        busy = [min(ONE, total)] * len(device)
        method = BY_ACTIVITY
    units = [Unit(r, w, b) for r, w, b in zip(device, weights, busy)]
    return units, Sharing(device[0].node, str(device[0].gpu), "time-sliced",
                          tuple(r.pod for r in device), method)


def sharing_note(share: Sharing) -> str:
    """One line for audit.json and the report's notes naming the GPU, the pods and the split."""
    pods = ", ".join(share.pods) or "no pod"
    if share.kind == "mig":
        return f"GPU {share.gpu} on node {share.node} split into MIG instances: {share.method} (pods: {pods})"
    return (f"GPU {share.gpu} on node {share.node} time-sliced between {len(share.pods)} pods "
            f"({pods}): {share.method}")


def shared_gpu_notes(activity) -> list[str]:
    """How each shared GPU of the activity table was split (MIG, time-sliced), one note per GPU
    and method, in node and GPU order; none when no GPU is shared."""
    if not len(activity):
        return []
    mig = is_mig_unit(activity["uuid"])
    rows = activity.loc[activity.duplicated(["node", "gpu", "ts"], keep=False) | mig]
    found: dict[tuple[str, str, str], Sharing] = {}
    for _, group in rows.groupby(["node", "ts"], sort=False):
        for device in devices(list(group.itertuples(index=False))):
            share = units_of(device)[1]
            if share is not None:
                found.setdefault((share.node, share.gpu, share.method), share)
    return [sharing_note(found[key]) for key in sorted(found)]


def placement_misfit(node: str, pods) -> Misfit:
    """A ``gpu_placement_assumed`` warning: the scheduler's requests placed ``pods`` on the node's
    GPUs that no DCGM pod label names, and which GPU each pod held is not in the data, so each pod's
    GPU time was taken at the mean activity of those GPUs (audit/gpusplit.py ``GpuSplitter._pooled``)."""
    named = sorted(pods)
    return Misfit("gpu_placement_assumed", f"node {text(node)}",
                  f"node {text(node)}: no DCGM pod label says which of its GPUs the pods {listing(named)} held "
                  "(the scheduler's requests give how many, not which): each pod's requested GPU time was "
                  "taken at the mean activity of the node's unlabelled GPUs in each interval, and the GPU "
                  "time no request took is unallocated at that mean", tuple(text(p) for p in named[:LISTED]))


def oversubscribed_misfit(node: str, spans: Mapping[datetime, tuple]) -> Misfit:
    """A ``gpu_requests_exceed_gpus`` warning: in the intervals of ``spans`` (interval -> GPUs
    requested, GPUs available, pods) the scheduler's requests asked for more of the node's unlabelled
    GPUs than it has, and each request was scaled by available ÷ requested (audit/gpusplit.py
    ``GpuSplitter._time_sliced``). Names the node, the intervals, the pods and each requested vs
    available count with the intervals it held in."""
    times = sorted(spans)
    pods = sorted({pod for _, _, named in spans.values() for pod in named})
    counts: dict[tuple, int] = {}
    for asked, available, _ in spans.values():
        counts[(asked, available)] = counts.get((asked, available), 0) + 1
    figures = "; ".join(f"{_figure(asked)} GPUs requested of {_figure(available)} (each request × "
                        f"{_figure(available / asked)}) in {n} interval{'s' if n > 1 else ''}"
                        for (asked, available), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    span = f"{times[0]:%Y-%m-%d %H:%M} – {times[-1]:%Y-%m-%d %H:%M} UTC"
    return Misfit("gpu_requests_exceed_gpus", f"node {text(node)}",
                  f"node {text(node)}: the scheduler's GPU requests of the pods {listing(pods)} ask for more "
                  f"GPUs than the node's unlabelled GPUs hold in {len(times)} interval{'s' if len(times) > 1 else ''} "
                  f"({span}): {figures}. The GPUs were time-sliced between the pods, or the requests "
                  "over-report; nothing measures each pod's part, so each request's GPU time and money were "
                  "scaled by available ÷ requested (split evenly, METHOD §3)", tuple(text(p) for p in pods[:LISTED]))


def _figure(value) -> str:
    """A GPU count or ratio as the warnings show it: at most four decimals, no trailing zeros."""
    return format(Decimal(value).quantize(Decimal("0.0001")).normalize(), "f")


# The scheduler's requests on a node's GPUs (audit/gpusplit.py GpuSplitter._holders).

class UnitIds:
    """The identifiers of a GPU unit (what device_key reads)."""

    def __init__(self, gpu: str, uuid: str):
        self.gpu, self.uuid = gpu, uuid


def request_count(gpus) -> int | Decimal:
    """A request's GPU count: a whole number as an int, a fraction (a pod that ran part of the
    interval) as the exact Decimal the split has always read a float as."""
    return int(gpus) if float(gpus).is_integer() else fraction(gpus)


def pod_name(req) -> str:
    """A request's pod as the warnings name it: namespace/pod (the pod alone without a namespace)."""
    return f"{req.namespace}/{req.pod}" if req.namespace else req.pod


def whole_weight(weight):
    """A weight that is a whole number as an int (a whole GPU counts as it always did), else itself."""
    return int(weight) if weight == int(weight) else weight


def pooled_shares(holder: str, take, capacity, pool: Mapping[str, list], pod: str) -> list[tuple]:
    """(holder, weight, busy, source, pod) of ``take`` of a pool of ``capacity`` GPU units: per
    activity source, its part of ``take`` at its units' mean activity."""
    return [(holder, whole_weight(take if weight == capacity else take * weight / capacity), active / weight, source, pod)
            for source, (weight, active) in pool.items()]


def text_key(value) -> tuple:
    """Texts in their own order; anything else (a missing UUID) after them, never compared with them."""
    return (0, value) if isinstance(value, str) else (1, repr(value))


def gpu_key(gpu: str):
    return (0, int(gpu)) if str(gpu).isdigit() else (1, str(gpu))
