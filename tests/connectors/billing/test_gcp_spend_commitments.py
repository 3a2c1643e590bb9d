"""GCP spend-based committed use discounts (``Commitment - dollar based v1: …``) in the billing export,
mapped by connectors.billing.gcp_commitments as FOCUS models a commitment.

The fee of a spend-based commitment is priced per hundredth of a US dollar of on-demand spend a
commitment covers each hour; Google's documentation works three cases of one hour of a Compute
flexible commitment, and so do the first tests here, in both data models:

* **legacy**: the covered usage is billed at its on-demand price and a
  ``COMMITTED_USAGE_DISCOUNT_DOLLAR_BASE`` credit takes off the part the commitment covers;
* **2025 on**: the covered usage is billed at the discounted price, and a ``FEE_UTILIZATION_OFFSET``
  credit on the fee row takes off the part of the fee that usage used.

Before this mapping the fee was ``unmatched`` (unattributed, whole), and, in the new data model, its
offset credit was spread over the account's usage as if it were a discount on it.
"""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks.cloudgen_check import audit_document
from connectors.base import ReadContext, SourceSpec
from connectors.registry import resolve
from tests.servers.gcp_export import row

HOUR = datetime(2026, 9, 1, 5, tzinfo=timezone.utc)
FEE_SKU = "Commitment - dollar based v1: GCE for 1 year"
USAGE_SKU = "N2 Instance Core running in Americas"
OFFSET = "FEE_UTILIZATION_OFFSET"
DOLLAR_BASE = "COMMITTED_USAGE_DISCOUNT_DOLLAR_BASE"


def fee(cost: str, committed_dollars: str, *, offset: str | None = None, rate: str = "1") -> dict:
    """The hour's fee row: ``committed_dollars`` of on-demand spend, priced per hundredth."""
    credits = [("Fee utilization offset", offset, OFFSET)] if offset else []
    out = row(HOUR, "Compute Engine", FEE_SKU, cost, amount=str(Decimal(committed_dollars) * 360000),
              priced=str(Decimal(committed_dollars) * 100), credits=credits)
    out["currency_conversion_rate"] = rate
    return out


def usage(cost: str, *, credit: str | None = None, rate: str = "1", resource: str = "vm-1") -> dict:
    """An hour of N2 cores on one VM, with the legacy credit where ``credit`` is given."""
    credits = [("Committed use discount - dollar based: GCE Commitments", credit, DOLLAR_BASE)] if credit else []
    out = row(HOUR, "Compute Engine", USAGE_SKU, cost, resource=resource, amount="345600", priced="96",
              credits=credits)
    out["currency_conversion_rate"] = rate
    return out


def read_export(tmp_path: Path, records: list[dict], currency: str = "USD") -> dict:
    """The connector's tables of ``records`` (a local export)."""
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(dict(r, currency=currency)) + "\n" for r in records))
    return read_path(path, currency)


def read_path(path: Path, currency: str = "USD") -> dict:
    """The connector's tables of the export at ``path``."""
    spec = SourceSpec(name="gcp", kind="billing", format="gcp_billing", path=path, options={})
    context = ReadContext(start=datetime(2026, 9, 1, tzinfo=timezone.utc),
                          end=datetime(2026, 9, 2, tzinfo=timezone.utc), currency=currency)
    return resolve("gcp_billing")(spec, context).read().tables


def mapped(tmp_path: Path, records: list[dict], currency: str = "USD") -> list[dict]:
    """The connector's lines of ``records``, as dicts."""
    return read_export(tmp_path, records, currency)["lines"].to_dict("records")


def notes_of(tmp_path: Path, records: list[dict]) -> str:
    """The source's notes on ``records``, joined."""
    return " ".join(read_export(tmp_path, records)["notes"]["note"])


def summary(lines: list[dict]) -> dict[str, Decimal]:
    """Purchase, unused and the covered usage's billed and effective cost (its credit lines in)."""
    out = {"purchase": Decimal(0), "unused": Decimal(0), "usage_billed": Decimal(0),
           "usage_effective": Decimal(0), "billed": Decimal(0), "effective": Decimal(0)}
    for line in lines:
        out["billed"] += line["billed_cost"]
        out["effective"] += line["effective_cost"]
        if line["charge_category"] == "Purchase":
            out["purchase"] += line["billed_cost"]
        elif line["commitment_discount_status"] == "Unused":
            out["unused"] += line["effective_cost"]
        elif line["charge_description"] == USAGE_SKU:
            out["usage_billed"] += line["billed_cost"]
            out["usage_effective"] += line["effective_cost"]
    return out


