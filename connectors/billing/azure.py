"""Azure cost details exports (EA and MCA; ActualCost or AmortizedCost; CSV or Parquet) → ``lines``.

The file is copied into DuckDB as text, its columns are mapped to FOCUS names in SQL (Azure's
names matched case-insensitively: EA writes ``CostInBillingCurrency``, MCA ``costInBillingCurrency``,
older EA files ``Cost``), and the FOCUS checks, window filter and normalisation of
:mod:`connectors.billing.focus` do the rest. Microsoft's own FOCUS export (FocusCost) is read by the
``focus`` connector, not this one.

Cost view (case option ``view = "actual" | "amortized"``; default: detected)
    An ActualCost export is the billed view: commitment-covered usage costs 0 there and the
    reservation / savings-plan purchases carry their price. An AmortizedCost export is the
    effective view: covered usage carries its share of the commitment, UnusedReservation /
    UnusedSavingsPlan lines carry the unused share, and purchases are not costed. Detection:
    amortised evidence is an Unused* line or covered usage (PricingModel Reservation / SavingsPlan)
    with a nonzero cost; actual evidence is a commitment purchase with a nonzero cost, or covered
    usage that all costs 0. Both kinds in one file is read as amortised: Microsoft's FOCUS recipe
    is the amortised rows plus the commitment purchases of the actual data, and the rules below give
    that combination both bases. Amortised evidence against a stated "actual" is an InputError.
    With no evidence the file is read as actual; ``x_CostViewSource`` notes how it was known.

Billed and effective cost (Microsoft's FOCUS conversion rules, and METHOD §1's bridge)
    * actual view: BilledCost = cost. EffectiveCost = cost, except commitment purchases and
      commitment refunds, whose EffectiveCost is 0: FOCUS amortises them onto the usage they cover.
      An actual file alone cannot show that amortisation (covered usage costs 0 in it), so its
      effective total lacks the commitments (the report says so: the bridge's amortisation is not
      measured, named with the purchase lines); audit it on the billed basis, where the engine spreads
      a purchase of reservation order ``…/reservationOrders/O`` over the usage lines of the
      reservations under it (``…/reservationOrders/O/reservations/R``), weighted by their pay-as-you-go
      cost (covered usage costs 0 in this view), or read the AmortizedCost export.
    * amortized view: EffectiveCost = cost, except commitment purchases / refunds (0). BilledCost =
      cost, except covered usage and Unused* lines, whose BilledCost is 0: they were invoiced
      through the purchase, not as themselves. So billed + amortisation = effective holds per
      view, and no commitment is counted twice on either basis.

Contracted and list cost (METHOD §1's list and contracted bases; :mod:`connectors.billing.azure_contracted`)
    ContractedCost = UnitPrice × Quantity (Microsoft's conversion; exact; the block cancels), in both
    views, covered usage included (its pre-commitment price). Unused* lines: 0 (no usage priced; the
    unused share is effective cost only). Refund, Tax, Credit, adjustments: the line's cost (a
    commitment refund's cost is −UnitPrice × Quantity, as a purchase's is UnitPrice × Quantity; as a
    purchase, the contracted basis counts it 0). A usage or purchase line without UnitPrice, or a
    Marketplace line priced 0 with a cost, takes its cost;
    covered usage without UnitPrice is null; an export with no UnitPrice column has no ContractedCost
    (null: the contracted basis then names the file, the column and the rows). ``x_ContractedCostSource``
    says which rule gave each line's amount. UnitPrice is in the billing currency (Microsoft applies
    the MCA exchange rate to PayGPrice only). ListCost ← PaygCostInBillingCurrency, else PayGPrice × Quantity
    (× ExchangeRatePricingToBilling), 0 on Unused* lines (:mod:`connectors.billing.azure_list`).

Other columns
    ChargeCategory ← ChargeType (Usage, Purchase, Refund, Tax, Credit, Adjustment as named;
    UnusedReservation / UnusedSavingsPlan → Usage with CommitmentDiscountStatus "Unused";
    RoundingAdjustment → Adjustment; any other value is an InputError), except a commitment refund
    (a Refund naming a reservation or savings plan: a return or exchange), which is Purchase, the
    negative of the purchase it reverses. Refund lines get ChargeClass "Correction".
    ChargePeriodStart ← Date (MM/DD/YYYY with or without leading zeros, YYYY-MM-DD, or ISO 8601; UTC),
    end = start + 1 day (cost details are daily). ServiceName ← MeterCategory (else ServiceName /
    ConsumedService); ChargeDescription ← "MeterName - MeterSubCategory".
    PricingUnit / ConsumedUnit ← UnitOfMeasure through ``data/azure_pricing_units.csv`` (the FinOps
    toolkit's table): the export's Quantity and prices are per block of PricingBlockSize units (on
    the EA samples, "10K" quantities × 10 000 are whole operation counts), so PricingQuantity =
    Quantity × block and unit prices ÷ block (exact, in Python, for the few lines whose block is
    not 1; a block that is not a product of 2s and 5s, e.g. 744, rounds the price at 40 digits). An
    unlisted unit is kept as written, block 1. ContractedUnitPrice ← UnitPrice (the negotiated price
    before commitment discounts, as Microsoft's FOCUS conversion maps it; EffectivePrice, after
    them, is kept as ``x_EffectivePrice``, per UnitOfMeasure as exported), ListUnitPrice ← PayGPrice
    (× the MCA ExchangeRatePricingToBilling when present), else UnitPrice. CommitmentDiscountId ← benefitId
    (a purchase's trailing empty "/reservations/" segment dropped), else ReservationId. Tags written
    without the outer braces (``"k": "v", "k2": "v2"``) are wrapped in them. ``x_InstanceType`` ←
    the VM size of Virtual Machines lines: AdditionalInfo's ServiceType (``Standard_ND96asr_v4``),
    else the meter name (``ND96asr v4`` → ``ND96asr_v4``). A scale set's per-VM row (AdditionalInfo
    VMName ``<set>_<N>``) gets the VM's ARM id ``<set>/virtualMachines/<N>`` as ResourceId, the id
    its node's provider id names; any other scale-set line keeps the set's id.
"""
from __future__ import annotations

