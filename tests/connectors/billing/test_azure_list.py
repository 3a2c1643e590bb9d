"""ListCost of Azure cost details lines (connectors/billing/azure_list.py): PaygCostInBillingCurrency
where the line has it (MCA), else PayGPrice × Quantity in the billing currency (an EA export never has
PaygCostInBillingCurrency; Microsoft's FOCUS conversion maps ListUnitPrice ← PayGPrice on EA and
PayGPrice × ExchangeRate on MCA). Before, an EA export's list basis was never measured: "ListCost is
missing on 14 in-scope line(s)" on cloudgen aks 10504, whose FOCUS export lists 5034.50."""
from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks.cloudgen_check import audit_document
from tests.builders import generated
from tests.connectors.billing.test_azure import MCA, read

EA = "ea_amortized_2026-09.csv"


def rewrite(source: Path, target: Path, change) -> Path:
    """A copy of a CSV export, each record (numbered from 1) through ``change``; new columns allowed."""
    with open(source, encoding="utf-8-sig", newline="") as handle:
        records = [change(i, dict(r)) for i, r in enumerate(csv.DictReader(handle), start=1)]
    with open(target, "w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(k for r in records for k in r)))
        writer.writeheader()
        writer.writerows(records)
    return target


def source(line) -> str:
    return json.loads(line["extra"])["x_ListCostSource"]


@pytest.fixture(scope="module")
def aks(tmp_path_factory) -> Path:
    """cloudgen's AKS day with reservations, its EA AmortizedCost export (no PaygCostInBillingCurrency)."""
    return generated(tmp_path_factory, "aks10504", "aks", 10504, billing="native", commitments=True)


def test_an_ea_export_lists_paygprice_times_quantity(aks):
    lines = read(aks / "billing" / EA).tables["lines"]
    usage = lines[lines["commitment_discount_status"] != "Unused"]
    assert sum(usage["list_cost"], Decimal(0)) == Decimal("5035.263067392")  # the 15 usage lines, 1 out of scope
    assert {source(x) for _, x in usage.iterrows()} == {"PayGPrice × Quantity (EA: PayGPrice in the billing currency)"}
    assert all(x["list_cost"] == x["pricing_quantity"] * x["list_unit_price"] for _, x in usage.iterrows())
    unused = lines[lines["commitment_discount_status"] == "Unused"].iloc[0]
    assert unused["list_cost"] == 0 and source(unused) == "unused commitment: no usage priced, 0"


def test_the_ea_export_s_list_basis_equals_its_focus_export_s(aks, tmp_path):
    """5034.496510892 = Σ PayGPrice × Quantity of the 14 in-scope usage lines; the FOCUS export of the
    same case lists 5034.50. Before: not measured, "ListCost is missing on 14 in-scope line(s)"."""
    document = audit_document(aks)
    bridge = document["bridge"]
    assert (bridge["list"], bridge["contracted"], bridge["negotiated_discounts"]) == ("5034.50", "5034.50", "0.00")
    assert "not_measured" not in bridge


def test_a_line_without_paygprice_stays_unmeasured_and_named(tmp_path):
    def change(i, record):
        if i == 1:
            record["PayGPrice"] = ""
        if i == 2:  # EA writes PayGPrice 0 on reservation-covered usage: no list price
            record["PayGPrice"] = "0"
        return record
    path = rewrite(MCA, tmp_path / "ea.csv", lambda i, r: change(i, {**r, "paygCostInBillingCurrency": ""}))
    lines = read(path).tables["lines"]
    assert [lines.iloc[i]["list_cost"] for i in (0, 1)] == [None, None]
    assert source(lines.iloc[0]) == "no PayGPrice on the line: no list price (null)"
    assert source(lines.iloc[1]) == "PayGPrice 0 under a UnitPrice that is not 0: no list price (null)"


def test_mca_paygprice_in_the_pricing_currency_is_converted_or_left_unmeasured(tmp_path):
    """MCA prices PayGPrice in its pricing currency: with ExchangeRatePricingToBilling 0.9, the first
    line lists 72 × 27.197 × 0.9 = 1762.3656 EUR; without a rate, a line whose PricingCurrency (USD)
    is not its BillingCurrency (EUR) has no list cost (currencies are never mixed)."""
    def euro(i, record):
        record.update(billingCurrency="EUR", paygCostInBillingCurrency="", PricingCurrency="USD")
        if i != 1:
            record["exchangeRatePricingToBilling"] = ""
        else:
            record["exchangeRatePricingToBilling"] = "0.9"
        return record
    lines = read(rewrite(MCA, tmp_path / "eur.csv", euro), "EUR").tables["lines"]
    first, second = lines.iloc[0], lines.iloc[1]
    assert first["list_cost"] == Decimal("1762.3656") == first["pricing_quantity"] * first["list_unit_price"]
    assert source(first) == ("PayGPrice × Quantity × ExchangeRatePricingToBilling (PayGPrice in the pricing "
                             "currency)")
    assert second["list_cost"] is None and source(second).startswith("PayGPrice in a pricing currency other than")


def test_paygcost_is_kept_where_the_line_has_it():
    lines = read(MCA).tables["lines"]
    assert lines.iloc[0]["list_cost"] == Decimal("1958.184") and source(lines.iloc[0]) == "PaygCostInBillingCurrency"
