"""The report's line on a profile's serving-gap sensitivity (audit.json ``profiles[i].gap_sensitivity``,
METHOD §3: g over the served traffic's window against g over the whole GPU window)."""
from __future__ import annotations

from typing import Any

from audit.reporters.formatting import number, ratio


def gap_sensitivity_line(profile: dict[str, Any]) -> str:
    """'4.49 over the whole GPU window; left out of g's window: 1 kernel (0.005 ms kernel-active),
    200.0 ms of GPU window', then why the trace's profiler steps were not used, if so ('' for a
    profile without the figures)."""
    sens = profile.get("gap_sensitivity") or {}
    if not sens:
        return ""
    kernels = int(sens.get("excluded_kernels") or 0)
    text = f"{ratio(sens.get('full_window'))} over the whole GPU window"
    if kernels or float(sens.get("excluded_ms") or 0):
        text += (f"; left out of g's window: {kernels} kernel{'s' if kernels != 1 else ''} "
                 f"({number(sens.get('excluded_kernel_ms'), 3)} ms kernel-active), "
                 f"{number(sens.get('excluded_ms'), 1)} ms of GPU window")
    if sens.get("note"):
        text += f"; {sens['note']}"
    return text
