"""Whether each service's phase timers time both phases on the same pods (METHOD §4, rule 5).

The prefill / decode split from the servers' timers stands on the pod-intervals that time both
phases (audit/phases.py): where some pods time prefill and not decode (a scrape that kept one
series, a server version without the decode timer), summing each phase over the pods that time it
would weigh prefill with time decode never measured (the verifier's c9901q: prefill over 13 pods,
decode over 6, share 0.535950 against 0.341679 on the 6). :func:`phases_fit` warns
(``phase_timers_one_phase``) with the pods left out, the pods the split stands on beside them.
Pods of the service with no phase timer at all (a rolling vLLM upgrade whose older servers lack
them: the verifier's c10701u, timers on 2 of 13 chat pods) are not left out but stood for: the
split is the timed pods' ratio applied to the whole service, which ``phase_timers_some_pods`` says.
"""
from __future__ import annotations

from audit.case import Case
from audit.misfit import Misfit, text
from audit.normalised import Telemetry
from audit.phases import Measured, service_rows, timer_split


def phases_fit(case: Case, tele: Telemetry) -> list[Misfit]:
    """Per service whose split stands on the phase timers: a ``phase_timers_one_phase`` warning where
    they time one phase only on some of its pod-intervals, a ``phase_timers_some_pods`` warning where
    some of its pods carry no phase timer at all (the split is the timed pods' ratio applied to
    them); nearest: those pods."""
    rows = service_rows(tele.serving, case.services)
    out = []
    for name in case.services:
        timers = timer_split(rows.loc[rows["service"] == name], name)
        if not isinstance(timers, Measured):
            continue
        subject = f"service {text(name)}"
        for kind, words, pods in (("phase_timers_one_phase", timers.note, timers.one_phase),
                                  ("phase_timers_some_pods", timers.untimed, timers.untimed_pods)):
            if words:
                out.append(Misfit(kind, subject, f"{subject}: {words}", tuple(text(p) for p in pods)))
    return out