import calendar
import csv
import decimal
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pandas as pd

from connectors.base import Connector
from connectors.billing.azure_contracted import create_contracted
from connectors.billing.azure_list import create_listed
from connectors.billing.focus import load_focus_named, read_focus_table
from connectors.billing.focus_checks import AMOUNT_RANGE, AMOUNT_TYPE, column_errors
from connectors.billing.focus_load import NUMBER_PATTERN, file_format, load, null_expr
from connectors.billing.scale_sets import vm_resource_id_sql
from connectors.bounds import shown
from connectors.duck import MAX_ERRORS, quote_text, raise_all, session
from connectors.errors import InputError
from connectors.header_hint import header_hint
from schemas.billing import BillingLine

UNITS_FILE = Path(__file__).resolve().parent / "data" / "azure_pricing_units.csv"
VIEWS = {"actual": "actual", "amortized": "amortized", "amortised": "amortized"}
# Role -> Azure column names, first present wins (matched case-insensitively).
AZURE_NAMES: dict[str, tuple[str, ...]] = {
    "cost": ("CostInBillingCurrency", "Cost", "PreTaxCost"),
    "date": ("Date", "UsageDate", "UsageDateTime"),
    "charge_type": ("ChargeType",),
    "pricing_model": ("PricingModel",),
    "frequency": ("Frequency",),
    "meter_category": ("MeterCategory",),
    "service_name": ("ServiceName", "ConsumedService"),
    "meter_subcategory": ("MeterSubCategory",),
    "meter_name": ("MeterName",),
    "product": ("ProductName", "Product"),
    "sku": ("ProductId", "MeterId"),
    "service_family": ("ServiceFamily",),
    "resource_id": ("ResourceId", "InstanceId"),
    "resource_name": ("ResourceName",),
    "resource_group": ("ResourceGroup", "ResourceGroupName"),
    "location": ("ResourceLocation", "Location"),
    "quantity": ("Quantity",),
    "unit": ("UnitOfMeasure",),
    "effective_price": ("EffectivePrice",),
    "unit_price": ("UnitPrice",),
    "payg_price": ("PayGPrice",),
    "payg_cost": ("PaygCostInBillingCurrency",),
    "exchange_rate": ("ExchangeRatePricingToBilling",),
    "pricing_currency": ("PricingCurrency", "PricingCurrencyCode"),
    "subscription": ("SubscriptionId", "SubscriptionGuid"),
    "billing_account": ("BillingAccountId", "BillingProfileId"),
    "currency": ("BillingCurrency", "BillingCurrencyCode"),
    "reservation_id": ("ReservationId",),
    "benefit_id": ("BenefitId",),
    "tags": ("Tags",),
    "additional_info": ("AdditionalInfo",),
    "publisher": ("PublisherName",),
    "publisher_type": ("PublisherType",),
    # read only to tell the order of a slash date: a period's end (the 28th to the 31st) reads one way
    "period_start": ("BillingPeriodStartDate",),
    "period_end": ("BillingPeriodEndDate",),
}
REQUIRED = ("cost", "date")
NUMERIC = ("cost", "quantity", "effective_price", "unit_price", "payg_price", "payg_cost", "exchange_rate")
CHARGE_TYPES = {"usage": "Usage", "purchase": "Purchase", "refund": "Refund", "tax": "Tax",
                "credit": "Credit", "adjustment": "Adjustment", "roundingadjustment": "Adjustment",
                "unusedreservation": "Usage", "unusedsavingsplan": "Usage"}
