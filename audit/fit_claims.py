"""Whether the services' billing-line claims fit the invoice (METHOD §4, rule 5: no silent misfit).

A ``[services.NAME]`` entry may claim lines by ``tags`` or ``resource_ids``: a claim that no line
carries leaves the service's unit cost without the lines it meant to own. Each such claim is a
misfit naming the nearest tag keys, values or resource ids the invoice does contain:

* ``service_claim``: a tag or resource-id claim that matches no billing line;
* ``service_unmatched`` (**error**): a service with no telemetry matchers whose claims match no line
  and that no request-log source names — it matches nothing at all.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import pandas as pd

from audit.case import Case, Service
from audit.lines import distinct_tags
from audit.misfit import LISTED, Misfit, listing, nearest, text
from audit.services import matches


def claims_fit(case: Case, lines: pd.DataFrame, logs: Mapping[str, list[str]]) -> list[Misfit]:
    """A misfit per claim that matches no billing line (and an error per service matching nothing)."""
    claimants = [s for s in case.services.values() if s.claims_lines]
    if not claimants or lines.empty:
        return []
    tags = distinct_tags(lines)  # whether some line carries a tag: each distinct tag set once
    resources = sorted({str(r) for r in lines["resource_id"].unique() if str(r)})
    out: list[Misfit] = []
    for service in claimants:
        tags_hit = _tags_claim_lines(service, tags)
        resource_hits = {p: any(matches(p, r) for r in resources) for p in service.resource_ids}
        out.extend(_claim_misfits(service, tags, resources, tags_hit, resource_hits))
        if not tags_hit and not any(resource_hits.values()) and not service.match and service.name not in logs:
            subject = f"service {text(service.name)}"
            out.append(Misfit("service_unmatched", subject,
                              f"{subject} matches nothing in the data: it has no telemetry matchers, its claims "
                              "match no billing line and no request-log source names it", (), "error"))
    return out


def _tags_claim_lines(service: Service, tags: Sequence[Mapping]) -> bool:
    """Whether some line carries every tag the service claims (False when it claims none)."""
    return bool(service.tags) and any(all(matches(p, str(t.get(k, ""))) for k, p in service.tags.items())
                                      for t in tags)


def _claim_misfits(service: Service, tags: Sequence[Mapping], resources: list[str], tags_hit: bool,
                   resource_hits: Mapping[str, bool]) -> list[Misfit]:
    """A misfit per claim that matched no line (each claim evaluated once, by the caller)."""
    subject = f"service {text(service.name)}"
    out = []
    if service.tags and not tags_hit:
        keys = {str(k) for t in tags for k in t}
        for key, pattern in service.tags.items():
            if key not in keys:
                near = nearest(key, keys)
                present = f"tag keys present: {listing(near)}"
            else:
                near = nearest(pattern, {str(t[key]) for t in tags if key in t})
                present = f"values of {text(key)} present: {listing(near)}"
            out.append(Misfit("service_claim", subject,
                              f"{subject}: tags claim {text(key)} = \"{text(pattern)}\" matches no billing line; "
                              f"{present}", tuple(text(v) for v in near[:LISTED])))
    for pattern in service.resource_ids:
        if not resource_hits[pattern]:
            near = nearest(pattern, resources)
            out.append(Misfit("service_claim", subject,
                              f"{subject}: resource_ids claim \"{text(pattern)}\" matches no billing line; "
                              f"ResourceIds present: {listing(near)}", tuple(text(v) for v in near[:LISTED])))
    return out
