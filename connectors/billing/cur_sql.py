"""SQL of the CUR connector: raw AWS Cost and Usage Report columns → FOCUS-named columns, in DuckDB.

Three spellings of the same columns are accepted:

* legacy CUR CSV: ``lineItem/UnblendedCost``, ``product/instanceType``, ``resourceTags/user:team``;
* legacy CUR through Athena (Parquet or CSV): ``line_item_unblended_cost``,
  ``reservation_reservation_a_r_n``, flat ``resource_tags_user_team`` columns;
* CUR 2.0 (Data Exports): the same snake_case names, with ``product``, ``resource_tags`` (or
  ``tags``) as MAP columns (JSON text in a CSV export): ``product['instance_type']``.

A field is found by its canonical key (lower case, letters and digits only), so
``reservation/ReservationARN``, ``reservation_reservation_a_r_n`` and ``reservation_reservation_arn``
are one field. A ``product_*`` field missing as a column is looked up in the ``product`` MAP.

Every file is copied into table ``raw`` (one row per CUR line, one VARCHAR column per field, nulls
normalised, ``_file`` / ``_row`` / ``_h`` = file index, 1-based data row, hash of the whole raw
row); :func:`staged_sql` then maps ``raw`` to FOCUS names in file order without a sort
(:func:`mapped_sql` sorts, for a ``raw`` out of file order). Money stays text or DECIMAL, never DOUBLE.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from connectors.billing.cur_amounts import DEC, case_of, dec, dec_text  # noqa: F401 (sql.dec: cur_split)
from connectors.billing.cur_commitments import DATE_FIELDS
from connectors.billing.cur_tags import BAD_MAP, bad_map_sql, flat_tags, is_text, map_of_text, map_tags, tag_key
from connectors.billing.focus_load import csv_options, text_or_null
from connectors.duck import quote_ident, quote_text

# Every CUR field the mapping reads, in CUR 2.0 / Athena spelling, and the commitments' terms (cur_commitments).
FIELDS = (
    "line_item_line_item_type", "line_item_unblended_cost", "line_item_usage_start_date",
    "line_item_usage_end_date", "bill_payer_account_id", "line_item_usage_account_id",
    "product_product_name", "line_item_product_code", "line_item_line_item_description",
    "line_item_resource_id", "product_region", "product_region_code", "line_item_usage_amount",
    "pricing_unit", "pricing_term", "pricing_public_on_demand_rate", "pricing_public_on_demand_cost",
    "line_item_unblended_rate", "line_item_currency_code", "line_item_usage_type", "line_item_operation",
    "product_instance_type", "product_sku", "reservation_effective_cost", "reservation_reservation_arn",
    "reservation_unused_amortized_upfront_fee_for_billing_period", "reservation_unused_recurring_fee",
    "savings_plan_savings_plan_effective_cost", "savings_plan_savings_plan_arn",
    "savings_plan_total_commitment_to_date", "savings_plan_used_commitment",
    "split_line_item_parent_resource_id", "capacity_reservation_capacity_reservation_arn",
    "split_line_item_split_cost", "split_line_item_unused_cost", *DATE_FIELDS,
)
REQUIRED = ("line_item_unblended_cost", "line_item_line_item_type", "line_item_usage_start_date", "line_item_usage_end_date")
# How a legacy CSV spells the required fields (for messages about a missing column).
LEGACY_NAMES = {"line_item_unblended_cost": "lineItem/UnblendedCost", "line_item_line_item_type": "lineItem/LineItemType",
                "line_item_usage_start_date": "lineItem/UsageStartDate", "line_item_usage_end_date": "lineItem/UsageEndDate",
                "identity_line_item_id": "identity/LineItemId", "identity_time_interval": "identity/TimeInterval"}
NUMERIC = ("line_item_unblended_cost", "line_item_usage_amount", "line_item_unblended_rate",
           "pricing_public_on_demand_rate", "pricing_public_on_demand_cost",
           "reservation_effective_cost", "reservation_unused_amortized_upfront_fee_for_billing_period",
           "reservation_unused_recurring_fee", "savings_plan_savings_plan_effective_cost",
           "savings_plan_total_commitment_to_date", "savings_plan_used_commitment",
           "split_line_item_split_cost", "split_line_item_unused_cost")
PERIOD = ("line_item_usage_start_date", "line_item_usage_end_date")
MAP_COLUMNS = {"product": "product", "resource_tags": "tags", "tags": "tags"}
# Cheap columns, together near unique (AWS's line item id and time interval are): a line repeated whole.
CANDIDATE_COLUMNS = ("identity_line_item_id", "identity_time_interval", "line_item_usage_start_date",
                     "line_item_usage_end_date", "line_item_resource_id", "line_item_unblended_cost",
                     "line_item_usage_amount")
TAG_PREFIXES = ("resourceTags/", "resource_tags_")

USAGE_TYPES = ("Usage", "DiscountedUsage", "SavingsPlanCoveredUsage", "SavingsPlanNegation")
CATEGORY = {**{t: "Usage" for t in USAGE_TYPES},
            "SavingsPlanRecurringFee": "Purchase", "SavingsPlanUpfrontFee": "Purchase",
            "RIFee": "Purchase", "Fee": "Purchase", "Tax": "Tax", "Credit": "Credit",
            "Refund": "Refund"}
# Any other type ending in "Discount" (BundledDiscount, EdpDiscount, PrivateRateDiscount, ...) is a Credit.
DISCOUNT_SUFFIX = "Discount"
# Split cost allocation rows (EKS pods, ECS tasks on EC2) split an instance line that is already billed.
SPLIT_OPERATIONS = ("EKSPod-EC2", "ECSTask-EC2")
# An EC2 Capacity Block for ML's upfront fee (``USE2-CapacityBlockFee:p5.48xlarge``, grafana/cloudcost-exporter
# billing.go; resource its reservation), a purchase with no list price: it lists at its cost (FOCUS ListCost).
# Usage run in a block (billed 0, naming it) is contracted at its public on-demand price, as RI-covered usage.
CAPACITY_BLOCK = "CapacityBlock"
BLOCK_FEE, BLOCK_RUN = (f"line_item_usage_type ILIKE '%{CAPACITY_BLOCK}%'", "coalesce(capacity_reservation_capacity_"
                        "reservation_arn, '') <> '' AND TRY_CAST(line_item_unblended_cost AS DECIMAL(38,20)) = 0")


@dataclass(frozen=True)
class Layout:
    """One data file: where each field comes from (SQL over the file's read) and what it is called."""

    path: Path
    fmt: str
    label: str
    width: int
    exprs: dict[str, str]
    names: dict[str, str]
    tags: str
    row_hash: str
    # The file column each field is read from (a ``product_*`` field: its value in the ``product``
    # MAP), and the columns the tags are read from: summing lines keyed on these columns keys them on the
    # fields (:mod:`connectors.billing.cur_compact`). Empty for rows that are not a file's.
    sources: dict[str, str] = field(default_factory=dict)
    tag_sources: tuple[str, ...] = ()
    # The fields read from a DOUBLE column (Parquet): their text is the value's shortest text.
    doubles: frozenset[str] = frozenset()
    # The DuckDB type of each field's source (a MAP lookup: VARCHAR); empty for a CSV file's table.
    types: dict[str, str] = field(default_factory=dict)
    # SQL: a hash equal for two lines equal in every column (``row_hash`` with each MAP column hashed
    # by its size: as exact a test of lines repeated whole, cheaper to make); empty: ``row_hash``.
    repeat_hash: str = ""
    candidate_hash: str = ""  # SQL: :meth:`candidate_key` of a Parquet file
    id_hash: str = ""  # SQL: a hash of identity_line_item_id and identity_time_interval ("": one is missing)
    csv_maps: tuple[tuple[str, str], ...] = ()

    def repeat_key(self) -> str:
        """SQL: the hash that finds candidates for a line repeated whole."""
        return self.repeat_hash or self.row_hash

    def candidate_key(self) -> str:
        """SQL: a hash of :data:`CANDIDATE_COLUMNS`, equal for two lines repeated whole (a 2 M-line
        Parquet file: 0.03 s, every column 0.36 s); a CSV table's is its row hash, made as read."""
        return self.candidate_hash or self.repeat_key()

    def text_of(self, name: str, ref: str) -> str:
        """SQL: field ``name``'s text (as ``exprs[name]`` makes it) from ``ref``, a value of its source."""
        if name not in self.types:
            return ref
        return text_or_null(ref, self.types[name])

    def spelling(self, name: str) -> str:
        """How this file spells field ``name`` (for messages)."""
        if name in self.names:
            return self.names[name]
        slashed = any("/" in n for n in self.names.values())
        return LEGACY_NAMES.get(name, name) if slashed else name


def canonical(name: str) -> str:
    """Lower case, letters and digits only: the key on which CUR spellings meet."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def layout_of(path: Path, fmt: str, label: str, described: list[tuple[str, str]], text_maps: bool = True) -> Layout:
    """Resolve a file's columns (name, DuckDB type) to fields, MAP columns (text ones as JSON objects:
    CSV; Parquet ``text_maps``) and tag columns (CSV: ``c0..cN``, VARCHAR; Parquet: by their names)."""
    csv = fmt != "parquet"
    refs = [f"c{i}" if csv else quote_ident(name) for i, (name, _) in enumerate(described)]
    by_key: dict[str, tuple[str, str, str]] = {}
    maps: dict[str, str] = {}
    map_refs: dict[str, str] = {}
    tag_columns: list[tuple[str, str]] = []
    csv_maps: list[tuple[str, str]] = []  # (name, reference) of a CSV file's MAP columns: JSON text
    for ref, (name, dtype) in zip(refs, described):
        kind = MAP_COLUMNS.get(name.lower())
        if kind and (dtype.startswith("MAP") or csv or (text_maps and is_text(dtype))):
            maps[kind] = ref if dtype.startswith("MAP") and not csv else map_of_text(ref)
            map_refs[kind] = ref
            csv_maps += [(name, ref)] if csv else []
            continue
        prefix = next((p for p in TAG_PREFIXES if name.startswith(p)), None)
        if prefix:
            tag_columns.append((tag_key(name[len(prefix):]), ref))
            continue
        by_key.setdefault(canonical(name), (ref, name, "VARCHAR" if csv else dtype))
    exprs, names, sources, doubles, types = {}, {}, {}, set(), {}
    for name in FIELDS:
        found = by_key.get(canonical(name))
        from_map = name.startswith("product_") and "product" in maps
        if found:
            exprs[name], names[name], sources[name] = text_or_null(found[0], found[2]), found[1], found[0]
            types[name] = found[2]
            if found[2].upper() == "DOUBLE":
                doubles.add(name)
        elif from_map:
            # The value looked up is the field's source: lines whose product MAPs differ only in
            # attributes no field reads are one line to every stage, and comparing a MAP costs more.
            key = name[len("product_"):]
            lookup = f"element_at({maps['product']}, {quote_text(key)})[1]"
            exprs[name], names[name], sources[name] = text_or_null(lookup), f"product['{key}']", lookup
            types[name] = "VARCHAR"
    tags = map_tags(maps["tags"]) if "tags" in maps else flat_tags(tag_columns)
    tag_sources = (map_refs["tags"],) if "tags" in maps else tuple(ref for _, ref in tag_columns)
    row_hash = f"hash({', '.join(refs)})"
    sized = [f"cardinality({ref})" if dtype.upper().startswith("MAP") else ref for ref, (_, dtype) in zip(refs, described)]
    wanted = {canonical(name) for name in CANDIDATE_COLUMNS}
    cheap = [ref for ref, (name, dtype) in zip(refs, described)
             if canonical(name) in wanted and not dtype.upper().startswith("MAP")]
    line_id, interval = (by_key.get(canonical(name)) for name in ("identity_line_item_id", "identity_time_interval"))
    return Layout(path, fmt, label, len(described), exprs, names, tags, row_hash, sources, tag_sources,
                  frozenset(doubles), types, f"hash({', '.join(sized)})", f"hash({', '.join(cheap)})" if cheap and not
                  csv else "", f"hash({line_id[0]}, {interval[0]})" if line_id and interval else "",
                  tuple(csv_maps))


ROW = "__costaudit_row"


def file_relation_sql(layout: Layout, index: int) -> str:
    """CREATE the relation ``f<index>`` of one file. A Parquet file is a view over the file (its
    columns and ``__costaudit_row``, its 1-based data row), read where a query needs it; a CSV file is
    read once into a table of the rows of ``raw`` less ``_file`` and ``_row`` (:func:`projection`),
    in file order."""
    if layout.fmt == "parquet":
        return (f"CREATE TEMP VIEW f{index} AS SELECT file_row_number + 1 AS {ROW}, * EXCLUDE (file_row_number) "
                f"FROM {parquet_read(layout)}")
    ids = f", {layout.id_hash} AS _i" if layout.id_hash else ""  # the hash pass's (cur_checks.py), not raw's
    if layout.csv_maps:  # the map cells that are no JSON object (cur_checks.py map_errors), not raw's
        ids += f", {bad_map_sql(layout.csv_maps)} AS {BAD_MAP}"
    return f"CREATE TEMP TABLE f{index} AS SELECT {projection(layout)}{ids} FROM {csv_read(layout)}"


def row_of(layout: Layout) -> str:
    """SQL over a file's relation (:func:`file_relation_sql`): the line's 1-based data row."""
    return ROW if layout.fmt == "parquet" else "rowid + 1"


def file_rows_sql(layout: Layout, index: int) -> str:
    """SELECT one file's lines as rows of ``raw`` from its relation (:func:`file_relation_sql`)."""
    if layout.fmt == "parquet":
        return f"SELECT {index} AS _file, {row_of(layout)} AS _row, {projection(layout)} FROM f{index}"
    internal = [name for name, kept in (("_i", layout.id_hash), (BAD_MAP, layout.csv_maps)) if kept]
    excluded = f"EXCLUDE ({', '.join(internal)}) " if internal else ""
    return f"SELECT {index} AS _file, {row_of(layout)} AS _row, * {excluded}FROM f{index}"


