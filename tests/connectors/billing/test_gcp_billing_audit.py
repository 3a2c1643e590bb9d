"""The whole audit of a month read from BigQuery equals the audit of the same export read locally.

Issue 18's bar for the attribution where the bill lives: the same cents whichever engine ran the
query. The BigQuery path is the connector's own (google-cloud-bigquery against the session's
bqemulator on 127.0.0.1) over the synthetic May 2024 detailed export of
``tests/servers/gcp_export.py`` (FLOAT64 money, credits arrays, GPU SKUs, machines billed in parts,
tax, adjustments); the local path is the same rows as ``bq extract`` NDJSON and as Parquet, read by
DuckDB. Both documents are audit.json as ``costaudit run`` writes it, the sources named alike;
only ``sources`` may differ, and what names the table or the file read: its name where a reason
cites it, and the line ids, replaced by their position among the lines before the comparison.
"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from audit.audit_json import to_dict
from audit.collected import Collected
from audit.pipeline import audit_collected
from tests.builders import make_case
from tests.connectors.billing.test_gcp_billing import (  # noqa: F401 (fixtures)
    DETAILED,
    connector,
    from_bigquery,
    loaded,
    local_files,
    rows,
)
from tests.servers.gcp_export import JUNE, MAY

pytestmark = pytest.mark.services


def may_case():
    """May 2024, every project in scope, no declared service."""
    return replace(make_case(accounts=()), name="gcp-may", start=MAY, end=JUNE, services={})


def document(frame, read: str) -> str:
    """audit.json without ``sources``, as text, the name of what was ``read`` (a table, a file)
    replaced, and each line id by its position."""
    doc = to_dict(audit_collected(may_case(), Collected((frame,))))
    text = json.dumps({k: v for k, v in doc.items() if k != "sources"}, sort_keys=True)
    assert read in text  # the bridge says on which source ListCost and ContractedCost are missing
    text = text.replace(read, "<source>")
    ids = list(frame.tables["lines"]["line_id"])
    for position, line_id in sorted(enumerate(ids), key=lambda p: -len(p[1])):
        text = text.replace(line_id, f"<line {position}>")
    return text


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_the_audit_from_bigquery_equals_the_audit_of_the_local_export(from_bigquery, local_files, fmt):  # noqa: F811
    _, remote = from_bigquery
    local = connector(path=local_files[fmt]).read()
    assert remote.spec.name == local.spec.name
    through_bigquery = document(remote, DETAILED)
    assert through_bigquery == document(local, str(local_files[fmt]))
    # not an empty agreement: the month's money, GPU lines among it
    doc = json.loads(through_bigquery)
    assert doc["invoice_total"] == doc["total"] and float(doc["total"]) > 1000
    assert doc["coverage"]["paid_gpu_hours"] not in (None, "0.00")
