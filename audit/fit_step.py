"""Whether the case's step fits the telemetry: a step finer than the GPU samples are apart.

The audit works in intervals of the case's ``step`` (METHOD §3): a GPU-interval with no activity
sample is unmeasured. Telemetry scraped every 15 minutes, audited at ``step = "7m"``, leaves more than
half of the GPU-intervals without a sample, so more than half of the GPU time goes to *unmeasured*
while the data measured all of it; nothing in the case matches nothing, and the report looked like an
instrumentation gap. :func:`step_fit` names it (``step_finer_than_samples``, a warning) with the spacing
the samples do have and the shortest usual step that fits it.

How it is seen, from the activity table alone (every telemetry source fills it on the case's grid):
per GPU (source, node, gpu, uuid), the gaps between consecutive intervals that have a sample. The
typical (median) gap is the sampling: gaps of up to twice it (rounded up) are the sampling, longer
ones are outages (an exporter silent for three hours, a day without one), which the coverage section
(a node's observed GPU-hours below its paid ones) and the unattributed bucket (``no_activity_sample``)
report on their own. When at least :data:`EMPTY_SHARE` of the intervals the sampling gaps span have
no sample, the samples are further apart than the step; their spacing is the step times the sampling
gaps' mean (a 15-minute scrape at a 10-minute step leaves gaps of 1 and 2 intervals: 15 minutes).
Before, any gap of up to 4 intervals counted as sampling: at a 1-hour step over 12 hours, one node's
3-hour outage was a spacing of "about 67m", and the step was blamed for it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from audit.case import Case
from audit.misfit import Misfit
from audit.normalised import Telemetry

#: share of the intervals within short gaps left without a sample from which the step is too fine
EMPTY_SHARE = 0.1
#: short gaps needed before anything is said
MIN_GAPS = 10
#: the steps suggested, in seconds (the usual scrape and audit intervals)
USUAL_STEPS = (15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
KEYS = ["source", "node", "gpu", "uuid"]


def step_fit(case: Case, tele: Telemetry) -> list[Misfit]:
    """A ``step_finer_than_samples`` warning when the case sets a step finer than the GPU activity
    samples are apart; [] when it fits, when the case sets no step (the grid is then the samples'
    own spacing) or when there are too few samples to tell."""
    step = case.step_seconds
    if step is None or not len(tele.activity):
        return []
    gaps = sampled_gaps(tele.activity, step)
    if len(gaps) < MIN_GAPS:
        return []
    short = gaps[(gaps >= 1) & (gaps <= 2 * int(np.ceil(np.median(gaps))))]  # the sampling, no outage
    if len(short) < MIN_GAPS:
        return []
    empty = float((short - 1).sum() / short.sum())
    if empty < EMPTY_SHARE:
        return []
    spacing = step * float(short.mean())
    fits = next((s for s in USUAL_STEPS if s >= spacing * 0.95), None)
    advice = f"a step of {duration_text(fits)} or more fits them" if fits else "a longer step fits them"
    message = (f"[case] step {duration_text(step)} is finer than the GPU activity samples are apart (about "
               f"{duration_text(about(spacing))}): {empty:.0%} of the intervals between a GPU's samples have "
               f"none, and the GPU time in them is reported unmeasured although it was sampled; {advice}")
    return [Misfit("step_finer_than_samples", "[case] step", message,
                   (duration_text(fits),) if fits else ())]


def sampled_gaps(activity: pd.DataFrame, step: int) -> np.ndarray:
    """The gaps, in intervals of ``step``, between consecutive sampled intervals of each GPU."""
    keys = [c for c in KEYS if c in activity.columns]
    gpu = activity.groupby(keys, sort=False, dropna=False).ngroup().to_numpy() if keys else np.zeros(len(activity))
    k = pd.DatetimeIndex(activity["ts"]).as_unit("ns").asi8 // (step * 10 ** 9)
    order = np.lexsort((k, gpu))
    gpu, k = gpu[order], k[order]
    return np.diff(k)[(gpu[1:] == gpu[:-1]) & (k[1:] != k[:-1])]


def about(seconds: float) -> int:
    """An estimated spacing as it is shown: whole minutes from two minutes up, else whole seconds."""
    return round(seconds / 60) * 60 if seconds >= 120 else max(1, round(seconds))


def duration_text(seconds: int) -> str:
    """Seconds as the case writes a duration: 90 → "90s", 900 → "15m", 7200 → "2h"."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