DATE_FORMAT = "%m/%d/%Y"


class AzureExportConnector(Connector):
    """Reads one Azure cost details export into the ``lines`` table."""

    format_name = "azure"
    kind = "billing"
    schemas = {"lines": BillingLine}

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Load as text, check in Azure's terms, map to FOCUS names, then read as FOCUS."""
        fmt = file_format(self.path)
        with session() as con:
            roles = load_raw(con, self.path, fmt)
            create_azure_view(con, roles)
            raise_all(check_azure_rows(con, roles, self.path))
            view, source = cost_view(con, self.path, self.spec.options.get("view"))
            create_units(con)
            create_contracted(con, self.path, roles.columns["unit_price"] is not None,
                              *(roles.name(r) if roles.columns[r] else None for r in ("unit_price", "quantity")))
            create_listed(con, self.path, {r: roles.name(r) if roles.columns[r] else None for r in AZURE_NAMES})
            for statement in mapped_sql(view, source):
                con.execute(statement)
            con.execute("DROP TABLE contracted; DROP TABLE listed; DROP VIEW az; DROP VIEW az0; DROP TABLE raw")  # free raw
            columns = load_focus_named(con, "mapped", self.path)
            tables, rows, covered = read_focus_table(con, columns, self.path, self.ctx,
                                                      grain=self.spec.options.get("grain"))
            factors = {rn: (block, rate) for rn, block, rate in con.execute("SELECT * FROM rescale").fetchall()}
        tables["lines"] = rescale(tables["lines"], factors)
        return tables, rows, covered


# --- loading and column roles -----------------------------------------------------------------

@dataclass(frozen=True)
class Roles:
    """Which internal column (``cN``) of table ``raw`` plays each role, and the file's header."""

    columns: dict[str, str | None]
    header: list[str]

    def name(self, role: str) -> str:
        """The file's own spelling of the column playing ``role``."""
        return self.header[int(self.columns[role][1:])]


