"""GCP resource-based committed use discounts (connectors.billing.gcp_commitments) on a held-out-style
case: cloudgen's GKE day in the detailed export, with a commitment for ten H100s added as GCP bills
one: a ``Commitment v1: …`` fee row each hour for the committed GPU-seconds, and a
COMMITTED_USAGE_DISCOUNT credit taking the on-demand price off the covered GPU hours of one machine
(eight GPUs: 80 % of the commitment used).

Before this mapping, the fee rows were a GPU machine no telemetry knew (the SKU names the GPU) and the
covered hours cost nothing: the fee lay in unattributed and the machine's GPU time was free.
"""
from __future__ import annotations

import decimal
import json
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from benchmarks.cloudgen.generate import generate
from benchmarks.cloudgen_check import audit_document
from connectors.billing.gcp_commitments import IS_FEE, family

EXPORT = "billing/gcp_billing_export_resource_v1.jsonl"
GPU_SKU = "Nvidia H100 80GB GPU running in Americas"
FEE_SKU = "Commitment v1: Nvidia H100 80GB GPU running in Americas for 1 Year"
COMMITTED_GPUS = 10
FEE_PER_GPU_HOUR = Decimal("5.5")
CENT = Decimal("0.01")


def with_commitment(records: list[dict], *, fees: bool = True) -> tuple[list[dict], str]:
    """The export with the first H100 machine's GPU hours covered and, with ``fees``, the hourly fee
    rows of a ten-GPU commitment; and the covered machine's name."""
    machine = next(r["resource"]["name"] for r in records if r["sku"]["description"] == GPU_SKU)
    out = []
    for row in records:
        if row["sku"]["description"] == GPU_SKU and row["resource"]["name"] == machine:
            row = json.loads(json.dumps(row))
            row["credits"] = row["credits"] + [{
                "name": "Committed use discount: GPU", "amount": -row["cost"], "full_name": None,
                "id": "CommittedUsageDiscount:1", "type": "COMMITTED_USAGE_DISCOUNT"}]
            if fees:
                out.append(fee_row(row))
        out.append(row)
    return out, machine


def fee_row(usage: dict) -> dict:
    """The commitment's fee for the hour of ``usage``: ten GPUs, used or not."""
    fee = json.loads(json.dumps(usage))
    fee.update(sku={"id": "C0C0-1111-2222", "description": FEE_SKU}, labels=[], system_labels=[], credits=[],
               resource={"name": "h100-commitment", "global_name": "//compute.googleapis.com/projects/"
                         "acme-inference-prod/regions/us-central1/commitments/4242"})
    fee["cost"] = fee["cost_at_list"] = float(FEE_PER_GPU_HOUR * COMMITTED_GPUS)
    fee["usage"] = {"amount": 3600 * COMMITTED_GPUS, "unit": "seconds", "amount_in_pricing_units": COMMITTED_GPUS,
                    "pricing_unit": "hour"}
    return fee


def case_with(folder: Path, target: Path, records: list[dict], basis: str = "effective") -> Path:
    """A copy of the case folder with ``records`` as its export and ``basis`` as its cost basis."""
    shutil.copytree(folder, target)
    (target / EXPORT).write_text("".join(json.dumps(r) + "\n" for r in records))
    toml = (target / "case.toml").read_text()
    (target / "case.toml").write_text(toml.replace('cost_basis = "effective"', f'cost_basis = "{basis}"'))
    return target


def part(document: dict, bucket: str, name: str) -> Decimal:
    return sum((Decimal(p["amount"]) for p in document["buckets"][bucket]["parts"] if p["name"] == name),
               Decimal(0))


@pytest.fixture(scope="module")
def gke(tmp_path_factory):
    """cloudgen's GKE day (seed 5, detailed export): its folder, its records and its audit."""
    folder = tmp_path_factory.mktemp("gke-cud") / "case"
    with decimal.localcontext():  # cloudgen sets its own precision
        generate("gke", 5, folder, billing="native")
    records = [json.loads(line) for line in (folder / EXPORT).read_text().splitlines()]
    return folder, records, audit_document(folder)