# Google's three worked hours: (fee, committed on-demand $, on-demand usage $, credit) → (used, unused)
WORKED = {
    "usage equals the commitment": ("36", "50", "50", "-50", "36", "0"),
    "usage above the commitment": ("28.8", "40", "50", "-40", "28.8", "0"),
    "usage below the commitment": ("43.2", "60", "50", "-50", "36", "7.2"),
}


@pytest.mark.parametrize("case", list(WORKED))
def test_google_s_worked_hours_in_the_legacy_data_model(tmp_path, case):
    """The fee's used part (fee × covered ÷ committed) amortised into the covered hour; the rest Unused."""
    cost, committed, on_demand, credit, used, unused = WORKED[case]
    got = summary(mapped(tmp_path, [fee(cost, committed), usage(on_demand, credit=credit)]))
    invoice = Decimal(cost) + Decimal(on_demand) + Decimal(credit)
    assert got["billed"] == got["effective"] == invoice
    assert got["purchase"] == Decimal(used) and got["unused"] == Decimal(unused)
    # the hour (with its credit, a line of its own) costs its uncovered part plus its share of the fee
    assert got["usage_effective"] == Decimal(on_demand) + Decimal(credit) + Decimal(used)


@pytest.mark.parametrize("case", list(WORKED))
def test_the_same_hours_in_the_data_model_of_2025(tmp_path, case):
    """Usage billed at the discounted price, the fee offset by what was used: the rest is Unused, the
    offset never leaves its fee (it used to be spread over the account's usage as a discount)."""
    cost, committed, on_demand, credit, used, unused = WORKED[case]
    discounted = Decimal(on_demand) + Decimal(credit) + Decimal(used)  # covered part at the CUD price
    lines = mapped(tmp_path, [fee(cost, committed, offset=str(-Decimal(used))), usage(str(discounted))])
    got = summary(lines)
    assert got["billed"] == got["effective"] == Decimal(cost) - Decimal(used) + discounted
    assert got["unused"] == Decimal(unused) and got["purchase"] == 0
    assert got["usage_effective"] == got["usage_billed"] == discounted
    assert not [line for line in lines if line["charge_category"] == "Credit"]


def test_a_fee_sku_of_another_name_is_known_by_its_offset_credit(tmp_path):
    """Google's 2026 fee SKUs (priced at $1) may be named otherwise: a row whose cost a
    FEE_UTILIZATION_OFFSET credit offsets is a spend-based fee whatever its SKU says."""
    renamed = fee("43.2", "43.2", offset="-36")
    renamed["sku"] = {"id": "5515-81A8-03A2", "description": "Compute flexible CUD fee, 1 year"}
    got = summary(mapped(tmp_path, [renamed, usage("36")]))
    assert got["unused"] == Decimal("7.2") and got["usage_effective"] == Decimal(36)


def test_another_billing_currency_compares_the_commitment_in_dollars(tmp_path):
    """The committed amount is in US dollars; the fee and credits in the billing currency (× the rate)."""
    rate = Decimal("1.35")
    cost, committed, on_demand, credit, used, unused = WORKED["usage below the commitment"]
    records = [fee(str(Decimal(cost) * rate), committed, rate=str(rate)),
               usage(str(Decimal(on_demand) * rate), credit=str(Decimal(credit) * rate), rate=str(rate))]
    got = summary(mapped(tmp_path, records, currency="CAD"))
    assert got["purchase"] == Decimal(used) * rate and got["unused"] == Decimal(unused) * rate


def test_a_fee_that_covers_nothing_is_unused_and_credits_without_a_fee_are_named(tmp_path):
    """No credit meets the first fee (another service's usage took them); the second service's
    credits meet no fee and are named in the notes, their usage at its net cost."""
    other = usage("50", credit="-50")
    other["service"] = {"id": "9662-B51E-5089", "description": "Cloud SQL"}
    got = summary(mapped(tmp_path, [fee("36", "50"), other]))
    assert got["unused"] == Decimal(36) and got["purchase"] == 0
    notes = notes_of(tmp_path, [fee("36", "50"), other])
    assert "spend-based" in notes and "Cloud SQL" in notes and FEE_SKU in notes