def load_raw(con, path: Path, fmt: str) -> Roles:
    """Copy the file into table ``raw`` (VARCHAR c0..cN) and resolve each role to its column."""
    columns = load(con, path, fmt, "Azure cost details")
    con.execute("ALTER TABLE src RENAME TO raw")
    by_name = {name.lower(): f"c{i}" for i, name in enumerate(columns.header)}
    found = {role: next((by_name[n.lower()] for n in names if n.lower() in by_name), None)
             for role, names in AZURE_NAMES.items()}
    missing = [AZURE_NAMES[role][0] for role in REQUIRED if found[role] is None]
    if missing:
        wanted = "; ".join(" or ".join(AZURE_NAMES[r]) for r in REQUIRED)
        raise InputError(path, f"missing column(s): {', '.join(missing)}" + header_hint(columns.header, missing, "azure"),
                         row=0, column=", ".join(missing),
                         expected=f"an Azure cost details export with {wanted}")
    return Roles(found, list(columns.header))


def create_azure_view(con, roles: Roles) -> None:
    """View ``az``: row number plus every role by name (nulls normalised, absent → NULL)."""
    parts = ["rowid + 1 AS rn"]
    for role in AZURE_NAMES:
        column = roles.columns[role]
        parts.append(f"{null_expr(column) if column else 'NULL::VARCHAR'} AS {role}")
    con.execute(f"CREATE TEMP VIEW az0 AS SELECT {', '.join(parts)} FROM raw")
    commitment = "pm IN ('reservation', 'savingsplan')"
    con.execute(
        "CREATE TEMP VIEW az AS SELECT *, "
        f"{commitment} AND ct = 'usage' AS covered, "
        "ct IN ('unusedreservation', 'unusedsavingsplan') AS unused, "
        f"ct IN ('purchase', 'refund') AND ({commitment} OR reservation_id IS NOT NULL "
        "OR benefit_id IS NOT NULL) AS commitment_charge, "
        f"{date_expr('date')} AS day "
        "FROM (SELECT *, lower(trim(coalesce(charge_type, 'Usage'))) AS ct, "
        "lower(replace(coalesce(pricing_model, ''), ' ', '')) AS pm FROM az0)")


def date_expr(column: str) -> str:
    """SQL: an Azure date cell as TIMESTAMPTZ (UTC), NULL when it does not parse."""
    return (f"coalesce(CAST(try_strptime(trim({column}), '{DATE_FORMAT}') AS TIMESTAMPTZ), "
            f"TRY_CAST(trim({column}) AS TIMESTAMPTZ))")


def day_first(value: str) -> str:
    """A clause for a slash date that only reads day first (13/05/2024), or ``""``: Azure writes
    the month first, so such a file was re-saved in a day-first locale, and its dates up to the
    12th would be read as other months."""
    found = re.fullmatch(r"\s*(\d{1,2})/(\d{1,2})/(\d{4})\s*", value)
    if not found or not 12 < int(found.group(1)) <= 31 or not 1 <= int(found.group(2)) <= 12:
        return ""
    day, month, year = (int(g) for g in found.groups())
    return (f"; it reads only day first ({day} {calendar.month_name[month]} {year}): the file's dates look "
            f"DD/MM/YYYY (a file re-saved in a day-first locale), and its days up to the 12th would be read "
            f"as other months: export the file again, or convert its dates to YYYY-MM-DD")


