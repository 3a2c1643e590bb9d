"""Whether each service's phase timers time both phases on the same pods (METHOD §4, rule 5).

The prefill / decode split from the servers' timers stands on the pod-intervals that time both
phases (audit/phases.py): where some pods time prefill and not decode (a scrape that kept one
series, a server version without the decode timer), summing each phase over the pods that time it
would weigh prefill with time decode never measured (the verifier's c9901q: prefill over 13 pods,
decode over 6, share 0.535950 against 0.341679 on the 6). :func:`phases_fit` warns
(``phase_timers_one_phase``) with the pods left out, the pods the split stands on beside them.
"""
from __future__ import annotations

from audit.case import Case
from audit.misfit import Misfit, text
from audit.normalised import Telemetry
from audit.phases import Measured, service_rows, timer_split


def phases_fit(case: Case, tele: Telemetry) -> list[Misfit]:
    """A ``phase_timers_one_phase`` warning per service whose phase timers time one phase only on
    some of its pod-intervals (nearest: those pods)."""
    rows = service_rows(tele.serving, case.services)
    out = []
    for name in case.services:
        timers = timer_split(rows.loc[rows["service"] == name], name)
        if isinstance(timers, Measured) and timers.note:
            subject = f"service {text(name)}"
            out.append(Misfit("phase_timers_one_phase", subject, f"{subject}: {timers.note}",
                              tuple(text(p) for p in timers.one_phase)))
    return out
