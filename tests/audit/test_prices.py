"""The bottom-up price of each charge (audit/prices.py, METHOD §5): quantity × unit price, the list
price as a flagged fallback, a purchase at its cost, and on the list and contracted bases the unused
part of a commitment at what the basis counts (0), never at its quantity."""
from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pytest

from audit.prices import priced

D = Decimal


def charges(*rows: dict) -> pd.DataFrame:
    base = {"pricing_quantity": D(24), "contracted_unit_price": D("4.1269"), "list_unit_price": D("5"),
            "charge_category": "Usage", "gross": D(0), "commitment": D(0), "commitment_discount_status": None}
    return pd.DataFrame([{**base, **r} for r in rows])


@pytest.mark.parametrize("basis", ["contracted", "list"])
def test_unused_commitment_is_not_priced_on_a_basis_that_counts_it_at_zero(basis):
    """cloudgen eks seed 7 with commitments on the contracted basis: the unused hours were priced at
    24 × 4.1269 = 99.05 against a cost of 0.00, and the audit did not reconcile (gap −3.6 %)."""
    out = priced(charges({"commitment_discount_status": "Unused"}), basis)
    assert out["priced"].tolist() == [D(0)] and out["has_price"].tolist() == [False]


def test_unused_commitment_is_priced_on_the_effective_basis():
    out = priced(charges({"commitment_discount_status": "Unused", "gross": D("99.0456")}), "effective")
    assert out["priced"].tolist() == [D("99.0456")] and out["has_price"].tolist() == [True]


def test_usage_purchase_and_the_list_fallback():
    out = priced(charges({"gross": D(99)}, {"charge_category": "Purchase", "gross": D(500)},
                         {"contracted_unit_price": None, "gross": D(120)}), "contracted")
    assert out["priced"].tolist() == [D("99.0456"), D(500), D(120)]
    assert out["has_price"].tolist() == [True, False, True] and out["price_fallback"].tolist() == [False, False, True]


def test_commitment_covered_usage_is_priced_at_its_effective_rate_on_the_effective_basis():
    """A Savings Plan-covered hour: ContractedUnitPrice 4.1269 excludes the commitment discount that
    the effective basis counts (pretax 2.40 = gross 0 + 2.40 amortised). Priced at 24 × 4.1269 =
    99.05, every FOCUS and Azure commitment case missed by the discount (cloudgen eks 4101: gap −19.4 %,
    aks 4105: −28.1 %, while the CUR of the same bill reconciled); now at EffectiveCost ÷ quantity.
    On the contracted basis it stays at the contracted price."""
    covered = {"commitment_discount_status": "Used", "gross": D(0), "commitment": D("2.40")}
    out = priced(charges(covered), "effective")
    assert out["priced"].tolist() == [D("2.40")] and out["has_price"].tolist() == [True]
    assert out["effective_rate"].tolist() == [True]
    contracted = priced(charges({**covered, "gross": D("99.0456"), "commitment": D(0)}), "contracted")
    assert contracted["priced"].tolist() == [D("99.0456")] and contracted["effective_rate"].tolist() == [False]


def test_covered_usage_a_purchase_was_spread_onto_is_priced_at_the_spread_rate_on_the_billed_basis():
    """An Azure ActualCost export on the billed basis: covered usage costs 0 and the reservation
    purchase, spread onto it (its ``commitment`` column), carries its price. Priced at 24 × 4.1269,
    every such case missed by the whole discount (cloudgen aks 7102 actual: gap −26.7 %); now at the
    spread amount ÷ quantity. Covered usage no purchase reached keeps the contracted price."""
    covered = {"commitment_discount_status": "Used", "gross": D(0), "commitment": D("2.40")}
    out = priced(charges(covered, {**covered, "commitment": D(0)}), "billed")
    assert out["priced"].tolist() == [D("2.40"), D("99.0456")]
    assert out["effective_rate"].tolist() == [True, False] and out["has_price"].tolist() == [True, True]


def test_covered_usage_no_purchase_reached_is_marked_for_the_price_driver_on_the_billed_basis():
    """An Azure ActualCost export without the purchase of a commitment: its covered usage costs 0 and
    is priced at its contracted price. Before, nothing marked it and the price driver named only the
    lines a purchase reached; now ``unpurchased`` marks it on the billed basis (no other basis lacks
    a purchase: the effective basis prices it at its effective rate)."""
    covered = {"commitment_discount_status": "Used", "gross": D(0)}
    out = priced(charges({**covered, "commitment": D("2.40")}, covered, {"gross": D(99)}), "billed")
    assert out["unpurchased"].tolist() == [False, True, False]
    assert out["priced"].tolist() == [D("2.40"), D("99.0456"), D("99.0456")]
    assert priced(charges(covered), "effective")["unpurchased"].tolist() == [False]


def test_the_list_basis_prices_at_the_list_price_and_falls_back_to_the_contracted_one():
    """The list basis's top-down is ListCost = quantity × ListUnitPrice. Before, it was priced at the
    contracted price like every basis: a c7i spot hour at 30 % of on-demand (v1_edp_ri_spot) showed a
    serving_compute price gap 0.700 (17.14 vs 5.14) and a capacity block (v2_capblock) a gpu_compute gap
    (2893.75 vs 1572.79). Now 24 × 5 = 120, and a line without ListUnitPrice 24 × 4.1269, flagged."""
    out = priced(charges({"gross": D(120)}, {"list_unit_price": None, "gross": D(120)}), "list")
    assert out["priced"].tolist() == [D(120), D("99.0456")]
    assert out["price_fallback"].tolist() == [False, True] and out["has_price"].tolist() == [True, True]
    assert priced(charges({"gross": D(99)}), "contracted")["priced"].tolist() == [D("99.0456")]