def shaped(layout: Layout) -> Layout:
    """The layout of a file's relation: the file's own for a Parquet view; for a CSV table (already
    the shape of ``raw``) every field read from its own column."""
    if layout.fmt == "parquet":
        return layout
    present = {name: name for name in layout.exprs}
    return Layout(layout.path, layout.fmt, layout.label, layout.width, present, layout.names, "_tags", "_h",
                  present, ("_tags",), id_hash="_i" if layout.id_hash else "")


def raw_view_sql(layouts: list[Layout]) -> str:
    """CREATE VIEW raw: every file's lines, in file order (nothing copied)."""
    return "CREATE TEMP VIEW raw AS " + " UNION ALL ".join(file_rows_sql(layout, i) for i, layout in enumerate(layouts))


def create_raw_sql() -> str:
    """CREATE TABLE raw: file index, data row, row hash, one VARCHAR per field, tags."""
    columns = ", ".join(f"{name} VARCHAR" for name in FIELDS)
    return (f"CREATE TABLE raw (_file INTEGER, _row BIGINT, _h UBIGINT, {columns}, "
            "_tags VARCHAR)")


def projection(layout: Layout) -> str:
    """The SELECT list that turns one file's read into rows of ``raw`` (less _file and _row)."""
    parts = [f"{layout.row_hash} AS _h"]
    parts += [f"{layout.exprs.get(name, 'NULL::VARCHAR')} AS {name}" for name in FIELDS]
    parts.append(f"{layout.tags} AS _tags")
    return ", ".join(parts)