def test_a_fee_that_states_no_committed_amount_is_taken_as_used_and_said_so(tmp_path):
    """Without a pricing quantity the use cannot be worked out: the fee is taken as used up to what
    its credits cover, and the notes say that it is an assumption."""
    unstated = fee("36", "50")
    unstated["usage"]["amount_in_pricing_units"] = "0"
    records = [unstated, usage("50", credit="-50")]
    assert summary(mapped(tmp_path, records))["purchase"] == Decimal(36)
    notes = notes_of(tmp_path, records)
    assert "states no committed amount" in notes and "assumption" in notes


def test_the_fee_follows_the_services_label_of_google_s_own_queries(tmp_path):
    """A fee labelled goog-originating-service-id pairs with that service's credits."""
    sql = usage("50", credit="-50")
    sql["service"] = {"id": "9662-B51E-5089", "description": "Cloud SQL"}
    labelled = fee("43.2", "60")
    labelled["labels"] = [{"key": "goog-originating-service-id", "value": "9662-B51E-5089"}]
    got = summary(mapped(tmp_path, [labelled, sql]))
    assert got["purchase"] == Decimal(36) and got["unused"] == Decimal("7.2")


def test_a_fee_attributed_to_two_projects_keeps_each_project_s_part(tmp_path):
    """GCP attributes a shared commitment's fee to the projects that use it (proportional attribution):
    the pool's Purchase and Unused rows are cut in the same proportions, so a [scope] of one project
    takes its part of the unused commitment, not all or nothing."""
    first, second = fee("28.8", "40"), fee("14.4", "20")
    second["project"] = {"id": "ml-batch", "number": "987654321", "name": "ml-batch"}
    lines = mapped(tmp_path, [first, second, usage("50", credit="-50")])
    by_project: dict[tuple[str, str], Decimal] = {}
    for line in lines:
        if line["charge_category"] == "Purchase" or line["commitment_discount_status"] == "Unused":
            key = (line["sub_account_id"], line["charge_category"])
            by_project[key] = by_project.get(key, Decimal(0)) + line["billed_cost"]
    assert by_project == {("ml-prod", "Purchase"): Decimal(24), ("ml-prod", "Usage"): Decimal("4.8"),
                          ("ml-batch", "Purchase"): Decimal(12), ("ml-batch", "Usage"): Decimal("2.4")}
    # each project's rows carry its own fee rows' quantity (seconds of hundredths of a dollar)
    quantities = {line["sub_account_id"]: line["consumed_quantity"] for line in lines
                  if line["commitment_discount_status"] == "Unused"}
    assert quantities == {"ml-prod": Decimal(40 * 360000), "ml-batch": Decimal(20 * 360000)}


# --- a held-out-style day: cloudgen's GKE case with a commitment on the H100 machines ------------

EXPORT = "billing/gcp_billing_export_resource_v1.jsonl"


def with_spend_commitment(records: list[dict], model: str, use: Decimal) -> list[dict]:
    """Seven tenths of every H100 GPU hour in scope covered by a flexible commitment at 60 % of
    on-demand, of which ``use`` is used; in the ``legacy`` or the ``2025`` data model."""
    out, covered = [], {}
    for record in records:
        record = json.loads(json.dumps(record))
        if "H100" in record["sku"]["description"] and record["project"]["id"] == "acme-inference-prod":
            part = (Decimal(str(record["cost"])) * Decimal("0.7")).quantize(Decimal("0.000001"))
            if model == "legacy":
                record["credits"].append({"name": "Committed use discount - dollar based: GCE Commitments",
                                          "amount": float(-part), "full_name": None, "id": "", "type": DOLLAR_BASE})
            else:
                record["cost"] = float(Decimal(str(record["cost"])) - part * Decimal("0.4"))
            covered.setdefault(record["usage_start_time"], [record, Decimal(0)])[1] += part
        out.append(record)
    for template, part in covered.values():
        committed = part / use
        row_ = json.loads(json.dumps(template))
        row_.update(sku={"id": "F1B7-A4A5-8F0C", "description": FEE_SKU}, labels=[], system_labels=[],
                    resource=None, cost=float(committed * Decimal("0.6")), credits=[])
        row_["usage"] = {"amount": float(committed * 360000), "unit": "seconds",
                         "amount_in_pricing_units": float(committed * 100), "pricing_unit": "hour"}
        if model != "legacy":
            row_["credits"] = [{"name": "Fee utilization offset", "amount": float(-part * Decimal("0.6")),
                                "full_name": None, "id": "", "type": OFFSET}]
        out.append(row_)
    return out