def test_the_list_basis_price_driver_of_a_spot_hour_and_a_line_without_a_list_price():
    """A c7i.2xlarge spot day at 30 % of on-demand (24 h × 0.1071, list 24 × 0.357 = 8.568) and a line
    with no ListUnitPrice (24 × 0.1071). Before: cost 11.14 vs quantity × unit price 5.14, gap 0.5385;
    now the spot day is priced at its list price and the other line at its contracted one, named."""
    from audit.reconcile import _price_drivers
    spot = {"contracted_unit_price": D("0.1071"), "list_unit_price": D("0.357"), "gross": D("8.568"),
            "resource_class": "serving_compute"}
    out = priced(charges(spot, {**spot, "list_unit_price": None, "gross": D("2.5704")}), "list")
    (driver,) = _price_drivers(out, "list")
    assert (driver.subject, driver.gap) == ("serving_compute", D(0))
    assert driver.detail == ("cost 11.14 vs quantity × unit price 11.14; 1 line(s) priced at ContractedUnitPrice "
                             "(no list price)")


@pytest.mark.parametrize("basis", ["effective", "billed", "list", "contracted"])
def test_usage_of_no_commitment_a_capacity_block_s_fee_was_spread_onto_is_priced_at_the_spread_rate(basis):
    """An EC2 Capacity Block's instance-hours: billed 0 at unit price 0, the block's fee spread onto
    them (audit/capacity_blocks.py). Priced at 24 × 0, the tied block of cloudgen eks 9402 did not
    reconcile (gap 0.47); now at the spread amount ÷ quantity, flagged ``spread_rate``."""
    block = {"contracted_unit_price": D(0), "gross": D(0), "commitment": D("755.136")}
    out = priced(charges(block, {**block, "commitment": D(0)}), basis)
    # the other hour, no fee spread onto it, at its unit price: 0, or on the list basis its list price
    assert out["priced"].tolist() == [D("755.136"), D(120) if basis == "list" else D(0)]
    assert out["spread_rate"].tolist() == [True, False] and out["effective_rate"].tolist() == [False, False]


def test_unused_commitment_a_purchase_was_spread_onto_is_priced_at_the_spread_on_the_billed_basis():
    """An Azure AmortizedCost export with its reservations' Purchase rows (Microsoft's FOCUS recipe) on
    the billed basis (cloudgen aks 10504, the A100 order bought for 30 days, 6346.944): the purchase
    spread onto the day's UnusedReservation line, 1586.736, is its billed cost. Priced at its quantity ×
    unit price, 24 × 2.2038 = 52.8912, the price driver read "commitment_unused: cost 1586.74 vs quantity
    × unit price 52.89, gap 0.966667" and the case did not reconcile (gap 0.030158); now at the spread,
    as covered usage is, and named. The effective basis keeps quantity × unit price."""
    from audit.reconcile import _price_drivers
    unused = {"commitment_discount_status": "Unused", "contracted_unit_price": D("2.2038"), "gross": D(0),
              "commitment": D("1586.736"), "resource_class": "commitment_unused"}
    out = priced(charges(unused), "billed")
    assert out["priced"].tolist() == [D("1586.736")] and out["has_price"].tolist() == [True]
    assert out["unused_spread"].tolist() == [True] and out["effective_rate"].tolist() == [False]
    (driver,) = _price_drivers(out, "billed")
    assert (driver.subject, driver.gap) == ("commitment_unused", D(0))
    assert driver.detail == ("cost 1586.74 vs quantity × unit price 1586.74; 1 unused commitment line(s) priced at "
                             "the commitment purchase spread onto them (their quantity × unit price prices no "
                             "purchase)")
    effective = priced(charges({**unused, "gross": D("52.8912"), "commitment": D(0)}), "effective")
    assert effective["priced"].tolist() == [D("52.8912")] and effective["unused_spread"].tolist() == [False]


@pytest.mark.parametrize("basis", ["effective", "billed", "list", "contracted"])
def test_a_line_priced_0_with_a_cost_is_taken_at_its_cost(basis):
    """An Azure Marketplace row (NVIDIA AI Enterprise, PublisherType Marketplace, 192 GPU-hours, UnitPrice
    and PayGPrice 0, cost 192.00; cloudgen aks 10504 with the row added): a price of 0 with a cost is no
    measured price, and the Azure reader's ContractedCost takes such a row at its cost. Priced at 192 × 0,
    the price driver read "gpu_compute: cost 4126.16 vs quantity × unit price 3934.16, gap 0.046532" and
    the case did not reconcile (gap 0.043); now at its cost, named. A line priced 0 costing 0 stays 0."""
    from audit.reconcile import _price_drivers
    row = {"pricing_quantity": D(192), "contracted_unit_price": D(0), "list_unit_price": D(0),
           "gross": D("192.00"), "resource_class": "gpu_compute"}
    out = priced(charges(row, {**row, "gross": D(0)}), basis)
    assert out["priced"].tolist() == [D("192.00"), D(0)]
    assert out["zero_price"].tolist() == [True, False] and out["has_price"].tolist() == [False, True]
    (driver,) = _price_drivers(out, basis)
    assert (driver.gap, driver.detail) == (D(0), (
        "cost 192.00 vs quantity × unit price 192.00; 1 line(s) of unit price 0 with a cost taken at that cost, "
        "192.00 (a price of 0 is no measured unit price: an Azure Marketplace row's, whose ContractedCost is its "
        "cost too)"))