@pytest.mark.parametrize("basis", ["effective", "billed"])
def test_a_gpu_commitment_is_a_purchase_its_covered_hours_amortised_and_its_rest_unused(gke, tmp_path, basis):
    folder, records, plain = gke
    covered_records, _ = with_commitment(records)
    document = audit_document(case_with(folder, tmp_path / "case", covered_records, basis))
    hours = sum(1 for r in covered_records if r["sku"]["description"] == FEE_SKU)
    fees = FEE_PER_GPU_HOUR * COMMITTED_GPUS * hours
    covered = sum((Decimal(str(c["amount"])) for r in covered_records for c in r["credits"]
                   if c["type"] == "COMMITTED_USAGE_DISCOUNT"), Decimal(0))
    assert hours == 24
    # the fee adds no GPU-hours and no machine: the paid GPU-hours are the case's own
    assert document["coverage"]["paid_gpu_hours"] == plain["coverage"]["paid_gpu_hours"] == "480.00"
    assert not [f for f in document["fit"] if f["kind"] == "gpu_resource_not_in_telemetry"], document["fit"]
    # the invoice: the fees replace the on-demand price of the covered hours, to the cent (the total in
    # scope rounded with the outside account's, METHOD §1, §5: each within a cent, the two adding up)
    truth = json.loads((folder / "truth.json").read_text())
    inside, outside = Decimal(truth["total_exact"]) + fees + covered, Decimal(truth["outside_scope"]["exact"])
    assert Decimal(document["total"]) + Decimal(document["outside_scope"]["amount"]) == (inside + outside).quantize(CENT)
    assert abs(Decimal(document["total"]) - inside) < CENT
    # eight of ten committed GPUs used: a fifth of the fees is unused commitment, on either basis
    assert part(document, "platform_overhead", "commitment_unused") == fees / 5
    assert part(plain, "platform_overhead", "commitment_unused") == 0
    bridge = document["bridge"]
    # the bridge as for a FOCUS export of the same fees: the purchase of all of them, its unused fifth
    # unused commitment (before: commitment_purchases 4/5 of the fees, unused_commitment 0.00)
    assert Decimal(bridge["commitment_purchases"]) == -Decimal(bridge["purchases_amortised"]) == fees
    assert Decimal(bridge["amortised_commitment"]) == fees * 4 / 5
    assert Decimal(bridge["unused_commitment"]) == fees / 5
    assert Decimal(bridge["billed"]) == Decimal(bridge["effective"]) == Decimal(document["total"])
    # the covered machine's GPU time is priced at the commitment's rate (lower): model compute falls
    assert Decimal(document["buckets"]["model_compute"]["amount"]) < Decimal(plain["buckets"]["model_compute"]["amount"])


def test_the_same_audit_on_both_bases_where_every_covered_hour_is_wholly_covered(gke, tmp_path):
    folder, records, _ = gke
    covered_records, _ = with_commitment(records)
    effective = audit_document(case_with(folder, tmp_path / "effective", covered_records, "effective"))
    billed = audit_document(case_with(folder, tmp_path / "billed", covered_records, "billed"))
    assert effective["buckets"] == billed["buckets"]


def test_on_the_list_basis_a_commitment_changes_nothing(gke, tmp_path):
    """Before: refused (the reader had no ListCost). Now the covered hours keep their cost_at_list
    (their list price), their credits list 0, and the fee's Purchase and Unused rows list 0 (as CUR and
    Azure unused commitments do): the list total is the uncommitted case's, to the cent."""
    folder, records, plain = gke
    covered_records, _ = with_commitment(records)
    document = audit_document(case_with(folder, tmp_path / "case", covered_records, "list"))
    assert document["total"] == document["bridge"]["list"] == plain["total"] == plain["bridge"]["list"]
    assert part(document, "platform_overhead", "commitment_unused") == 0
    assert plain["total"] == "4475.01"
    assert document["bridge"]["effective"] == "3914.07"  # the commitment's saving lies between the bases


def test_credits_with_no_fee_are_named_in_the_notes(gke, tmp_path):
    """The fee billed elsewhere (another billing account's export): the covered hours stay at their
    cost net of the credit, and the source's notes say which SKU and region, and that no fee was seen."""
    folder, records, plain = gke
    covered_records, _ = with_commitment(records, fees=False)
    document = audit_document(case_with(folder, tmp_path / "case", covered_records))
    notes = [n["note"] for s in document["sources"] if isinstance(s, dict) for n in s.get("notes", [])]
    assert any(GPU_SKU in n and "us-central1" in n and "no commitment fee" in n for n in notes), notes
    assert part(document, "platform_overhead", "commitment_unused") == 0
    assert not [n for s in plain["sources"] if isinstance(s, dict) for n in s.get("notes", [])
                if "commitment" in n["note"]]


@pytest.mark.parametrize(("fee", "usage"), [
    ("Commitment v1: N2 Cpu in Americas for 1 Year", "N2 Instance Core running in Americas"),
    ("Commitment v1: N2 Ram in Americas for 3 Years", "N2 Instance Ram running in Americas"),
    (FEE_SKU, GPU_SKU),
    ("commitment v2:  A3 Cpu in Europe for 1 Year", "A3 Instance Core running in Europe"),
])
def test_a_fee_sku_and_the_usage_sku_it_covers_name_one_resource(fee, usage):
    con = duckdb.connect()
    query = f"SELECT {family('sku_description')}, {IS_FEE} FROM (SELECT 'regular' AS cost_type, ?::VARCHAR AS sku_description)"
    (fee_family, is_fee), = con.execute(query, [fee]).fetchall()
    (usage_family, usage_is_fee), = con.execute(query, [usage]).fetchall()
    assert fee_family == usage_family and is_fee and not usage_is_fee