def csv_read(layout: Layout) -> str:
    """read_csv of one CSV file, every column VARCHAR named c0..cN, file order kept."""
    return f"read_csv({quote_text(str(layout.path))}, {csv_options(layout.width, layout.fmt)})"


def parquet_read(layout: Layout) -> str:
    """read_parquet of one file with its row numbers."""
    return f"read_parquet({quote_text(str(layout.path))}, file_row_number=true)"


def is_split(prefix: str = "") -> str:
    """SQL: the line is a split cost allocation row (a pod or task share of an instance line), over
    the fields as ``raw`` names them (each name after ``prefix``)."""
    ops = ", ".join(quote_text(o) for o in SPLIT_OPERATIONS)
    parent, own, operation = (prefix + name for name in ("split_line_item_parent_resource_id",
                                                          "line_item_resource_id", "line_item_operation"))
    return (f"(coalesce({operation} IN ({ops}), FALSE) OR "
            f"({parent} IS NOT NULL AND {parent} IS DISTINCT FROM {own}))")


UNBLENDED = "line_item_unblended_cost"
RI_FEE = "reservation_reservation_arn IS NOT NULL"
# The FOCUS cost columns of a CUR line: (SQL per line item type, SQL for every other type).
COSTS: dict[str, tuple[dict[str, str], str]] = {
    # Covered usage and its negation net to zero on the invoice; as in AWS's FOCUS export both
    # carry BilledCost 0 (the Savings Plan fee is what was billed), so no line carries money
    # that another line takes back.
    "BilledCost": ({"SavingsPlanCoveredUsage": "'0'", "SavingsPlanNegation": "'0'"}, UNBLENDED),
    "EffectiveCost": ({"DiscountedUsage": "reservation_effective_cost", "SavingsPlanNegation": "'0'",
                       "SavingsPlanCoveredUsage": "savings_plan_savings_plan_effective_cost", "RIFee": "'0'",
                       "SavingsPlanUpfrontFee": "'0'", "SavingsPlanRecurringFee": "'0'",
                       "Fee": f"CASE WHEN {RI_FEE} THEN '0' ELSE {UNBLENDED} END"}, UNBLENDED),
    # The public on-demand price of the line (AWS: of the highest tier where a SKU is tiered). A
    # negation repeats its covered usage's public on-demand cost (positive, not negated): counted, it
    # would list the covered usage twice, so it lists nothing, as it bills nothing. Tax, credits and
    # refunds have no list price (their public on-demand cost is 0 or empty): FOCUS (ListCost) lists a
    # credit at its BilledCost and a tax on the list cost of what it taxes; the CUR's tax line is the nearest
    # figure to that, so each lists at its unblended cost, as AWS's own FOCUS export lists a credit. A
    # negotiated discount (``*Discount``) is the gap between list and contracted: it lists at its public
    # on-demand cost (0). A Capacity Block's fee lists at its cost (:data:`BLOCK_FEE`).
    "ListCost": ({"SavingsPlanNegation": "'0'", **{t: UNBLENDED for t in ("Tax", "Credit", "Refund")},
                  "Fee": f"CASE WHEN {BLOCK_FEE} THEN {UNBLENDED} ELSE pricing_public_on_demand_cost END"},
                 "pricing_public_on_demand_cost"),
    # Before commitments, at the account's own rates: a CUR prices every line at them in its unblended
    # cost (negotiated discounts are lines of their own, ``*Discount`` types), except reservation-covered
    # usage, which it bills at 0 with no rate of the account: there only the public on-demand cost says
    # what the usage costs before the reservation. A negation takes nothing back before commitments.
    # Tax, credits and refunds are contracted at their unblended cost, as FOCUS (ContractedCost) has it.
    "ContractedCost": ({"DiscountedUsage": "pricing_public_on_demand_cost", "SavingsPlanNegation": "'0'",
                        "Usage": f"CASE WHEN {BLOCK_RUN} THEN pricing_public_on_demand_cost ELSE {UNBLENDED} END"},
                       UNBLENDED),
}
# ContractedUnitPrice per line item type: the rate of ContractedCost, so that ContractedCost =
# PricingQuantity × ContractedUnitPrice on usage (METHOD §5), as in AWS's FOCUS export: covered usage at
# its rate before the commitment discount, Savings Plan-covered usage its unblended rate (the plan's
# rate is after its discount: cloudgen eks 8705 lost it, gap 16.9 %), reservation- and block-covered usage
# its public on-demand rate.
CONTRACTED_RATES = {"Usage": f"CASE WHEN {BLOCK_RUN} THEN pricing_public_on_demand_rate ELSE line_item_unblended_rate END",
                    "SavingsPlanCoveredUsage": "line_item_unblended_rate",
                    "DiscountedUsage": "pricing_public_on_demand_rate"}