@pytest.fixture(scope="module")
def gke(tmp_path_factory):
    import decimal

    from benchmarks.cloudgen.generate import generate

    folder = tmp_path_factory.mktemp("gke-spend") / "case"
    with decimal.localcontext():
        generate("gke", 7, folder, billing="native")
    records = [json.loads(line) for line in (folder / EXPORT).read_text().splitlines()]
    return folder, records


def audited(gke, tmp_path: Path, model: str, use: Decimal) -> dict:
    folder, records = gke
    case = tmp_path / model
    shutil.copytree(folder, case)
    (case / EXPORT).write_text("".join(json.dumps(r) + "\n" for r in with_spend_commitment(records, model, use)))
    return audit_document(case)


def part(document: dict, bucket: str, name: str) -> Decimal:
    return sum((Decimal(p["amount"]) for p in document["buckets"][bucket]["parts"] if p["name"] == name), Decimal(0))


def test_both_data_models_give_the_same_audit_and_the_unused_fifth_is_overhead(gke, tmp_path):
    """A fifth of the commitment unused: commitment_unused is a fifth of the fees in both data models,
    the buckets are the same to the cent, and no fee is left unmatched."""
    legacy = audited(gke, tmp_path, "legacy", Decimal("0.8"))
    current = audited(gke, tmp_path, "current", Decimal("0.8"))
    assert {k: legacy["buckets"][k]["amount"] for k in legacy["buckets"]} == \
        {k: current["buckets"][k]["amount"] for k in current["buckets"]}
    assert legacy["total"] == current["total"]
    records = with_spend_commitment(gke[1], "legacy", Decimal("0.8"))
    fees = sum((Decimal(str(r["cost"])) for r in records if r["sku"]["description"] == FEE_SKU), Decimal(0))
    assert abs(part(legacy, "platform_overhead", "commitment_unused") - fees / 5) <= Decimal("0.01")
    for document in (legacy, current):
        assert part(document, "unattributed", "unmatched_line") == 0


@pytest.mark.services
@pytest.mark.parametrize("model", ["legacy", "current"])
def test_a_spend_based_commitment_through_bigquery_equals_its_local_export(emulator, gke, tmp_path, model):
    """The fee, its pricing quantity and conversion rate, and both kinds of credit come back from
    BigQuery's aggregation (the emulator) as they do from the local export's."""
    from tests.connectors.billing.test_gcp_billing_audit import CLOUDGEN_TABLE, comparable_text, local_and_bigquery

    folder, records = gke
    local = tmp_path / "local"
    shutil.copytree(folder, local)
    spent = with_spend_commitment(records, model, Decimal("0.8"))
    (local / EXPORT).write_text("".join(json.dumps(r) + "\n" for r in spent))
    local_doc, remote_doc = local_and_bigquery(emulator, local, spent, tmp_path / "bigquery")
    assert comparable_text(remote_doc, CLOUDGEN_TABLE) == comparable_text(local_doc, str(local / EXPORT), EXPORT)
    assert part(remote_doc, "platform_overhead", "commitment_unused") > 0


def test_a_parquet_export_without_the_conversion_rate_reads_it_as_one(tmp_path):
    """Hand-made Parquet exports may lack currency_conversion_rate: the commitment is then compared
    at a rate of 1, and the file still reads."""
    import pyarrow.parquet as pq

    from tests.servers.gcp_export import write_parquet

    path = write_parquet([fee("43.2", "60"), usage("50", credit="-50")], tmp_path / "full.parquet")
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["currency_conversion_rate"]), tmp_path / "export.parquet")
    path.unlink()
    tables = read_path(tmp_path / "export.parquet")
    got = summary(tables["lines"].to_dict("records"))
    assert got["purchase"] == Decimal(36) and got["unused"] == Decimal("7.2")
    assert "currency_conversion_rate" not in " ".join(tables["notes"]["note"])  # USD: the rate is 1


def test_another_currency_without_a_rate_is_compared_at_one_and_said_so(tmp_path):
    """A CAD export whose rows carry no conversion rate: the commitment (in dollars) is compared with
    the credits (in CAD) at 1, and the notes name the fee and the currency."""
    records = [fee("43.2", "60"), usage("50", credit="-50")]
    for record in records:
        record.pop("currency_conversion_rate")
    tables = read_export(tmp_path, records, currency="CAD")
    notes = " ".join(tables["notes"]["note"])
    assert "CAD" in notes and FEE_SKU in notes and "rate of 1" in notes
    assert summary(tables["lines"].to_dict("records"))["purchase"] == Decimal(36)
