"""Whether the services' billing-line claims fit the invoice (METHOD §4, rule 5: no silent misfit).

A ``[services.NAME]`` entry may claim lines by ``tags`` or ``resource_ids``: a claim that no line
carries leaves the service's unit cost without the lines it meant to own. Each such claim is a
misfit naming the nearest tag keys, values or resource ids the invoice does contain:

* ``service_claim``: a tag or resource-id claim that matches no billing line;
* ``service_unmatched`` (**error**): a service with no telemetry matchers whose claims match no line
  and that no request-log source names — it matches nothing at all.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from audit.case import Case, Service
from audit.lines import tags_of
from audit.misfit import LISTED, Misfit, listing, nearest, text
from audit.services import matches


def claims_fit(case: Case, lines: pd.DataFrame, logs: Mapping[str, list[str]]) -> list[Misfit]:
    """A misfit per claim that matches no billing line (and an error per service matching nothing)."""
    claimants = [s for s in case.services.values() if s.claims_lines]
    if not claimants or lines.empty:
        return []
    tags = list(tags_of(lines))
    resources = sorted({str(r) for r in lines["resource_id"].astype(str) if r})
    out: list[Misfit] = []
    for service in claimants:
        found = _claimed(service, tags, resources)
        out.extend(_claim_misfits(service, tags, resources))
        if not found and not service.match and service.name not in logs:
            subject = f"service {text(service.name)}"
            out.append(Misfit("service_unmatched", subject,
                              f"{subject} matches nothing in the data: it has no telemetry matchers, its claims "
                              "match no billing line and no request-log source names it", (), "error"))
    return out


def _claimed(service: Service, tags: list[Mapping], resources: list[str]) -> bool:
    """Whether any line is claimed by the service's tags (all must hold) or resource ids (any)."""
    if service.tags and any(all(matches(p, str(t.get(k, ""))) for k, p in service.tags.items()) for t in tags):
        return True
    return any(matches(p, r) for p in service.resource_ids for r in resources)


def _claim_misfits(service: Service, tags: list[Mapping], resources: list[str]) -> list[Misfit]:
    subject = f"service {text(service.name)}"
    out = []
    if service.tags and not any(all(matches(p, str(t.get(k, ""))) for k, p in service.tags.items()) for t in tags):
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
        if not any(matches(pattern, r) for r in resources):
            near = nearest(pattern, resources)
            out.append(Misfit("service_claim", subject,
                              f"{subject}: resource_ids claim \"{text(pattern)}\" matches no billing line; "
                              f"ResourceIds present: {listing(near)}", tuple(text(v) for v in near[:LISTED])))
    return out