# An unused-commitment row (:data:`UNUSED`) bills nothing and is no usage: list and contracted 0.
UNUSED_COSTS = {"BilledCost": "'0'", "ListCost": "'0'", "ContractedCost": "'0'"}


def cost_sql(name: str) -> str:
    """SQL of FOCUS cost column ``name`` over ``raw`` (line item type as ``t``)."""
    by_type, default = COSTS[name]
    return case_of(by_type, default) if by_type else default


def cost_columns() -> dict[str, dict[str, str]]:
    """Which CUR columns feed each FOCUS cost column, per line item type where it differs: FOCUS
    column → {"*" (every other type) or a line item type → CUR expression}, with the rows for unused
    commitments that the reader adds (``unused commitment (RIFee)`` …). Expressions name the CUR 2.0 /
    Athena spelling of each field (``line_item_unblended_cost``; legacy ``lineItem/UnblendedCost``)."""
    out: dict[str, dict[str, str]] = {}
    for name, (by_type, default) in COSTS.items():
        entry = {"*": _readable(default)}
        entry.update({t: _readable(expr) for t, expr in by_type.items()})
        for fee, (amount, *_rest) in UNUSED.items():
            entry[f"unused commitment ({fee})"] = _readable(dec_text(amount) if name == "EffectiveCost"
                                                            else UNUSED_COSTS[name])
        out[name] = entry
    return out