def period_day_first(con, roles: Roles, path: Path) -> list[InputError]:
    """The first billing period date that reads only day first (30/09/2023), where every usage date
    read month first: a file re-saved in a day-first locale whose usage days are all up to the 12th
    (a month of daily rows up to the 12th, a monthly export dated on the 1st) would otherwise be
    read with day and month swapped, without a word. A period ends on the 28th to the 31st."""
    for role in ("period_end", "period_start"):
        if roles.columns[role] is None:
            continue
        sql = (f"SELECT rn, {role} FROM az WHERE {role} IS NOT NULL AND try_strptime(trim({role}), '{DATE_FORMAT}') IS NULL "
               f"AND try_strptime(trim({role}), '%d/%m/%Y') IS NOT NULL ORDER BY rn LIMIT 1")
        for rn, value in con.execute(sql).fetchall():
            return [InputError(path, f"billing period date {shown(value)}{day_first(value)}", row=rn,
                               column=roles.name(role), expected="dates as MM/DD/YYYY (as Azure writes them) or YYYY-MM-DD")]
    return []


# --- checks in Azure's terms ------------------------------------------------------------------

def check_azure_rows(con, roles: Roles, path: Path) -> list[InputError]:
    """Unparseable dates and numbers, unknown charge types, named by the file's own column names."""
    errors = []
    sql = f"SELECT rn, date FROM az WHERE day IS NULL ORDER BY rn LIMIT {MAX_ERRORS}"
    errors += [InputError(path, "missing value" if value is None else f"unparseable date {shown(value)}{day_first(value)}",
                          row=rn, column=roles.name("date"),
                          expected="a date as MM/DD/YYYY, YYYY-MM-DD or ISO 8601")
               for rn, value in con.execute(sql).fetchall()]
    errors += [] if errors else period_day_first(con, roles, path)
    errors += check_azure_numbers(con, roles, path)
    known = ", ".join(quote_text(k) for k in CHARGE_TYPES)
    sql = f"SELECT rn, charge_type FROM az WHERE ct NOT IN ({known}) ORDER BY rn LIMIT {MAX_ERRORS}"
    errors += [InputError(path, f"unknown charge type {shown(value)}", row=rn, column=roles.name("charge_type"),
                          expected="an Azure ChargeType: Usage, Purchase, Refund, Tax, RoundingAdjustment, "
                                   "UnusedReservation, UnusedSavingsPlan (or Credit, Adjustment)")
               for rn, value in con.execute(sql).fetchall()]
    return errors


def check_azure_numbers(con, roles: Roles, path: Path) -> list[InputError]:
    """Numbers that do not parse or that the audit cannot sum exactly (FOCUS's range), named by the
    file's own column (one error a cell: checked after mapping, Cost was named twice, as BilledCost
    and EffectiveCost, two columns the file does not have)."""
    number = f"regexp_full_match(trim({{0}}), {quote_text(NUMBER_PATTERN)})"
    present = [role for role in NUMERIC if roles.columns[role] is not None]
    unparseable = [(roles.name(r), f"SELECT rn, {r} FROM az WHERE ({r} IS NULL AND {r == 'cost'}) OR NOT "
                                   + number.format(r)) for r in present]
    out_of_range = [(roles.name(r), f"SELECT rn, {r} FROM az WHERE {number.format(r)} AND "
                                    f"TRY_CAST(trim({r}) AS {AMOUNT_TYPE}) IS NULL") for r in present]
    errors = column_errors(con, path, unparseable, "unparseable number", "a decimal number", commas=True)
    return errors + column_errors(con, path, out_of_range, "number out of range", AMOUNT_RANGE, MAX_ERRORS - len(errors))


# --- the cost view ----------------------------------------------------------------------------

def cost_view(con, path: Path, stated) -> tuple[str, str]:
    """(view, how it was known): the case's ``view``, else detected, else "actual" by default."""
    amortised, actual = view_evidence(con)
    if stated is not None:
        view = VIEWS.get(str(stated).strip().lower())
        if view is None:
            raise InputError(path, f"unknown view {shown(stated)}", column="view", expected='"actual" or "amortized"')
        if view == "actual" and amortised:
            raise InputError(path, f"view {shown(stated)} stated, but {amortised[0]}", row=amortised[1],
                             column="view", expected="the view the export was made with")
        return view, "case"
    if amortised and actual:
        return "amortized", f"detected: {amortised[0]}, with commitment purchases ({actual[0]})"
    if amortised:
        return "amortized", f"detected: {amortised[0]}"
    if actual:
        return "actual", f"detected: {actual[0]}"
    return "actual", "not detectable (no commitment lines): read as actual"


