"""The whole audit of a month read through Athena equals the audit of the same CUR file read locally.

Issue 18's bar for the attribution where the bill lives: the same cents whichever engine summed the
lines. The Athena path is the connector's own (Glue, Athena on moto in server mode, paged results
through a proxy), seeded with the DuckDB rendering of the query it sends (``tests/servers/athena.py``:
moto runs no SQL); the local path is ``format = "cur"`` on the Dec 2018 workshop Parquet. Both
documents are audit.json as ``costaudit run`` writes it, the two sources named alike; only
``sources`` may differ (the format, the path, Athena's query note).
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from audit.audit_json import to_dict
from audit.collected import Collected
from audit.pipeline import audit_collected
from connectors.base import ReadContext, SourceSpec
from connectors.registry import resolve
from tests.builders import make_case, read_cur_once
from tests.connectors.billing.test_athena import glue, proxy  # noqa: F401 (fixtures)
from tests.servers.athena import DEC2018, MONTH, local_rows, options, seed

pytestmark = pytest.mark.services


def month_case():
    """The workshop month, every account in scope, no declared service."""
    return replace(make_case(accounts=()), name="workshop", start=MONTH[0], end=MONTH[1], services={})


def audit(frame) -> dict:
    return to_dict(audit_collected(month_case(), Collected((frame,))))


def test_the_audit_through_athena_equals_the_audit_of_the_local_file(moto, glue, proxy):  # noqa: F811
    names, rows = local_rows(MONTH)
    seed(moto, names, rows)
    spec = SourceSpec("cur", "billing", "athena", None, options(proxy.url))
    remote = resolve("athena")(spec, ReadContext(*MONTH, "USD")).read()
    local = read_cur_once(DEC2018, *MONTH)  # its source is named "cur" too
    assert local.spec.name == remote.spec.name == "cur"
    through_athena, from_the_file = audit(remote), audit(local)
    assert through_athena["sources"][0]["format"] == "athena" and from_the_file["sources"][0]["format"] == "cur"
    assert {k: v for k, v in through_athena.items() if k != "sources"} == \
        {k: v for k, v in from_the_file.items() if k != "sources"}
    # not an empty agreement: the month's money is all there, in every bucket it reaches
    assert through_athena["invoice_total"] == "408.38"
    assert through_athena["total"] == "539.85"  # effective cost: the amortised commitments
    assert sum(1 for b in through_athena["buckets"].values() if b["parts"]) >= 2