def _readable(expr: str) -> str:
    """A cost expression as a reader wants it: a literal as its value, the DECIMAL casts of the
    unused amounts dropped (``coalesce(x, '0')`` reads as ``x``)."""
    text = re.sub(r"regexp_replace\(CAST\((.*) AS VARCHAR\), '.*?'\)$", r"\1", expr)
    text = re.sub(r"CAST\(coalesce\((\w+), '0'\) AS DECIMAL\(38,20\)\)", r"\1", text)
    text = re.sub(r"^CASE WHEN (\w+) IS NOT NULL THEN '0' ELSE (\w+) END$", r"0 where \1 is set, else \2", text)
    return text[1:-1] if re.fullmatch(r"'[^']*'", text) else text


def base_columns() -> dict[str, str]:
    """FOCUS name → SQL over ``raw`` (line item type as ``t``), for the CUR line itself."""
    ri_fee = "reservation_reservation_arn IS NOT NULL"
    category = case_of({t: quote_text(c) for t, c in CATEGORY.items()},
                       f"CASE WHEN t LIKE '%{DISCOUNT_SUFFIX}' THEN 'Credit' END")
    usage = f"t IN ({', '.join(quote_text(t) for t in USAGE_TYPES)})"
    commitment = (f"CASE WHEN t IN ('DiscountedUsage', 'RIFee') OR (t = 'Fee' AND {ri_fee}) "
                  "THEN reservation_reservation_arn WHEN t LIKE 'SavingsPlan%' "
                  "THEN savings_plan_savings_plan_arn END")
    return {
        "ProviderName": "'AWS'",
        "BillingAccountId": "bill_payer_account_id",
        "SubAccountId": "line_item_usage_account_id",
        "ServiceName": "coalesce(product_product_name, line_item_product_code)",
        "ChargeCategory": category,
        "ChargeFrequency": case_of({"SavingsPlanRecurringFee": "'Recurring'", "RIFee": "'Recurring'",
                                    "SavingsPlanUpfrontFee": "'One-Time'", "Fee": "'One-Time'"},
                                   "'Usage-Based'"),
        "ChargeDescription": "line_item_line_item_description",
        "ChargePeriodStart": "line_item_usage_start_date",
        "ChargePeriodEnd": "line_item_usage_end_date",
        **{name: cost_sql(name) for name in COSTS},  # BilledCost, EffectiveCost, ListCost, ContractedCost
        "ListUnitPrice": "pricing_public_on_demand_rate",
        "ContractedUnitPrice": case_of(CONTRACTED_RATES),
        # A negation offsets covered usage in money only: no quantity, so no instance-hours twice.
        "PricingQuantity": "CASE WHEN t <> 'SavingsPlanNegation' THEN line_item_usage_amount END",
        "ConsumedQuantity": f"CASE WHEN {usage} AND t <> 'SavingsPlanNegation' THEN line_item_usage_amount END",
        "PricingUnit": "pricing_unit",
        "ConsumedUnit": f"CASE WHEN {usage} THEN pricing_unit END",
        "PricingCategory": ("CASE WHEN t IN ('DiscountedUsage', 'SavingsPlanCoveredUsage', "
                            "'SavingsPlanNegation') THEN 'Committed' WHEN t = 'Usage' AND "
                            "(pricing_term = 'Spot' OR line_item_usage_type LIKE '%SpotUsage%') "
                            "THEN 'Dynamic' WHEN t = 'Usage' THEN 'Standard' END"),
        "CommitmentDiscountId": commitment,
        "CommitmentDiscountStatus": ("CASE WHEN t IN ('DiscountedUsage', 'SavingsPlanCoveredUsage', "
                                     "'SavingsPlanNegation') THEN 'Used' END"),
        "CommitmentDiscountType": (f"CASE WHEN t LIKE 'SavingsPlan%' THEN 'Savings Plan' WHEN "
                                   f"t IN ('DiscountedUsage', 'RIFee') OR (t = 'Fee' AND {ri_fee}) "
                                   "THEN 'Reservation' END"),
        "ResourceId": "line_item_resource_id",
        # the capacity reservation a line ran in, else the one a Capacity Block's fee buys (audit/capacity_blocks.py)
        "CapacityReservationId": f"coalesce(capacity_reservation_capacity_reservation_arn, CASE WHEN {BLOCK_FEE} "
                                 "THEN line_item_resource_id END)",
        "RegionId": "coalesce(product_region_code, product_region)",
        "SkuId": "product_sku",
        "BillingCurrency": "line_item_currency_code",
        "Tags": "_tags",
        "x_UsageType": "line_item_usage_type",
        "x_Operation": "line_item_operation",
        "x_InstanceType": "product_instance_type",
        "x_LineItemType": "t",
        "x_ServiceCode": "line_item_product_code",
    }


