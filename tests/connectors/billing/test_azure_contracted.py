"""Azure ContractedCost (UnitPrice × Quantity, Microsoft's FOCUS conversion): hand-checked lines of the
real EA exports and the synthetic MCA export, Unused / refund / tax lines, Marketplace lines without a
price, the MCA exchange rate, an export without UnitPrice, and the four-basis bridge of an Azure case."""
from __future__ import annotations

import csv
import json
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import pytest

from audit.audit_json import to_dict
from audit.bridge import bridge
from audit.case import load_case
from audit.lines import basis_amount
from audit.pipeline import run_audit
from connectors.errors import InputErrors
from tests.builders import billing_case
from tests.connectors.billing.test_azure import ACTUAL, AMORTISED, CAD, MCA, read, rewrite, total

pytestmark = pytest.mark.skipif(not ACTUAL.exists(), reason="shared billing data not present")


@lru_cache(maxsize=None)
def lines_of(path: Path, currency: str = "USD"):
    """A shared export read once (the frames are only inspected)."""
    return read(path, currency).tables["lines"]


def source(line) -> str:
    """How the line's ContractedCost was found (``x_ContractedCostSource``)."""
    return json.loads(line["extra"])["x_ContractedCostSource"]


def by_row(lines) -> dict:
    """Lines by their data row."""
    return {int(line["row"]): line for _, line in lines.iterrows()}


def write(target: Path, header: list[str], records: list[dict]) -> Path:
    """A CSV export from a header and records."""
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(records)
    return target


def mca_records() -> tuple[list[str], list[dict]]:
    """The synthetic MCA export's header and records."""
    with open(MCA, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames), list(reader)


# --- the fixtures, line by line -------------------------------------------------------------------

def test_mca_fixture_lines_are_unit_price_times_quantity():
    lines = by_row(lines_of(MCA))
    want = {1: "1958.184",   # reservation-covered: 72 h × 27.197 (its pre-commitment price, cost 1440)
            2: "652.728",    # on demand: 24 h × 27.197 = its cost
            3: "0",          # UnusedReservation: no usage priced
            4: "0.0000188",  # 0.0047 × 10K ops at 0.004 / 10K: 47 ops × 0.0000004
            5: "43.2",       # 0.72 × 100 h at 60 / 100 h: 72 h × 0.6
            6: "1.0875"}     # 12.5 GB × 0.087
    assert {rn: line["contracted_cost"] for rn, line in lines.items()} == {k: Decimal(v) for k, v in want.items()}
    for rn in (1, 2, 4, 5, 6):
        line = lines[rn]
        assert line["pricing_quantity"] * line["contracted_unit_price"] == line["contracted_cost"]
        assert source(line) == "UnitPrice × Quantity"
    assert source(lines[3]).startswith("unused commitment") and lines[3]["list_cost"] == 0
    assert lines[1]["contracted_unit_price"] == Decimal("27.197")
    assert json.loads(lines[1]["extra"])["x_EffectivePrice"] == "20"  # the commitment's price, kept aside


def test_ea_exports_price_covered_usage_and_purchases_at_unit_price():
    amortised = lines_of(AMORTISED)
    used = amortised[amortised["commitment_discount_status"] == "Used"]
    # reservation: 8 h × UnitPrice 0.146 (EffectivePrice 0.061644); savings plan: 0.32085564 h × 0.0416
    assert list(used["contracted_cost"]) == [Decimal("1.168"), Decimal("0.013347594624")]
    assert total(amortised["contracted_cost"]) == Decimal("16.979127594784")
    actual = lines_of(ACTUAL)
    purchase = actual[actual["charge_category"] == "Purchase"].iloc[0]
    assert purchase["contracted_cost"] == Decimal("3.25")  # 1 × 3.25, its billed price
    # 0.03225806 months × 15: the export's cost 0.4838709677419368 carries more digits than the quantity
    assert by_row(actual)[11]["contracted_cost"] == Decimal("0.4838709")
    assert total(actual["contracted_cost"]) == Decimal("8.545007719")
    # the contracted basis leaves the commitment purchase out: the covered usage carries its price
    assert total(basis_amount(actual, "contracted")) == Decimal("5.295007719")
    assert total(basis_amount(lines_of(MCA), "contracted")) == Decimal("2655.1995188")


def test_cad_export_is_priced_in_its_own_currency():
    lines = lines_of(CAD, "CAD")
    assert lines["contracted_cost"].notna().all()
    row = by_row(lines)[15]  # 11 h × UnitPrice 0.2 (the anonymiser's stand-in prices)
    assert row["contracted_cost"] == Decimal("2.2") and row["billed_cost"] == Decimal("0.122099941")


