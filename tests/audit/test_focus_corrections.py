"""A FOCUS correction (ChargeClass Correction, FOCUS 1.0+) reconciles as the Azure export's refund does.

cloudgen aks 10909 with commitments, two refunds added (a verifier's case): a NAT Gateway refund of
−25.00 and an ND96isr H100 v5 VM refund of −100.00, quantities 0. The Azure export writes them
ChargeType Refund; FOCUS writes them ChargeCategory Usage, ChargeClass Correction. Before, the FOCUS
twin priced them as usage, quantity × unit price = 0 against their cost, and did not reconcile
(bottom-up 3751.53, gap −0.030883) where the export did (3639.03, 0.000031)."""
from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

import pytest

from benchmarks.cloudgen_check import audit_document
from connectors.base import ReadContext, SourceSpec
from connectors.billing.focus import FocusConnector
from tests.builders import UTC, generated, rewritten_billing

#: the usage rows the refunds copy: (meter, cost); FOCUS names the meter SkuMeter, the EA export MeterName
NAT = ("Standard Gateway", "1.08")
H100 = ("ND96isr H100 v5", "2359.68")
FOCUS_COSTS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")
QUANTITIES = ("PricingQuantity", "ConsumedQuantity")


@pytest.fixture(scope="module")
def focus(tmp_path_factory) -> Path:
    """cloudgen's AKS day with reservations, its FOCUS export."""
    return generated(tmp_path_factory, "aks10909f", "aks", 10909, billing="focus", commitments=True)


@pytest.fixture(scope="module")
def native(tmp_path_factory) -> Path:
    """The same day as the Azure EA AmortizedCost export."""
    return generated(tmp_path_factory, "aks10909n", "aks", 10909, billing="native", commitments=True)


def focus_row(rows: list[dict], template: tuple[str, str], cost: str, quantity: str = "0", **over) -> dict:
    """A copy of the FOCUS usage row of ``template`` as a correction of ``cost`` and ``quantity``."""
    row = next(r for r in rows if (r["SkuMeter"], r["BilledCost"]) == template)
    return {**row, **dict.fromkeys(FOCUS_COSTS, cost), **dict.fromkeys(QUANTITIES, quantity),
            "ChargeClass": "Correction", **over}


def native_refund(rows: list[dict], template: tuple[str, str], cost: str) -> dict:
    """A copy of the EA usage row of ``template`` as a refund of ``cost``."""
    row = next(r for r in rows if (r["MeterName"], r["Cost"]) == template)
    return {**row, "Quantity": "0", "Cost": cost, "ChargeType": "Refund", "Frequency": "OneTime"}


def refunds(focus_file: bool):
    """The rows with the verifier's two refunds added, as FOCUS or the Azure export writes them."""
    make = focus_row if focus_file else native_refund
    return lambda rows: rows + [make(rows, NAT, "-25.00"), make(rows, H100, "-100.00")]


def reconciliation(document: dict) -> tuple:
    r = document["reconciliation"]
    return r["top_down"], r["bottom_up"], r["gap"], r["verdict"]


def classes(document: dict, *names: str) -> list[tuple[str, str, str]]:
    """(gross, credits, net) of the classes ``names``."""
    found = {c["class"]: (c["gross"], c["credits"], c["net"]) for c in document["classes"]}
    return [found[name] for name in names]


def test_a_usage_correction_without_quantity_reconciles_as_the_exports_refund(focus, native, tmp_path):
    """Both twins: the same reconciliation (before: FOCUS bottom-up 3751.53, gap −0.030883,
    does_not_reconcile), the refunds netted as credits into the classes they apply to."""
    got = audit_document(rewritten_billing(focus, tmp_path / "focus", refunds(True)))
    want = audit_document(rewritten_billing(native, tmp_path / "native", refunds(False)))
    assert reconciliation(want) == ("3639.15", "3639.03", "0.000031", "reconciles")
    assert reconciliation(got) == reconciliation(want)
    assert classes(got, "gpu_compute", "serving_network") == classes(want, "gpu_compute", "serving_network") == [
        ("3934.16", "-100.00", "3834.16"), ("8.78", "-25.00", "-16.22")]


def test_a_correction_with_a_quantity_stays_usage_and_a_credit_stays_a_credit(focus, tmp_path):
    """A correction that bills a quantity (the NAT Gateway's day taken back, −24 h at 0.045) is usage
    priced at quantity × unit price; a Credit row of −25.00 nets as a credit, as before."""
    def change(rows):
        return rows + [focus_row(rows, NAT, "-1.08", "-24"),
                       focus_row(rows, NAT, "-25.00", ChargeCategory="Credit", ChargeClass="")]
    document = audit_document(rewritten_billing(focus, tmp_path / "case", change))
    assert classes(document, "serving_network") == [("7.70", "-25.00", "-17.30")]
    price = next(d["detail"] for d in document["reconciliation"]["drivers"]
                 if (d["name"], d["subject"]) == ("price", "serving_network"))
    assert price == "cost 7.70 vs quantity × unit price 7.70"


def test_the_reader_reads_a_usage_correction_without_quantity_as_a_refund(tmp_path):
    """Only a usage correction whose PricingQuantity is 0 or null: a correction with a quantity stays
    usage, a purchase's correction (a commitment refund) a purchase, a credit a credit."""
    path = tmp_path / "corrections.csv"
    rows = [("Usage", "Correction", "0"), ("Usage", "Correction", ""), ("Usage", "Correction", "-2"),
            ("Usage", "", "0"), ("Purchase", "Correction", "0"), ("Credit", "", ""), ("Credit", "Correction", "")]
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ChargeClass", "PricingQuantity",
                         "BilledCost", "EffectiveCost", "BillingCurrency", "ResourceId"])
        for n, (category, klass, quantity) in enumerate(rows):
            writer.writerow(["2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", category, klass, quantity, "-1", "-1",
                             "USD", f"r{n}"])
    spec = SourceSpec(name="bill", kind="billing", format="focus", path=path, options={})
    window = ReadContext(start=datetime(2024, 1, 1, tzinfo=UTC), end=datetime(2024, 1, 2, tzinfo=UTC), currency="USD")
    lines = FocusConnector(spec, window).read().tables["lines"]
    assert lines.sort_values("row")["charge_category"].tolist() == [
        "Refund", "Refund", "Usage", "Usage", "Purchase", "Credit", "Credit"]