def view_evidence(con) -> tuple[tuple[str, int] | None, tuple[str, int] | None]:
    """(what proves the amortised view, row), (what proves the actual view, row); None where nothing.

    Only zero tests are made on the cost text, so a DOUBLE cast cannot change an amount.
    """
    nonzero = "TRY_CAST({} AS DOUBLE) <> 0"
    sql = ("SELECT "
           "min(rn) FILTER (WHERE unused), "
           f"min(rn) FILTER (WHERE covered AND {nonzero.format('cost')}), "
           f"min(rn) FILTER (WHERE commitment_charge AND ct = 'purchase' AND {nonzero.format('cost')}), "
           f"min(rn) FILTER (WHERE covered AND {nonzero.format('quantity')}), "
           f"bool_and(NOT {nonzero.format('cost')}) FILTER (WHERE covered AND {nonzero.format('quantity')}) "
           "FROM az")
    unused, costed_cover, purchase, free_cover, all_free = con.execute(sql).fetchall()[0]
    amortised = actual = None
    if unused:
        amortised = (f"row {unused} is an unused-commitment line (amortised exports only)", unused)
    elif costed_cover:
        amortised = (f"row {costed_cover} is commitment-covered usage with a cost (amortised exports only)",
                     costed_cover)
    if purchase:
        actual = (f"row {purchase} is a costed commitment purchase (actual exports only)", purchase)
    elif all_free:
        actual = (f"commitment-covered usage costs 0 (from row {free_cover}; actual exports only)", free_cover)
    return amortised, actual


# --- mapping to FOCUS names -------------------------------------------------------------------

def create_units(con) -> None:
    """Table ``units``: lower-cased UnitOfMeasure → block size and distinct unit."""
    with open(UNITS_FILE, encoding="utf-8", newline="") as handle:
        rows = csv.DictReader(line for line in handle if not line.startswith("#"))
        units = {r["UnitOfMeasure"].strip().lower(): (r["PricingBlockSize"].strip(), r["DistinctUnits"].strip())
                 for r in rows}
    con.execute("CREATE TEMP TABLE units (k VARCHAR, block VARCHAR, unit VARCHAR)")
    con.executemany("INSERT INTO units VALUES (?, ?, ?)", [(k, b, u) for k, (b, u) in units.items()])