# --- lines priced otherwise --------------------------------------------------------------------------

def test_refund_tax_and_marketplace_lines(tmp_path):
    header, records = mca_records()
    header = header + ["publisherType"]
    base = dict(records[1], publisherType="Azure")
    extra = [
        dict(base, chargeType="Refund", costInBillingCurrency="-100", quantity="1", unitPrice="120"),
        dict(base, chargeType="Tax", costInBillingCurrency="5.5", quantity="", unitPrice=""),
        # Marketplace: no UnitPrice; UnitPrice 0 with a cost; a priced one
        dict(base, publisherType="Marketplace", publisherName="Contoso", unitPrice="", effectivePrice="",
             costInBillingCurrency="12.34", pricingModel="OnDemand"),
        dict(base, publisherType="Marketplace", publisherName="Contoso", unitPrice="0", effectivePrice="0",
             costInBillingCurrency="7", pricingModel="OnDemand"),
        dict(base, publisherType="Marketplace", publisherName="Contoso", unitPrice="0.5", quantity="3",
             costInBillingCurrency="1.5"),
    ]
    path = write(tmp_path / "mixed.csv", header, [dict(r, publisherType="Azure") for r in records] + extra)
    lines = by_row(read(path).tables["lines"])
    assert lines[7]["contracted_cost"] == Decimal("-100") and source(lines[7]).startswith("refund")
    assert lines[8]["contracted_cost"] == Decimal("5.5") and source(lines[8]).startswith("tax, credit")
    assert lines[9]["contracted_cost"] == Decimal("12.34") and source(lines[9]).startswith("no UnitPrice")
    assert lines[9]["contracted_unit_price"] is None
    assert lines[10]["contracted_cost"] == Decimal("7") and source(lines[10]).startswith("Marketplace line")
    assert lines[11]["contracted_cost"] == Decimal("1.5") and source(lines[11]) == "UnitPrice × Quantity"


def test_covered_usage_without_unit_price_is_null_and_named(tmp_path):
    path = rewrite(MCA, tmp_path / "gap.csv", lambda i, r: dict(r, unitPrice="") if i == 1 else r)
    lines = read(path).tables["lines"]
    line = by_row(lines)[1]
    assert line["contracted_cost"] is None and "covered usage without UnitPrice" in source(line)
    with pytest.raises(InputErrors) as caught:
        basis_amount(lines, "contracted")
    (error,) = caught.value.errors
    assert error.column == "ContractedCost" and "missing on 1 line(s) (rows 1 (" in error.message


def test_mca_exchange_rate_applies_to_paygprice_only(tmp_path):
    """EUR billing, USD pricing at 0.9: PayGPrice 27.197 USD lists at 24.4773 EUR; UnitPrice and the
    cost are in EUR already (Microsoft: ListUnitPrice = PayGPrice × rate, ContractedUnitPrice = UnitPrice)."""
    def change(i, r):
        if i != 2:
            return None
        return dict(r, billingCurrency="EUR", exchangeRatePricingToBilling="0.9", unitPrice="22",
                     effectivePrice="22", costInBillingCurrency="528", paygCostInBillingCurrency="587.4552")
    line = read(rewrite(MCA, tmp_path / "eur.csv", change), "EUR").tables["lines"].iloc[0]
    assert line["currency"] == "EUR"
    assert line["list_unit_price"] == Decimal("24.4773") and line["list_cost"] == Decimal("587.4552")
    assert line["contracted_unit_price"] == Decimal("22") and line["contracted_cost"] == Decimal("528")
    assert line["pricing_quantity"] * line["list_unit_price"] == line["list_cost"]


def test_export_without_unit_price_fails_the_contracted_basis(tmp_path):
    header, records = mca_records()
    header = [h for h in header if h != "unitPrice"]
    path = write(tmp_path / "no_unit_price.csv", header,
                 [{k: v for k, v in r.items() if k != "unitPrice"} for r in records])
    lines = read(path).tables["lines"]
    assert lines["contracted_cost"].isna().all()
    assert {source(line) for _, line in lines.iterrows()} == {
        "the export has no UnitPrice column: no contracted price (null)"}
    billing_case(tmp_path / "case", "az", ("2024-05-01", "2024-06-01"), "contracted", format="azure", path=path)
    with pytest.raises(InputErrors) as caught:
        run_audit(load_case(tmp_path / "case"))
    (error,) = caught.value.errors
    assert error.column == "ContractedCost" and error.path.endswith("no_unit_price.csv")
    assert "missing on 6 line(s)" in error.message


# --- the four bases of an Azure case ----------------------------------------------------------------

