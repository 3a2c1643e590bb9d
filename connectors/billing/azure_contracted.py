"""ContractedCost of Azure cost details lines: FOCUS's ContractedUnitPrice × PricingQuantity.

Microsoft's FOCUS conversion of cost details (FinOps toolkit, "Convert Cost Management data to
FOCUS") maps ContractedUnitPrice ← UnitPrice and ContractedCost ← UnitPrice × Quantity (the
PricingBlockSize cancels: PricingQuantity = Quantity × block, the unit price ÷ block). UnitPrice is
the negotiated price before commitment discounts (EffectivePrice is after them, PayGPrice the
retail one). Per line, by ChargeType (``x_ContractedCostSource`` says which rule gave the amount):

* Usage and Purchase: UnitPrice × Quantity, exact (Decimal, in Python: DuckDB has no exact product
  of arbitrary decimal texts). Commitment-covered usage gets its pre-commitment price in both views.
  A line without UnitPrice (or Quantity) takes its own cost, noted; so does a Marketplace line
  (PublisherType) whose UnitPrice is 0 with a cost that is not, as Marketplace rows may carry no
  negotiated price. Covered usage without UnitPrice is left null (its cost is a commitment share, or
  0, not a contracted price), so the contracted basis names those rows.
* UnusedReservation / UnusedSavingsPlan: 0, as FOCUS and the CUR connector give an unused commitment
  on the pre-commitment bases (no usage is priced; the unused share shows on the effective basis).
* Refund: the line's cost (a correction, which FOCUS lets differ from price × quantity). A
  commitment refund's cost is −UnitPrice × Quantity, the negative of a purchase's contracted cost;
  it is read as a purchase (ChargeCategory Purchase), which the contracted basis counts 0.
* Tax, Credit, Adjustment, RoundingAdjustment: the line's cost (FOCUS: = BilledCost when unpriced).
* No UnitPrice column at all: null on every line, so ``cost_basis = "contracted"`` fails with the
  basis-missing-column error naming the file, ContractedCost and the rows.

MCA prices: Microsoft converts PayGPrice with ExchangeRatePricingToBilling (pricing → billing
currency) and takes UnitPrice as it stands, so UnitPrice is read in the billing currency, as the
cost and EffectivePrice are (quantity × EffectivePrice = cost); no rate is applied to it.
"""
from __future__ import annotations

import decimal
from decimal import Decimal

import pyarrow as pa

from connectors.duck import quote_text
from connectors.errors import InputError

SOURCES = {
    "product": "UnitPrice × Quantity",
    "unused": "unused commitment: no usage priced, 0",
    "refund": "refund: the line's cost (a correction)",
    "commitment_refund": "commitment refund: the line's cost, the negative of a purchase (0 on the contracted basis)",
    "unpriced": "tax, credit or adjustment: the line's cost",
    "no_price": "no UnitPrice on the line: the line's cost",
    "no_quantity": "no Quantity on the line: the line's cost",
    "marketplace_zero": "Marketplace line with UnitPrice 0: the line's cost",
    "covered_no_price": "commitment-covered usage without UnitPrice: no contracted price (null)",
    "no_column": "the export has no UnitPrice column: no contracted price (null)",
}


def rule_sql() -> str:
    """SQL over view ``az``: which rule of :data:`SOURCES` gives each line's ContractedCost."""
    zero = "TRY_CAST({} AS DOUBLE) = 0"  # a zero test only: a DOUBLE cannot change an amount
    return ("CASE WHEN unused THEN 'unused' WHEN ct = 'refund' AND commitment_charge THEN 'commitment_refund' "
            "WHEN ct = 'refund' THEN 'refund' "
            "WHEN ct NOT IN ('usage', 'purchase') THEN 'unpriced' "
            "WHEN unit_price IS NULL AND covered THEN 'covered_no_price' "
            "WHEN unit_price IS NULL THEN 'no_price' "
            "WHEN quantity IS NULL AND covered THEN 'covered_no_price' "
            "WHEN quantity IS NULL THEN 'no_quantity' "
            f"WHEN lower(trim(coalesce(publisher_type, ''))) = 'marketplace' AND {zero.format('unit_price')} "
            f"AND NOT {zero.format('cost')} THEN 'marketplace_zero' "
            "ELSE 'product' END")


def create_contracted(con, path, has_unit_price: bool, price_column: str | None, quantity_column: str | None):
    """Table ``contracted`` (rn, contracted_cost, contracted_source): each line's ContractedCost text and its rule."""
    if not has_unit_price:
        con.execute(f"CREATE TEMP TABLE contracted AS SELECT rn, NULL::VARCHAR AS contracted_cost, "
                    f"{quote_text(SOURCES['no_column'])} AS contracted_source FROM az")
        return
    con.execute(f"CREATE TEMP TABLE contracted_rule AS SELECT rn, {rule_sql()} AS rule, trim(cost) AS cost, "
                "trim(unit_price) AS price, trim(quantity) AS quantity FROM az")
    rows = con.execute("SELECT rn, price, quantity FROM contracted_rule WHERE rule = 'product'").fetchall()
    products = pa.table({"rn": pa.array([r[0] for r in rows], pa.int64()),
                         "amount": pa.array([product(r[1], r[2], r[0], path, price_column, quantity_column)
                                             for r in rows], pa.string())})
    con.register("contracted_products", products)
    sources = " ".join(f"WHEN {quote_text(k)} THEN {quote_text(v)}" for k, v in SOURCES.items())
    con.execute("CREATE TEMP TABLE contracted AS SELECT r.rn, CASE r.rule WHEN 'product' THEN p.amount "
                "WHEN 'unused' THEN '0' WHEN 'covered_no_price' THEN NULL ELSE r.cost END AS contracted_cost, "
                f"CASE r.rule {sources} END AS contracted_source "
                "FROM contracted_rule r LEFT JOIN contracted_products p ON p.rn = r.rn")
    con.unregister("contracted_products")
    con.execute("DROP TABLE contracted_rule")


def product(price: str, quantity: str, rn: int, path, price_column, quantity_column) -> str:
    """``price`` × ``quantity`` exactly, as decimal text (precision = the digits of both)."""
    a, b = Decimal(price), Decimal(quantity)
    digits = len(a.as_tuple().digits) + len(b.as_tuple().digits) + 1
    context = decimal.Context(prec=digits, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])
    value = context.multiply(a, b)
    if not value.is_finite() or context.flags[decimal.Inexact]:
        raise InputError(path, f"UnitPrice × Quantity ({price} × {quantity}) is out of range", row=rn,
                         column=f"{price_column}, {quantity_column}", expected="a price and quantity of sensible size")
    return str(value)