def mapped_sql(view: str, source: str) -> list[str]:
    """CREATE TABLE ``mapped`` (FOCUS and x_ names, file order) and ``rescale`` (row → block, rate)."""
    zero_effective = "commitment_charge"
    zero_billed = "covered OR unused" if view == "amortized" else "FALSE"
    cost = "trim(cost)"
    fields = {
        "BilledCost": f"CASE WHEN {zero_billed} THEN '0' ELSE {cost} END",
        "EffectiveCost": f"CASE WHEN {zero_effective} THEN '0' ELSE {cost} END",
        "ChargeCategory": charge_category_sql(),
        "ChargeClass": "CASE WHEN ct = 'refund' THEN 'Correction' END",
        "ChargePeriodStart": "strftime(day, '%Y-%m-%dT%H:%M:%SZ')",
        "ChargePeriodEnd": "strftime(day + INTERVAL 1 DAY, '%Y-%m-%dT%H:%M:%SZ')",
        "ChargeFrequency": ("CASE lower(frequency) WHEN 'onetime' THEN 'One-Time' WHEN 'recurring' THEN "
                            "'Recurring' WHEN 'usagebased' THEN 'Usage-Based' ELSE frequency END"),
        "ChargeDescription": "coalesce(nullif(concat_ws(' - ', meter_name, meter_subcategory), ''), product)",
        "ProviderName": "'Microsoft'",
        "PublisherName": "publisher",
        "BillingAccountId": "billing_account",
        "SubAccountId": "subscription",
        "BillingCurrency": "currency",
        "ServiceName": "coalesce(meter_category, service_name)",
        "ServiceCategory": "service_family",
        "ResourceId": resource_id_sql(),
        "ResourceName": "resource_name",
        "RegionId": "lower(replace(location, ' ', ''))",
        "SkuId": "sku",
        "PricingQuantity": "trim(quantity)",
        "ConsumedQuantity": "trim(quantity)",
        "PricingUnit": "coalesce(u.unit, trim(az.unit))",
        "ConsumedUnit": "coalesce(u.unit, trim(az.unit))",
        "ContractedCost": "k.contracted_cost",
        "ContractedUnitPrice": "trim(unit_price)",
        "ListUnitPrice": "coalesce(trim(payg_price), trim(unit_price))",
        "ListCost": "l.list_cost",
        "PricingCategory": ("CASE WHEN pm = 'ondemand' THEN 'Standard' WHEN pm = 'spot' THEN 'Dynamic' "
                            "WHEN pm IN ('reservation', 'savingsplan') THEN 'Committed' "
                            "WHEN pm <> '' THEN 'Other' END"),
        "CommitmentDiscountId": commitment_id_sql(),
        "CommitmentDiscountStatus": "CASE WHEN unused THEN 'Unused' WHEN covered THEN 'Used' END",
        "CommitmentDiscountType": commitment_type_sql(),
        "Tags": tags_sql(),
        "x_CostView": quote_text(view),
        "x_CostViewSource": quote_text(source),
        "x_ContractedCostSource": "k.contracted_source",
        "x_ListCostSource": "l.list_source",
        "x_EffectivePrice": "trim(effective_price)",
        "x_ChargeType": "charge_type",
        "x_InstanceType": instance_type_sql(),
        "x_SkuMeterName": "meter_name",
        "x_SkuMeterSubcategory": "meter_subcategory",
        "x_PricingUnitDescription": "az.unit",
        "x_PricingBlockSize": "coalesce(u.block, '1')",
        "x_ResourceGroupName": "resource_group",
    }
    select = ", ".join(f"{expr} AS {name}" for name, expr in fields.items())
    joined = ("FROM az LEFT JOIN units u ON u.k = lower(trim(az.unit)) LEFT JOIN contracted k ON k.rn = az.rn "
              "LEFT JOIN listed l ON l.rn = az.rn")
    rate = "CASE WHEN payg_price IS NOT NULL THEN trim(exchange_rate) END"
    return [f"CREATE TABLE mapped AS SELECT {select} {joined} ORDER BY az.rn",
            f"CREATE TEMP TABLE rescale AS SELECT * FROM (SELECT az.rn, coalesce(u.block, '1') AS block, {rate} AS rate "
            f"{joined}) WHERE block <> '1' OR coalesce(rate, '1') <> '1'"]


def charge_category_sql() -> str:
    """SQL: ChargeType → FOCUS ChargeCategory (values checked already). A commitment refund (a
    reservation returned or exchanged) is the negative of a purchase: ChargeCategory Purchase, as
    FOCUS has no Refund category and a correction keeps the category of the charge it corrects, so
    the audit treats it as the purchase it reverses (contracted basis 0, a commitment step of the
    bridge, spread onto the lines of the commitment it names)."""
    cases = " ".join(f"WHEN {quote_text(k)} THEN {quote_text(v)}" for k, v in CHARGE_TYPES.items())
    return f"CASE WHEN commitment_charge AND ct = 'refund' THEN 'Purchase' ELSE CASE ct {cases} END END"


def commitment_id_sql() -> str:
    """SQL: benefitId without an empty trailing ``/reservations/``, else ReservationId."""
    benefit = "regexp_replace(trim(benefit_id), '/reservations/?$', '', 'i')"
    return f"coalesce(nullif({benefit}, ''), trim(reservation_id))"