UNUSED = {
    # line item type: (unused amount, commitment id, description, commitment type)
    "SavingsPlanRecurringFee": (
        f"{dec('savings_plan_total_commitment_to_date')} - {dec('savings_plan_used_commitment')}",
        "savings_plan_savings_plan_arn", "unused Savings Plan commitment", "Savings Plan"),
    "RIFee": (
        f"{dec('reservation_unused_amortized_upfront_fee_for_billing_period')} + "
        f"{dec('reservation_unused_recurring_fee')}",
        "reservation_reservation_arn", "unused reservation", "Reservation"),
}


def unused_columns(amount: str, commitment: str, description: str, kind: str) -> dict[str, str]:
    """FOCUS name → SQL for the row of a commitment fee's unused part (billed 0, effective = unused)."""
    cols = {name: "NULL" for name in base_columns()}
    keep = ("ProviderName", "BillingAccountId", "SubAccountId", "ServiceName", "ChargePeriodStart",
            "ChargePeriodEnd", "RegionId", "BillingCurrency", "Tags", "x_UsageType", "x_Operation",
            "x_LineItemType", "x_ServiceCode")
    cols.update({name: base_columns()[name] for name in keep})
    cols.update({
        "ChargeCategory": "'Usage'", "ChargeFrequency": "'Usage-Based'",
        "ChargeDescription": quote_text(description), **UNUSED_COSTS,
        "EffectiveCost": dec_text(amount), "PricingCategory": "'Committed'",
        "CommitmentDiscountId": commitment, "CommitmentDiscountStatus": "'Unused'",
        "CommitmentDiscountType": quote_text(kind),
    })
    return cols