def test_a_spend_based_commitment_fee_is_no_resource_pool():
    con = duckdb.connect()
    row = con.execute(f"SELECT {IS_FEE} FROM (SELECT 'regular' AS cost_type, "
                      "'Commitment - dollar based v1: GCE flexible CUD for 1 Year' AS sku_description)").fetchall()
    assert row == [(False,)]


@pytest.mark.services
def test_the_commitment_case_through_bigquery_equals_its_local_export(emulator, gke, tmp_path):
    """The CUD credits come back from BigQuery's aggregation as they do from the local export's."""
    from tests.connectors.billing.test_gcp_billing_audit import CLOUDGEN_TABLE, comparable_text, local_and_bigquery

    folder, records, _ = gke
    covered_records, _ = with_commitment(records)
    local = case_with(folder, tmp_path / "local", covered_records)
    local_doc, remote_doc = local_and_bigquery(emulator, local, covered_records, tmp_path / "bigquery")
    assert comparable_text(remote_doc, CLOUDGEN_TABLE) == comparable_text(local_doc, str(local / EXPORT), EXPORT)
    assert part(remote_doc, "platform_overhead", "commitment_unused") > 0


# a fee cut in three: (the fee rows, one per project) -> each project's covered hour's share. The
# shares are the differences of the cut's bounds fee × 1/3 and fee × 2/3, each rounded to 9 places,
# and of the fee itself: the middle share takes the billionth the rounding leaves. In DOUBLE (about 16
# significant digits) the fee of 123456789012.37 was cut .123340800, .123340800, .123318400 and its
# Purchases were .120006656, .120006656, .129986688; the fee of 1234567890123456.37 was cut
# .140607488, .140607488, .088785024 and so were its Purchases: cents off (.12, .12, .13).
THIRDS = {
    ("41152263004.12", "41152263004.12", "41152263004.13"):
        ("41152263004.123333333", "41152263004.123333334", "41152263004.123333333"),
    ("411522630041152.12", "411522630041152.12", "411522630041152.13"):
        ("411522630041152.123333333", "411522630041152.123333334", "411522630041152.123333333"),
}


@pytest.mark.parametrize(("fees", "shares"), list(THIRDS.items()))
def test_a_large_fee_is_cut_exactly_over_three_projects_covered_alike(tmp_path, fees, shares):
    """A commitment of three GPUs, its fee billed to three projects, each covering one GPU-hour: each
    project's covered hour takes a third of the whole fee, exactly to the nano, the thirds add up to
    the fee, and each project's Purchase is its own fee row (the commitment is used up)."""
    from datetime import datetime, timezone

    from tests.connectors.billing.test_gcp_spend_commitments import mapped
    from tests.servers.gcp_export import row

    hour, projects = datetime(2026, 9, 1, 5, tzinfo=timezone.utc), ("ml-a", "ml-b", "ml-c")
    credit = [("Committed use discount: GPU", "-11.06", "COMMITTED_USAGE_DISCOUNT")]
    records = [row(hour, "Compute Engine", FEE_SKU, fee, project=project, resource="h100-commitment",
                   amount="3600", priced="1") for project, fee in zip(projects, fees)]
    records += [row(hour, "Compute Engine", GPU_SKU, "11.06", project=project, resource=f"vm-{project}",
                    amount="3600", credits=credit) for project in projects]
    lines = mapped(tmp_path, records)
    got = {line["sub_account_id"]: line["effective_cost"] - line["billed_cost"] for line in lines
           if line["commitment_discount_status"] == "Used"}
    assert got == dict(zip(projects, map(Decimal, shares)))
    assert sum(got.values()) == sum(map(Decimal, fees))
    purchases = {line["sub_account_id"]: line["billed_cost"] for line in lines if line["charge_category"] == "Purchase"}
    assert purchases == dict(zip(projects, map(Decimal, fees)))


def test_the_commitment_ctes_run_once_for_the_notes_and_the_focus_rows(tmp_path, monkeypatch):
    """The notes of unpaired credits and the FOCUS rows read one ``cud`` table: the flags, covered
    quantities and shares are built into one query (before, the notes built them all a second time)."""
    from datetime import datetime, timezone

    from connectors.billing import gcp_commitments
    from tests.connectors.billing.test_gcp_spend_commitments import mapped
    from tests.servers.gcp_export import row

    built = []
    ctes = gcp_commitments.ctes
    monkeypatch.setattr(gcp_commitments, "ctes", lambda source: built.append(source) or ctes(source))
    hour = datetime(2026, 9, 1, 5, tzinfo=timezone.utc)
    credit = [("Committed use discount: GPU", "-11.06", "COMMITTED_USAGE_DISCOUNT")]
    lines = mapped(tmp_path, [row(hour, "Compute Engine", FEE_SKU, "5.5", resource="h100-commitment", amount="3600"),
                              row(hour, "Compute Engine", GPU_SKU, "11.06", resource="vm-1", amount="3600",
                                  credits=credit)])
    assert built == ["a"]
    assert [line["billed_cost"] for line in lines if line["charge_category"] == "Purchase"] == [Decimal("5.5")]
