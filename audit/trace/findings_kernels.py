"""Kernel-time finding rules: memory-bound chains and batch-size mismatch (model_compute)."""
from __future__ import annotations

import numpy as np

from audit.trace.findings_rules import (
    BATCH_MIN_SHARE,
    CHAIN_MIN_SHARE,
    KERNEL_TIME,
    LOW_OCCUPANCY,
    MEMORY_BOUND_CATEGORIES,
    MEMORY_BOUND_FLOP_PER_BYTE,
    MIN_CHAIN,
    SHORT_KERNEL_US,
    SMALL_M,
    TOP,
    Finding,
    _top,
)
from audit.trace.profile_view import ProfileView
from connectors.profiles.events import KERNEL, ascending, distinct
from connectors.profiles.intervals import positions

# ---------------------------------------------------------------- memory-bound chains

def memory_bound_chains(view: ProfileView) -> list[Finding]:
    """Runs of short, low-intensity kernels back to back on one stream: fusion candidates."""
    is_kernel = view.role == KERNEL
    if not is_kernel.any():
        return []
    kernels = None if is_kernel.all() else positions(is_kernel)
    del is_kernel
    groups: dict[tuple[int, str], list] = {}
    for run in _chains(view, kernels):
        _add_chain(view, groups, run)
    total = sum(g[0] for g in groups.values())
    if total < CHAIN_MIN_SHARE * view.window_us:
        return []
    return [Finding("memory_bound_chain", f"{chains:,} chain{'s' if chains != 1 else ''} of short memory-bound kernels, "
                    f"{round(kernels_n / chains, 1)} kernels long on average (fusion candidates)",
                    top_kernel, path, us, KERNEL_TIME, device,
                    {"chains": chains, "kernels": kernels_n, "mean_kernel_us": round(us / kernels_n, 3),
                     "fusion_saving_us": round(saving, 3),
                     "median_flop_per_byte": _median(intensities)},
                    "fuse the chain: torch.compile, a fused kernel (e.g. fused norm / activation), or "
                    "fewer intermediate tensors")
            for (device, path), (us, chains, kernels_n, saving, top_kernel, intensities) in _top(groups, TOP)]


def _chains(view: ProfileView, kernels: np.ndarray | None):
    """The chains of flagged kernels (work positions, or a slice of them; None: every work event
    is a kernel). When every kernel is flagged, each stream's kernels are one chain whatever their
    order (no sort of the trace); else the kernels are put in stream order and cut into runs."""
    flagged = _memory_bound(view, kernels)
    if flagged.all():
        del flagged
        yield from _whole_streams(view, kernels)
        return
    order = _stream_order(view, kernels)
    if order is not kernels:
        flagged = _memory_bound(view, order)
    yield from _runs(view, order, flagged)


def _whole_streams(view: ProfileView, kernels: np.ndarray | None):
    """Each (device, stream)'s kernels as one chain, when it has MIN_CHAIN or more."""
    device, stream = _at(view.device, kernels), _at(view.stream, kernels)
    if bool((device == device[0]).all()) and bool((stream == stream[0]).all()):
        if device.size >= MIN_CHAIN:
            yield slice(0, device.size) if kernels is None else kernels
        return
    for d in distinct(device).tolist():
        on_device = device == d
        for s in distinct(stream[on_device]).tolist():
            mine = np.flatnonzero(on_device & (stream == s))
            if mine.size >= MIN_CHAIN:
                yield mine if kernels is None else kernels[mine]