def select_list(columns: dict[str, str]) -> str:
    """``expr AS Name, ...`` for a FOCUS column mapping."""
    return ", ".join(f"{expr} AS {name}" for name, expr in columns.items())


def money_source() -> str:
    """The lines of ``raw`` that carry money (split rows left out), with the line item type as ``t``."""
    return f"(SELECT *, line_item_line_item_type AS t FROM raw WHERE NOT {is_split()})"


def weight_sql(weighted: bool) -> str:
    """SQL: column ``_n`` of a mapped row as text, the CUR lines it stands for (1 unless ``raw`` was
    summed by :mod:`connectors.billing.cur_compact`)."""
    return "CAST(_n AS VARCHAR) AS _n" if weighted else "'1' AS _n"


def staged_parts(select: dict[str, str] | None, weighted: bool = False) -> str:
    """UNION ALL of every money line and one row per unused commitment: ``_file, _row, _sub`` and,
    unless ``select`` is None, ``_h``, the FOCUS columns and ``_n``."""
    source = money_source()
    cols = "" if select is None else f", CAST(_h AS VARCHAR) AS _h, {select_list(select)}, {weight_sql(weighted)}"
    parts = [f"SELECT _file, _row, 0 AS _sub{cols} FROM {source}"]
    for fee, (amount, commitment, description, kind) in UNUSED.items():
        mapped = unused_columns(amount, commitment, description, kind)
        cols = "" if select is None else (f", CAST(hash(_h, 'unused') AS VARCHAR) AS _h, {select_list(mapped)}, "
                                          f"{weight_sql(weighted)}")
        parts.append(f"SELECT _file, _row, 1 AS _sub{cols} FROM {source} "
                     f"WHERE t = {quote_text(fee)} AND ({amount}) > 0")
    return " UNION ALL ".join(parts)