def commitment_type_sql() -> str:
    """SQL: Reservation or Savings Plan, for commitment lines only."""
    reservation = ("benefit_id ILIKE '%/microsoft.capacity/%' OR pm = 'reservation' OR ct = 'unusedreservation'")
    savings = "benefit_id ILIKE '%/microsoft.billingbenefits/%' OR pm = 'savingsplan' OR ct = 'unusedsavingsplan'"
    return (f"CASE WHEN NOT (covered OR unused OR commitment_charge) THEN NULL WHEN {reservation} "
            f"THEN 'Reservation' WHEN {savings} THEN 'Savings Plan' END")


def tags_sql() -> str:
    """SQL: Tags as a JSON object text: Azure's brace-less ``"k": "v", …`` gets its braces."""
    return ("CASE WHEN tags IS NULL THEN NULL WHEN starts_with(ltrim(tags), '{') THEN tags "
            "ELSE '{' || tags || '}' END")


def resource_id_sql() -> str:
    """SQL: the ResourceId, made the VM's own ARM id on a scale set's per-VM rows (AdditionalInfo
    VMName ``<set>_<N>``; :mod:`connectors.billing.scale_sets`)."""
    return vm_resource_id_sql("resource_id", "additional_info")


def instance_type_sql() -> str:
    """SQL: the VM size of a Virtual Machines line, from AdditionalInfo's ServiceType or the meter."""
    info = "CASE WHEN json_valid(additional_info) THEN additional_info END"
    service_type = (f"coalesce(json_extract_string({info}, '$.ServiceType'), "
                    f"json_extract_string({info}, '$.serviceType'))")
    arm = f"CASE WHEN regexp_matches({service_type}, '^(?i)(standard|basic)_') THEN {service_type} END"
    meter = ("nullif(replace(trim(regexp_replace(split_part(meter_name, '/', 1), "
             "'(?i)\\s+(spot|low priority)$', '')), ' ', '_'), '')")
    return f"CASE WHEN lower(trim(meter_category)) = 'virtual machines' THEN coalesce({arm}, {meter}) END"


# --- blocks → distinct units, pricing → billing currency --------------------------------------

def rescale(lines: pd.DataFrame, factors: dict[int, tuple[str, str | None]]) -> pd.DataFrame:
    """Exact Decimal rescaling of the few lines that need it (``factors``: row → (block, rate)).

    Quantities × block; unit prices ÷ block; a PayGPrice-based list price × the MCA exchange rate
    (PayGPrice is in the pricing currency there). DuckDB has no exact decimal division, hence Python.
    """
    if not factors or lines.empty:
        return lines
    todo = lines["row"].isin(list(factors))
    if not todo.any():
        return lines
    lines = lines.copy()
    rows = lines.loc[todo, "row"].tolist()
    blocks = [Decimal(factors[rn][0]) for rn in rows]
    rates = [Decimal(factors[rn][1] or 1) for rn in rows]
    with decimal.localcontext() as context:
        context.prec = 40
        changes = {"pricing_quantity": (blocks, None), "consumed_quantity": (blocks, None),
                   "contracted_unit_price": (None, blocks), "list_unit_price": (rates, blocks)}
        for column, (factor, divisor) in changes.items():
            values = [scaled(v, factor and factor[i], divisor and divisor[i])
                      for i, v in enumerate(lines.loc[todo, column])]
            lines.loc[todo, column] = pd.Series(values, index=lines.index[todo], dtype="object")
    return lines


def scaled(value, factor: Decimal | None, divisor: Decimal | None):
    """``value`` × ``factor`` ÷ ``divisor`` (either may be None); a None value stays None."""
    if value is None:
        return None
    value = value * factor if factor is not None else value
    return value / divisor if divisor is not None else value
