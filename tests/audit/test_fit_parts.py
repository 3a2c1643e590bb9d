"""The hours a machine billed in parts lacks one of its parts (audit/fit_parts.py)."""
from __future__ import annotations

import pandas as pd

from audit.fit_parts import parts_fit
from audit.normalised import NodeMap

H0 = pd.Timestamp("2026-09-01T00:00:00Z")
GPU, CORE, RAM = ("Nvidia H100 80GB GPU running in Americas", "A3 Instance Core running in Americas",
                  "A3 Instance Ram running in Americas")


def _lines(rows: list[tuple[str, str, int]]) -> pd.DataFrame:
    """(resource, description, hour) -> an hour's usage line of that part."""
    return pd.DataFrame([{"resource_id": rid, "charge_description": text, "charge_category": "Usage",
                          "start": H0 + pd.Timedelta(hours=h), "end": H0 + pd.Timedelta(hours=h + 1)}
                         for rid, text, h in rows])


def test_hours_a_part_is_missing_are_named_by_resource_part_and_hours():
    """The GKE seed 10401 bill with rfqt's H100 meter removed for hours 03-05 and lpqp's Ram line for
    10-11: before, nothing was said (fit empty, no warning)."""
    rows = [(rid, text, h) for rid in ("rfqt", "lpqp") for text in (GPU, CORE, RAM) for h in range(12)
            if not (rid == "rfqt" and text == GPU and 3 <= h <= 5) and not (rid == "lpqp" and text == RAM and h >= 10)]
    rows += [("g2", "G2 Instance Core running in Americas", h) for h in range(2)]  # one part only: nothing to say
    nodes = NodeMap({"rfqt": ("gke-rfqt",), "lpqp": ("gke-lpqp",)}, frozenset(), frozenset())
    [misfit] = parts_fit(_lines(rows), nodes)
    assert (misfit.kind, misfit.severity, misfit.nearest) == ("billed_part_missing", "warning", ("lpqp", "rfqt"))
    assert misfit.message == (
        "2 part(s) of machines billed in parts are missing in hours the machine's other parts bill: "
        "lpqp (node gke-lpqp): RAM in 2 hour(s), 2026-09-01 10:00–12:00 UTC; "
        "rfqt (node gke-rfqt): GPU in 3 hour(s), 2026-09-01 03:00–06:00 UTC. An hour without its GPU line bills "
        "no GPU time (GPU-hours come from the GPU SKU, METHOD §2), one without its Core or RAM line less than the "
        "machine: the figures of those hours rest on an incomplete bill (an export cut short, or rows filtered out).")


def test_a_machine_with_every_part_in_every_hour_fits():
    rows = [("a3", text, h) for text in (GPU, CORE, RAM) for h in range(3)]
    assert parts_fit(_lines(rows), NodeMap({}, frozenset(), frozenset())) == []
