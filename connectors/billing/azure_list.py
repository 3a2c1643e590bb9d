"""ListCost of Azure cost details lines: FOCUS's ListUnitPrice × PricingQuantity, in the billing currency.

An MCA export carries it, PaygCostInBillingCurrency; an EA export never has that column. Microsoft's
FOCUS conversion (FinOps toolkit, "Convert Cost Management data to FOCUS") maps ListUnitPrice ←
PayGPrice on EA and PayGPrice × ExchangeRate on MCA: an EA export prices PayGPrice in its billing
currency, an MCA export in its pricing currency (PricingCurrency; ExchangeRatePricingToBilling turns
it into the billing one). So, per line (``x_ListCostSource`` says which rule gave the amount):

* PaygCostInBillingCurrency where the line has it.
* Else Usage and Purchase: PayGPrice × Quantity, exact (Decimal, in Python), × the line's
  ExchangeRatePricingToBilling where it has one (the PricingBlockSize cancels, as for ContractedCost).
  A line whose PricingCurrency differs from its BillingCurrency and that has no rate is left null
  (no list price in the billing currency: currencies are never mixed). A line without PayGPrice or
  Quantity is null, and so is one whose PayGPrice is 0 under a UnitPrice that is not (EA writes 0 on
  reservation-covered usage: no list price); a Marketplace line whose PayGPrice is 0 with a cost
  takes its cost, as its ContractedCost does (:mod:`connectors.billing.azure_contracted`).
* UnusedReservation / UnusedSavingsPlan: 0 (no usage is priced, as on the contracted basis).
* Refund, Tax, Credit, Adjustment, RoundingAdjustment: the line's cost (FOCUS: = BilledCost when unpriced).

The list basis names the null lines (audit/bridge.py: "ListCost is missing on N in-scope line(s)").
"""
from __future__ import annotations

import decimal
from decimal import Decimal

import pyarrow as pa

from connectors.duck import quote_text
from connectors.errors import InputError

SOURCES = {
    "payg_cost": "PaygCostInBillingCurrency",
    "product": "PayGPrice × Quantity (EA: PayGPrice in the billing currency)",
    "product_rate": "PayGPrice × Quantity × ExchangeRatePricingToBilling (PayGPrice in the pricing currency)",
    "unused": "unused commitment: no usage priced, 0",
    "unpriced": "refund, tax, credit or adjustment: the line's cost",
    "marketplace_zero": "Marketplace line with PayGPrice 0: the line's cost",
    "no_price": "no PayGPrice on the line: no list price (null)",
    "zero_price": "PayGPrice 0 under a UnitPrice that is not 0: no list price (null)",
    "no_quantity": "no Quantity on the line: no list price (null)",
    "no_rate": "PayGPrice in a pricing currency other than the billing currency and no ExchangeRatePricingToBilling: "
               "no list price in the billing currency (null)",
}
#: the rules whose amount is the line's cost
AT_COST = ("unpriced", "marketplace_zero")


def rule_sql() -> str:
    """SQL over view ``az``: which rule of :data:`SOURCES` gives each line's ListCost."""
    zero = "TRY_CAST({} AS DOUBLE) = 0"  # a zero test only: a DOUBLE cannot change an amount
    other_currency = ("lower(trim(coalesce(pricing_currency, currency, ''))) "
                      "<> lower(trim(coalesce(currency, pricing_currency, '')))")
    return ("CASE WHEN unused THEN 'unused' WHEN payg_cost IS NOT NULL THEN 'payg_cost' "
            "WHEN ct NOT IN ('usage', 'purchase') THEN 'unpriced' "
            "WHEN payg_price IS NULL THEN 'no_price' WHEN quantity IS NULL THEN 'no_quantity' "
            f"WHEN lower(trim(coalesce(publisher_type, ''))) = 'marketplace' AND {zero.format('payg_price')} "
            f"AND NOT {zero.format('cost')} THEN 'marketplace_zero' "
            f"WHEN {zero.format('payg_price')} AND NOT coalesce({zero.format('unit_price')}, TRUE) THEN 'zero_price' "
            "WHEN exchange_rate IS NOT NULL THEN 'product_rate' "
            f"WHEN {other_currency} THEN 'no_rate' ELSE 'product' END")


def create_listed(con, path, names: dict[str, str | None]) -> None:
    """Table ``listed`` (rn, list_cost, list_source): each line's ListCost text and its rule; ``names``:
    role → the file's column name, for errors."""
    con.execute(f"CREATE TEMP TABLE listed_rule AS SELECT rn, {rule_sql()} AS rule, trim(cost) AS cost, "
                "trim(payg_cost) AS payg_cost, trim(payg_price) AS price, trim(quantity) AS quantity, "
                "trim(exchange_rate) AS rate FROM az")
    rows = con.execute("SELECT rn, price, quantity, rate FROM listed_rule "
                       "WHERE rule IN ('product', 'product_rate')").fetchall()
    products = pa.table({"rn": pa.array([r[0] for r in rows], pa.int64()),
                         "amount": pa.array([product(r[1:], r[0], path, names) for r in rows], pa.string())})
    con.register("listed_products", products)
    sources = " ".join(f"WHEN {quote_text(k)} THEN {quote_text(v)}" for k, v in SOURCES.items())
    at_cost = ", ".join(quote_text(k) for k in AT_COST)
    con.execute("CREATE TEMP TABLE listed AS SELECT r.rn, CASE WHEN r.rule IN ('product', 'product_rate') "
                f"THEN p.amount WHEN r.rule = 'unused' THEN '0' WHEN r.rule = 'payg_cost' THEN r.payg_cost "
                f"WHEN r.rule IN ({at_cost}) THEN r.cost END AS list_cost, CASE r.rule {sources} END AS list_source "
                "FROM listed_rule r LEFT JOIN listed_products p ON p.rn = r.rn")
    con.unregister("listed_products")
    con.execute("DROP TABLE listed_rule")


def product(factors, rn: int, path, names: dict[str, str | None]) -> str:
    """The product of the decimal texts ``factors`` (None: left out) exactly, as decimal text."""
    values = [Decimal(f) for f in factors if f is not None]
    digits = sum(len(v.as_tuple().digits) for v in values) + 1
    context = decimal.Context(prec=digits, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[])
    value = Decimal(1)
    for v in values:
        value = context.multiply(value, v)
    if not value.is_finite() or context.flags[decimal.Inexact]:
        columns = ", ".join(n for n in (names.get("payg_price"), names.get("quantity"), names.get("exchange_rate")) if n)
        raise InputError(path, f"PayGPrice × Quantity ({' × '.join(factors_text(factors))}) is out of range", row=rn,
                         column=columns, expected="a price and quantity of sensible size")
    return str(value)


def factors_text(factors) -> list[str]:
    return [f for f in factors if f is not None]