def staged_sql(weighted: bool = False) -> str:
    """CREATE TABLE staged: ``_file, _row, _sub``, ``_h`` and the FOCUS columns of every money line,
    each followed by the row of its commitment fee's unused part where it has one, in the order of
    ``raw`` (no sort: :func:`mapped_sql` and :func:`origin_sql` give the same rows, sorted)."""
    base = base_columns()
    fees = {fee: unused_columns(amount, commitment, description, kind)
            for fee, (amount, commitment, description, kind) in UNUSED.items()}
    parts = ["_file", "_row", "_sub",
             "CAST(CASE WHEN _sub = 0 THEN _h ELSE hash(_h, 'unused') END AS VARCHAR) AS _h"]
    for name, expr in base.items():
        if all(columns[name] == expr for columns in fees.values()):
            parts.append(f"{expr} AS {name}")
            continue
        whens = " ".join(f"WHEN t = {quote_text(fee)} THEN {columns[name]}" for fee, columns in fees.items())
        parts.append(f"CASE WHEN _sub = 0 THEN {expr} {whens} END AS {name}")
    parts.append(weight_sql(weighted))
    unused = " ".join(f"WHEN {quote_text(fee)} THEN CASE WHEN ({amount}) > 0 THEN [0, 1] ELSE [0] END"
                      for fee, (amount, *_rest) in UNUSED.items())
    return (f"CREATE TABLE staged AS SELECT {', '.join(parts)} FROM "
            f"(SELECT *, unnest(CASE t {unused} ELSE [0] END) AS _sub FROM {money_source()})")


def mapped_sql(weighted: bool = False) -> str:
    """CREATE TABLE mapped: the FOCUS-named lines in file order (file, row, unused row last)."""
    return (f"CREATE TABLE mapped AS SELECT * EXCLUDE (_file, _row, _sub) FROM "
            f"({staged_parts(base_columns(), weighted)}) ORDER BY _file, _row, _sub")


def origin_sql() -> str:
    """CREATE TABLE origin: (file, row, sub-row) of each row of ``mapped``, in the same order."""
    return f"CREATE TABLE origin AS SELECT * FROM ({staged_parts(None)}) ORDER BY _file, _row, _sub"
