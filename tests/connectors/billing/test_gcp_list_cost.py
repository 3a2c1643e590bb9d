"""The GCP export's ``cost_at_list`` as FOCUS ListCost: the list basis on a GCP export.

Before, the reader never read ``cost_at_list``, so ``cost_basis = "list"`` was refused on every GCP
export. Now a group's ListCost is the sum of its rows' ``cost_at_list`` where every row has one
(else NULL: the list basis refuses that line by name, never counts part of its list price), credit
rows list at their cost as FOCUS has it (commitment and contractual-discount credits, and commitment
fee rows, at 0), and an export without the column reads as before. The rows are
the synthetic May 2024 detailed export of tests/servers/gcp_export.py.
"""
from __future__ import annotations

import json
import re
from dataclasses import replace
from decimal import ROUND_HALF_EVEN, Decimal

import pytest

from audit.audit_json import to_dict
from audit.collected import Collected
from audit.lines import basis_amount
from audit.pipeline import audit_collected
from connectors.billing.gcp_sql import render
from connectors.errors import InputErrors
from schemas.billing import line_total
from tests.builders import make_case
from tests.connectors.billing.test_gcp_billing import (  # noqa: F401 (fixtures)
    DETAILED,
    STANDARD,
    comparable,
    connector,
    loaded,
    pd_assert_equal,
    rows,
    seconds_in_may,
)
from tests.servers.bigquery import DATASET, PROJECT, load_table
from tests.servers.gcp_export import JUNE, MAY, as_float_json, bq_schema, export_rows, in_window, write_ndjson, write_parquet

LISTED = f"{PROJECT}.{DATASET}.gcp_billing_export_resource_v1_listed"
REFUSAL = ("cost_basis = 'list' needs ListCost on every line it counts; it is missing on {count} line(s) "
           "(rows {rows})")


def with_list_prices(records: list[dict]) -> list[dict]:
    """The rows with ``cost_at_list`` (a float, as the export writes FLOAT64): usage at 1.25 × its cost
    (to the micro-unit), tax and adjustments at their cost."""
    out = []
    for record in records:
        cost = Decimal(record["cost"])
        listed = (cost * Decimal("1.25")).quantize(Decimal("0.000001")) if record["cost_type"] == "regular" else cost
        out.append(dict(record, cost_at_list=float(listed)))
    return out


#: credit types that list at 0 (commitment credits, contractual discounts); every other credit lists at its cost
UNLISTED = {"COMMITTED_USAGE_DISCOUNT", "COMMITTED_USAGE_DISCOUNT_DOLLAR_BASE", "FEE_UTILIZATION_OFFSET", "DISCOUNT"}


def listed_credits(record: dict) -> Decimal:
    """The row's credits that list at their cost (FOCUS: a credit's ListCost is its BilledCost)."""
    return sum((Decimal(c["amount"]) for c in record["credits"] if c["type"] not in UNLISTED), Decimal(0))


def list_total(records: list[dict]) -> Decimal:
    """The oracle: Σ cost_at_list + the listed credits of the rows in the window, from the floats' shortest
    text, each clipped to May pro rata by time (the Pacific invoice month's tax: 737 of its 744 hours)."""
    total = Decimal(0)
    for r in in_window(records):
        inside, whole = seconds_in_may(r)
        total += (Decimal(repr(r["cost_at_list"])) + listed_credits(r)) * inside / whole
    return total


def audit_on_list(frame) -> dict:
    """audit.json of May 2024 on the list basis, every project in scope."""
    case = replace(make_case(accounts=(), basis="list"), name="gcp-may", start=MAY, end=JUNE, services={})
    return to_dict(audit_collected(case, Collected((frame,))))


def refusal(frame) -> str:
    """The message of the list basis's refusal of ``frame``'s lines (one source file)."""
    with pytest.raises(InputErrors) as caught:
        basis_amount(frame.tables["lines"], "list")
    (error,) = caught.value.errors
    return error.message


def test_cost_at_list_on_every_row_gives_the_list_basis(tmp_path):
    """Before: refused ("missing on 1680 line(s)", credits included). Now every line's ListCost is known: the list
    total is Σ cost_at_list + the credits of the window's rows to the last digit. Before, credits listed 0 (list
    18,018.18, above FOCUS's figure by the sustained-use, free-tier, promotion and unknown-type credits); now
    they list at their cost, the committed use discount credits at 0 (their usage lists before commitments)."""
    records = with_list_prices(export_rows())
    frame = connector(path=write_ndjson(records, tmp_path / "listed.json")).read()
    lines = frame.tables["lines"]
    assert basis_amount(lines, "list").sum() == list_total(records)
    assert list_total(records).quantize(Decimal("0.000001")) == Decimal("17865.643783")
    credits = lines[lines.charge_category == "Credit"]
    kinds = credits.extra.map(lambda extra: json.loads(extra)["x_CreditType"])
    assert (credits.list_cost[kinds != "COMMITTED_USAGE_DISCOUNT"] == credits.billed_cost[kinds != "COMMITTED_USAGE_DISCOUNT"]).all()
    assert set(credits.list_cost[kinds == "COMMITTED_USAGE_DISCOUNT"]) == {Decimal(0)}
    assert set(kinds) == {"COMMITTED_USAGE_DISCOUNT", "SUSTAINED_USAGE_DISCOUNT", "FREE_TIER", "PROMOTION", "OTHER"}
    document = audit_on_list(frame)
    assert document["bridge"]["list"] == str(list_total(records).quantize(Decimal("0.01"), ROUND_HALF_EVEN))
    assert document["total"] == "17865.64"


