"""Whether a traffic file the generation cap reads looks like its service's traffic (rule 5).

The generation-cap option prices a service's decode cost × the share of generated tokens above the
cap; given ``traffic = { SERVICE = "path" }`` that share is the file's, exactly (METHOD §7). A file of
another service, model or period makes the top-ranked saving rest on traffic the service never
served: the verifier's c4 paired a chat service whose own counters measure 1.0 generated token per
request with the Azure conversation trace (211.1 a request), and the option came first with 7,345.66
a month and no word. Where the service's servers count both (``vllm:generation_tokens_total`` /
``tgi_request_generated_tokens_sum`` and the requests), :func:`traffic_fit` compares the means and warns
(``traffic_unlike_service``) when they differ by more than :data:`FACTOR` either way, naming both means
and their counts. The saving stays as priced: which traffic is right is the user's call, not ours.
"""
from __future__ import annotations

import math
from decimal import Decimal

from audit.case import Case
from audit.misfit import Misfit, text
from audit.normalised import Telemetry
from audit.phases import serving_total

FACTOR = Decimal(2)


def traffic_fit(case: Case, tele: Telemetry) -> list[Misfit]:
    """A ``traffic_unlike_service`` warning per traffic file whose mean generated tokens per request is
    more than :data:`FACTOR` times (or less than 1 / FACTOR of) what the service's own counters
    measure over the window; none where the counters measure nothing."""
    files = dict((case.option_overrides.get("generation_cap") or {}).get("traffic") or {})
    out = []
    for service, path in files.items():
        measured = _measured(tele, case, service)
        if measured is None:
            continue
        from audit.pricing.generation_cap import generated_per_request

        generated = generated_per_request(str(path))
        if not generated:
            continue
        requests, tokens = measured
        theirs, ours = Decimal(sum(generated)) / len(generated), tokens / requests
        if (ours > 0 and FACTOR ** -1 <= theirs / ours <= FACTOR) or theirs == ours == 0:
            continue
        subject = f"[[options]] generation_cap traffic {text(service)}"
        out.append(Misfit("traffic_unlike_service", subject, (
            f"{subject}: the file {path} averages {theirs:,.1f} generated tokens per request over "
            f"{len(generated):,} requests; service {text(service)}'s own counters measure {ours:,.1f} over "
            f"{requests:,.0f} requests in the window. The generation cap's share of tokens above the cap is "
            "the file's, not the service's: check that the file is this service's traffic"),
            (f"{ours:,.1f} generated tokens per request, measured",)))
    return out


def _measured(tele: Telemetry, case: Case, service: str) -> tuple[Decimal, Decimal] | None:
    """(requests, generated tokens) the service's servers count over the window, or None."""
    requests = serving_total(tele.serving, case.services, service, "requests")
    tokens = serving_total(tele.serving, case.services, service, "generated_tokens")
    if not (math.isfinite(requests) and math.isfinite(tokens)) or requests <= 0:
        return None
    return Decimal(repr(requests)), Decimal(repr(tokens))
