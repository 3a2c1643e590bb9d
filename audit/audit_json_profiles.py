"""audit.json ``profiles[]``: the parts of a profile's entry beside its figures: its idle call
paths costed to the cent, g's sensitivity to its window, and a rank set's ranks."""
from __future__ import annotations

from decimal import Decimal

from audit.money import fmt, largest_remainder


def ranks(p) -> dict:
    """A rank set's ranks, each with its own figures (``ranks``: file, rank, device, kernel-active and
    GPU-window ms, g and its basis, kernels); nothing for a profile of one trace."""
    if p.ranks is None:
        return {}
    return {"ranks": [{"file": r.file, "rank": int(r.rank), "device": r.device,
                       "kernel_active_ms": fmt(Decimal(repr(float(r.kernel_active_us))) / 1000, 3),
                       "gpu_window_ms": fmt(Decimal(repr(float(r.gpu_window_us))) / 1000, 3),
                       "gap_ratio": None if r.gap_ratio != r.gap_ratio else fmt(Decimal(repr(float(r.gap_ratio))), 6),
                       "gap_basis": r.gap_basis, "kernels": int(r.kernels)} for r in p.ranks.itertuples()]}


def idle_paths(rows, part: Decimal | None) -> list[dict]:
    """A profile's top idle call paths (audit/trace/idle.py) and the rest as one row, each costed as the
    idle findings are (``share_of_part`` of the profile's idle × in_flight_idle), their cents by
    largest remainder to the part's rounded amount, so that they add up to it."""
    costs = {str(i): r["cost"] for i, r in enumerate(rows) if r.get("cost") is not None}
    whole = len(costs) == len(rows) and rows and rows[-1]["category"] == "other"
    costs = largest_remainder(costs, part if whole and part is not None else None) if costs else {}
    return [{"callpath": r["callpath"], "category": r["category"], "idle_us": r["idle_us"], "gaps": r["gaps"],
             "share": r["share"], "share_of_part": r.get("share_of_part"), **({"rank": r["rank"]} if "rank" in r else {}),
             **({} if r.get("cost") is None else {"cost": str(costs[str(i)])})}
            for i, r in enumerate(rows)]


def gap_sensitivity(p) -> dict | None:
    """g over the served traffic's window and over the whole GPU window, and what lies between
    (connectors/profiles/window.py); None for a profile table without the window columns."""
    sens = p.gap_sensitivity
    if sens is None:
        return None
    return {"served_window": fmt(sens.served_window, 6), "full_window": fmt(sens.full_window, 6),
            "window_ms": fmt(sens.window_us / 1000, 3), "excluded_kernels": sens.excluded_kernels,
            "excluded_kernel_ms": fmt(sens.excluded_kernel_us / 1000, 3),
            "excluded_ms": fmt(sens.excluded_us / 1000, 3), "note": sens.note or None}