def test_a_group_with_one_row_without_cost_at_list_is_refused_by_name(tmp_path):
    """A day's group of the 2 internet egress rows of 21 May, one of them without cost_at_list: its
    list cost is unknown (not the other row's), so the list basis names that one line. (A GPU row is
    no such group: at grain day it keeps its hour.)"""
    records = with_list_prices(export_rows())
    gap = next(i for i, r in enumerate(records) if r["sku"]["description"].startswith("Network Internet Egress")
               and r["usage_start_time"].startswith("2024-05-21"))
    del records[gap]["cost_at_list"]
    frame = connector(path=write_ndjson(records, tmp_path / "gap.json"), grain="day").read()
    lines = frame.tables["lines"]
    unknown = lines[lines.list_cost.isna()]
    assert len(unknown) == 1
    (line,) = unknown.to_dict("records")
    assert (line["charge_description"], line["resource_id"], str(line["start"])[:10]) == (
        "Network Internet Egress from Americas to Americas", "", "2024-05-21")
    assert json.loads(line["extra"])["x_ExportRows"] == "2"
    assert REFUSAL.format(count=1, rows=f"{line['row']} (Networking, Network Internet Egress from Americas to "
                                        "Americas from 2024-05-21 00:00 UTC)") in refusal(frame)


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_an_export_without_cost_at_list_reads_as_before(tmp_path, fmt):
    """No column at all (Parquet: no such column; NDJSON: no such key): every charge line's ListCost is
    unknown and the list basis is refused as before, naming the charge lines (credits list at their cost, a
    committed use discount's at 0)."""
    records = export_rows()
    path = write_ndjson(records, tmp_path / "e.json") if fmt == "json" else write_parquet(records, tmp_path / "e.parquet")
    frame = connector(path=path).read()
    lines = frame.tables["lines"]
    charges = lines[lines.charge_category != "Credit"]
    assert charges.list_cost.isna().all()
    credits = lines[lines.charge_category == "Credit"]
    assert credits.list_cost.notna().all() and credits.list_cost.sum() == Decimal("-152.539526")
    message = refusal(frame)
    assert REFUSAL.format(count=line_total(charges), rows="")[:-1] in message
    assert [int(r) for r in re.findall(r"(?:rows |\), )(\d+) \(", message)] == sorted(charges.row)[:5]
    assert message.endswith("), …) (expected an export with ListCost, or another cost_basis)") or ", …)" in message


def test_rendering_reads_cost_at_list_only_where_the_export_has_it():
    """BigQuery: a group's list cost only where every row has one; no cost_at_list → NULL in its place."""
    with_column = render("gcp_lines", "bigquery", table=DETAILED, start=MAY, end=JUNE)
    assert "PARSE_NUMERIC(CAST(e.cost_at_list AS STRING)) AS list_cost" in with_column
    assert "CASE WHEN COUNT(list_cost) = COUNT(*) THEN SUM(list_cost) END AS list_cost" in with_column
    without = render("gcp_lines", "bigquery", table=DETAILED, start=MAY, end=JUNE, list_cost=False)
    assert "cost_at_list" not in without
    assert "PARSE_NUMERIC(CAST(CAST(NULL AS FLOAT64) AS STRING)) AS list_cost" in without


@pytest.mark.services
def test_bigquery_reads_cost_at_list_as_the_local_export_does(loaded, emulator, tmp_path):  # noqa: F811
    """The emulator's FLOAT64 cost_at_list column: the same lines as the local NDJSON, the same list
    total; the standard table (no such column) lists nothing on its charge lines."""
    records = with_list_prices(export_rows())
    schema = [*bq_schema(), *[f for f in bq_schema(full=True) if f.name == "cost_at_list"]]
    load_table(loaded, LISTED, [dict(as_float_json(r), cost_at_list=r["cost_at_list"]) for r in records], schema)
    remote = connector(table=LISTED, endpoint=f"http://127.0.0.1:{emulator}").read()
    local = connector(path=write_ndjson(records, tmp_path / "listed.json")).read()
    pd_assert_equal(comparable(local.tables["lines"]), comparable(remote.tables["lines"]))
    assert basis_amount(remote.tables["lines"], "list").sum() == list_total(records)
    standard = connector(table=STANDARD, endpoint=f"http://127.0.0.1:{emulator}").read().tables["lines"]
    assert standard[standard.charge_category != "Credit"].list_cost.isna().all()

