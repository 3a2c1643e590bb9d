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
from connectors.profiles.events import KERNEL

# ---------------------------------------------------------------- memory-bound chains

def memory_bound_chains(view: ProfileView) -> list[Finding]:
    """Runs of short, low-intensity kernels back to back on one stream: fusion candidates."""
    kernels = np.flatnonzero(view.role == KERNEL)
    if kernels.size == 0:
        return []
    order = kernels[np.lexsort((view.start[kernels], view.stream[kernels], view.device[kernels]))]
    flagged = _memory_bound(view, order)
    groups: dict[tuple[int, str], list] = {}
    for run in _runs(view, order, flagged):
        _add_chain(view, groups, run)
    total = sum(g[0] for g in groups.values())
    if total < CHAIN_MIN_SHARE * view.window_us:
        return []
    return [Finding("memory_bound_chain", f"Chains of {round(kernels_n / chains, 1)} short memory-bound kernels "
                    f"(fusion candidates)", top_kernel, path, us, KERNEL_TIME, device,
                    {"chains": chains, "kernels": kernels_n, "mean_kernel_us": round(us / kernels_n, 3),
                     "fusion_saving_us": round(saving, 3),
                     "median_flop_per_byte": round(float(np.median(intensities)), 3) if intensities else None},
                    "fuse the chain: torch.compile, a fused kernel (e.g. fused norm / activation), or "
                    "fewer intermediate tensors")
            for (device, path), (us, chains, kernels_n, saving, top_kernel, intensities) in _top(groups, TOP)]


def _memory_bound(view: ProfileView, positions: np.ndarray) -> np.ndarray:
    """Per work position: short and memory-bound (low FLOPs per byte from the launching operator's
    shapes, else an elementwise-type category). Operators are looked at once each."""
    short = view.dur[positions] < SHORT_KERNEL_US
    by_category = np.isin(view.category[positions], list(MEMORY_BOUND_CATEGORIES)) if positions.size else short
    flagged = short & by_category
    ops = view.paths.op_of[positions]
    for at in np.flatnonzero(short & (ops >= 0)).tolist():
        found = view.op_intensity(int(positions[at]))
        if found is not None and found.m is None:
            flagged[at] = found.per_byte < MEMORY_BOUND_FLOP_PER_BYTE
    return flagged


def _runs(view: ProfileView, order: np.ndarray, flagged: np.ndarray):
    """Maximal runs of flagged kernels, consecutive on one device and stream, MIN_CHAIN or longer
    (as arrays of work positions, in order)."""
    if order.size == 0:
        return
    device, stream = view.device[order], view.stream[order]
    same = np.zeros(order.size, dtype=bool)
    same[1:] = (device[1:] == device[:-1]) & (stream[1:] == stream[:-1])
    carried = np.zeros(order.size, dtype=bool)
    carried[1:] = flagged[1:] & flagged[:-1] & same[1:]
    starts = np.flatnonzero(flagged & ~carried)
    continues = np.zeros(order.size, dtype=bool)
    continues[:-1] = carried[1:]
    stops = np.flatnonzero(flagged & ~continues) + 1
    for start, stop in zip(starts.tolist(), stops.tolist()):
        if stop - start >= MIN_CHAIN:
            yield order[start:stop]


def _add_chain(view: ProfileView, groups: dict, run: np.ndarray) -> None:
    """Add one chain to its group, keyed by device and the call path its kernels share."""
    paths = view.paths.path_of[run]
    distinct = paths[np.sort(np.unique(paths, return_index=True)[1])]
    frames = [view.pattern(int(p)).split(" > ") for p in distinct.tolist()]
    shared = frames[0]
    for other in frames[1:]:
        n = 0
        while n < min(len(shared), len(other)) and shared[n] == other[n]:
            n += 1
        shared = shared[:n]
    key = (int(view.device[run[0]]), " > ".join(shared) or "(various)")
    durations = view.dur[run]
    group = groups.setdefault(key, [0.0, 0, 0, 0.0, view.kernel_name(int(run[int(np.argmax(durations))])), []])
    group[0] += float(durations.sum())
    group[1] += 1
    group[2] += len(run)
    group[3] += float(durations.sum() - durations.max())
    for p in run.tolist():
        found = view.op_intensity(p)
        if found is not None:
            group[5].append(found.per_byte)


# ---------------------------------------------------------------- batch-size mismatch

def batch_size_mismatch(view: ProfileView) -> list[Finding]:
    """GEMMs whose batch does not fill the GPU: small M from shapes, low estimated occupancy, or
    fewer thread blocks than half the SMs."""
    gemms = np.flatnonzero((view.role == KERNEL) & (view.category == "gemm"))
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