def _at(column: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """``column[order]``; the column itself when ``order`` is None (every work event, in order)."""
    return column if order is None else column[order]


def _stream_order(view: ProfileView, kernels: np.ndarray | None) -> np.ndarray | None:
    """Kernel positions (None: every work event is one) by device, stream and start: as they are
    when the kernels run on one device and stream in start order (None when those are all the
    work: no copy, no sort), else by a stable lexsort."""
    device, stream, start = _at(view.device, kernels), _at(view.stream, kernels), _at(view.start, kernels)
    if bool((device == device[0]).all()) and bool((stream == stream[0]).all()) and ascending(start):
        return kernels
    order = np.lexsort((start, stream, device))
    return order if kernels is None else kernels[order]


def _median(intensities: list[tuple[float, int]]) -> float | None:
    """np.median of the FLOPs per byte of a group's kernels, given as (value, kernels) pairs,
    rounded to 3 places (None without any)."""
    if not intensities:
        return None
    values = sorted(intensities)
    n = sum(count for _, count in values)
    middle = [(n - 1) // 2, n // 2]
    found: list[float] = []
    seen = 0
    for value, count in values:
        while len(found) < 2 and middle[len(found)] < seen + count:
            found.append(value)
        seen += count
    return round(float(np.median(np.array(found))), 3) if n % 2 == 0 else round(float(found[0]), 3)


def _memory_bound(view: ProfileView, order: np.ndarray | None) -> np.ndarray:
    """Per kernel of ``order``: short and memory-bound (low FLOPs per byte from the launching
    operator's shapes, else an elementwise-type category). Operators are looked at once each."""
    flagged = _at(view.dur, order) < SHORT_KERNEL_US
    short = flagged.copy() if view.paths.has_ops else None
    flagged &= _at(view.in_categories(*MEMORY_BOUND_CATEGORIES), order)
    if short is None:
        return flagged
    ops = _at(view.paths.op_of, order)
    at = np.flatnonzero(short & (ops >= 0))
    if at.size == 0:
        return flagged
    ops = ops[at]
    distinct_ops = distinct(ops)
    verdict = np.array([_op_verdict(view, int(op)) for op in distinct_ops.tolist()], dtype=np.int8)
    verdict = verdict[np.searchsorted(distinct_ops, ops)]
    flagged[at[verdict >= 0]] = verdict[verdict >= 0] == 1
    return flagged


def _op_verdict(view: ProfileView, op: int) -> int:
    """Whether a short kernel launched by operator ``op`` is memory-bound by the operator's
    shapes: 1 yes, 0 no, -1 not known from them (a GEMM, or no shapes: its category decides)."""
    found = view.intensity_of_op(op)
    if found is None or found.m is not None:
        return -1
    return int(found.per_byte < MEMORY_BOUND_FLOP_PER_BYTE)


def _runs(view: ProfileView, order: np.ndarray | None, flagged: np.ndarray):
    """Maximal runs of flagged kernels, consecutive on one device and stream, MIN_CHAIN or longer
    (as arrays of work positions, in order; slices of them when ``order`` is None)."""
    if flagged.size == 0:
        return
    device, stream = _at(view.device, order), _at(view.stream, order)
    same = np.zeros(flagged.size, dtype=bool)
    same[1:] = (device[1:] == device[:-1]) & (stream[1:] == stream[:-1])
    del device, stream
    carried = np.zeros(flagged.size, dtype=bool)
    carried[1:] = flagged[1:] & flagged[:-1] & same[1:]
    del same
    starts = np.flatnonzero(flagged & ~carried)
    continues = np.zeros(flagged.size, dtype=bool)
    continues[:-1] = carried[1:]
    del carried
    stops = np.flatnonzero(flagged & ~continues) + 1
    del continues
    for start, stop in zip(starts.tolist(), stops.tolist()):
        if stop - start >= MIN_CHAIN:
            yield slice(start, stop) if order is None else order[start:stop]


def _add_chain(view: ProfileView, groups: dict, run: np.ndarray | slice) -> None:
    """Add one chain (work positions, or a slice of them) to its group, keyed by device and the
    call path its kernels share (where they share none, that of its longest kernel)."""
    first = run.start if isinstance(run, slice) else int(run[0])
    size = run.stop - run.start if isinstance(run, slice) else len(run)
    distinct_paths = _first_seen(view.paths.path_of[run])
    frames = [view.pattern(int(p)).split(" > ") for p in distinct_paths.tolist()]
    shared = frames[0]
    for other in frames[1:]:
        n = 0
        while n < min(len(shared), len(other)) and shared[n] == other[n]:
            n += 1
        shared = shared[:n]
    durations = view.dur[run]
    longest = _longest(view, run, durations)
    # kernels launched from paths with nothing in common: the path that launched the longest one,
    # the kernel the finding names (METHOD §6: a finding names the call path that launched it)
    path = " > ".join(shared) or view.pattern(int(view.paths.path_of[longest]))
    key = (int(view.device[first]), path)
    group = groups.setdefault(key, [0.0, 0, 0, 0.0, view.kernel_name(longest), []])
    group[0] += float(durations.sum())
    group[1] += 1
    group[2] += size
    group[3] += float(durations.sum() - durations.max())
    if not view.paths.has_ops:
        return
    ops = view.paths.op_of[run]
    ops = ops[ops >= 0]
    if ops.size:
        found_ops = distinct(ops)
        counts = np.bincount(np.searchsorted(found_ops, ops))
        for op, count in zip(found_ops.tolist(), counts.tolist()):
            found = view.intensity_of_op(op)
            if found is not None:
                group[5].append((found.per_byte, count))


def _longest(view: ProfileView, run: np.ndarray | slice, durations: np.ndarray) -> int:
    """The work position of a chain's longest kernel: the earliest to start among the longest
    (then the first in the trace), whatever order the chain's positions are in."""
    top = durations == durations.max()
    starts = view.start[run]
    top &= starts == starts[top].min()
    first = int(np.argmax(top))                 # the first of the earliest among the longest
    return run.start + first if isinstance(run, slice) else int(run[first])


def _first_seen(values: np.ndarray) -> np.ndarray:
    """The distinct values of an integer array in order of first appearance."""
    if values.size <= 1 << 16:
        return values[np.sort(np.unique(values, return_index=True)[1])]
    found = distinct(values)
    if found.size > 64:
        return values[np.sort(np.unique(values, return_index=True)[1])]
    firsts = [int(np.argmax(values == value)) for value in found.tolist()]
    return found[np.argsort(firsts, kind="stable")]


# ---------------------------------------------------------------- batch-size mismatch

def batch_size_mismatch(view: ProfileView) -> list[Finding]:
    """GEMMs whose batch does not fill the GPU: small M from shapes, low estimated occupancy, or
    fewer thread blocks than half the SMs."""
    gemms = np.flatnonzero((view.role == KERNEL) & view.in_categories("gemm"))
    groups: dict[tuple[int, str, str], list] = {}
    for position in gemms.tolist():
        reasons, m = _underfilled(view, position)
        if reasons:
            key = (int(view.device[position]), view.pattern(int(view.paths.path_of[position])),
                   view.kernel_name(position))
            group = groups.setdefault(key, [0.0, 0, set(), []])
            group[0] += float(view.dur[position])
            group[1] += 1
            group[2] |= reasons
            group[3].append(m)
    total = sum(g[0] for g in groups.values())
    if total < BATCH_MIN_SHARE * view.window_us:
        return []
    out = []
    for (device, path, kernel), (us, count, reasons, ms) in _top(groups, TOP):
        ms = [m for m in ms if m is not None]
        out.append(Finding("batch_size_mismatch", "GEMMs too small for the GPU (" + ", ".join(sorted(reasons)) + ")",
                           kernel, path, us, KERNEL_TIME, device,
                           {"gemms": count, "reasons": sorted(reasons), "median_m": int(np.median(ms)) if ms else None,
                            "gemm_us_all_matching": round(total, 3)},
                           "batch more requests per forward pass (larger max batch, continuous batching), "
                           "or pad M to the tile size"))
    return out


def _underfilled(view: ProfileView, position: int) -> tuple[set[str], int | None]:
    """Why a GEMM looks underfilled ({'small_m', 'low_occupancy', 'few_blocks'}) and its M."""
    reasons: set[str] = set()
    found = view.op_intensity(position)
    m = found.m if found is not None else None
    if m is not None and m < SMALL_M:
        reasons.add("small_m")
    kernel = view.trace.kernel
    at = int(np.searchsorted(kernel["rows"], view.rows[position]))
    if at < kernel["rows"].size and kernel["rows"][at] == view.rows[position]:
        occupancy, blocks = float(kernel["occupancy"][at]), int(kernel["blocks"][at])
        if 0 < occupancy < LOW_OCCUPANCY:
            reasons.add("low_occupancy")
        sms = view.trace.devices.get(view.trace.device_keys[view.device[position]], {}).get("sms")
        if sms and 0 < blocks < sms / 2:
            reasons.add("few_blocks")
    return reasons, m