def negotiated(tmp_path: Path) -> Path:
    """The MCA fixture with a ListCost on every line and a negotiated on-demand rate (25 vs 27.197)."""
    def change(i, r):
        if i == 2:
            return dict(r, unitPrice="25", effectivePrice="25", costInBillingCurrency="600")
        if i in (4, 5, 6):
            return dict(r, paygCostInBillingCurrency=r["costInBillingCurrency"])
        return r
    return rewrite(MCA, tmp_path / "negotiated.csv", change)


def test_bridge_of_an_azure_export_foots_on_all_four_bases(tmp_path):
    found = {s.key: s.amount for s in bridge(read(negotiated(tmp_path)).tables["lines"]).steps}
    assert found["list"] == Decimal("2655.1995188")        # 1958.184 + 652.728 + 0 + 0.0000188 + 43.2 + 1.0875
    assert found["negotiated_discounts"] == Decimal("-52.728")  # 24 h × (25 − 27.197)
    assert found["contracted"] == Decimal("2602.4715188")
    assert found["covered_usage"] == Decimal("-1958.184")  # the covered line is 0 on the invoice
    assert found["commitment_purchases"] == 0 and found["unused_commitment_billed"] == 0
    assert found["billed"] == Decimal("644.2875188")
    assert found["amortised_commitment"] == Decimal("1440") and found["unused_commitment"] == Decimal("480")
    assert found["effective"] == Decimal("2564.2875188")
    assert found["other_contracted_to_billed"] == found["other_billed_to_effective"] == 0


def test_azure_case_audited_on_the_contracted_basis(tmp_path):
    """The whole audit on the contracted basis: conservation, and the total the bridge's contracted row."""
    basis = "contracted"
    billing_case(tmp_path, "az", ("2024-05-01", "2024-06-01"), basis, format="azure", path=negotiated(tmp_path))
    doc = to_dict(run_audit(load_case(tmp_path)))
    assert doc["cost_basis"] == basis and doc["bridge"][basis] == doc["total"]
    assert sum(Decimal(b["amount"]) for b in doc["buckets"].values()) == Decimal(doc["total"])
    assert doc["total"] == "2602.47"
    assert (doc["bridge"]["list"], doc["bridge"]["billed"], doc["bridge"]["effective"]) == (
        "2655.20", "644.29", "2564.29")


def test_a_commitment_refund_is_a_negative_purchase_on_every_basis(tmp_path):
    """The MCA export with a reservation bought (25000) and another refunded (−5000, exchanged): the
    refund is ChargeCategory Purchase (a correction), no part of the contracted total and a part of the
    commitment purchases step. Before: contracted −2344.8004812 (the refund inside it), commitment
    purchases 25000, other_billed_to_effective 5000."""
    header, records = mca_records()
    reserved = records[0]
    bought = "/providers/Microsoft.Capacity/reservationOrders/ro-new/reservations/r-new"
    commitment = dict(reserved, chargeType="Purchase", quantity="1", unitOfMeasure="1 Hour", effectivePrice="25000",
                      unitPrice="25000", PayGPrice="", paygCostInBillingCurrency="", ResourceId="", additionalInfo="",
                      tags="")
    extra = [dict(commitment, costInBillingCurrency="25000", benefitId=bought, reservationId="r-new"),
             dict(commitment, chargeType="Refund", costInBillingCurrency="-5000", unitPrice="5000",
                  effectivePrice="5000")]  # names the fixture's reservation
    lines = read(write(tmp_path / "exchange.csv", header, records + extra)).tables["lines"]
    refund = by_row(lines)[8]
    assert (refund["charge_category"], refund["charge_class"]) == ("Purchase", "Correction")
    assert (refund["billed_cost"], refund["effective_cost"], refund["contracted_cost"]) == (
        Decimal("-5000"), Decimal("0"), Decimal("-5000"))
    assert source(refund).startswith("commitment refund")
    assert basis_amount(lines, "contracted")[refund.name] == 0
    found = {s.key: s.amount for s in bridge(lines).steps}
    # 1958.184 + 652.728 + 0 (unused) + 0.0000188 + 43.2 + 1.0875, every usage line at UnitPrice × Quantity
    assert found["contracted"] == Decimal("2655.1995188")
    assert found["commitment_purchases"] == Decimal("20000")  # 25000 − 5000
    assert found["billed"] == Decimal("20697.0155188")  # 652.728 + 0.0000188 + 43.2 + 1.0875 + 20000
    assert found["purchases_amortised"] == Decimal("-20000")
    assert found["other_contracted_to_billed"] == found["other_billed_to_effective"] == 0
    assert found["effective"] == Decimal("2617.0155188")  # 1440 + 652.728 + 480 + 0.0000188 + 43.2 + 1.0875
