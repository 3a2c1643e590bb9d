"""GCP resource-based committed use discounts (CUDs) in the billing export, as FOCUS models them.

The export bills a resource-based commitment as rows of its own, ``Commitment v1: <resource> in
<region> for <N> Year`` (a fee for the committed quantity, used or not: its ``usage.amount`` is that
quantity times the seconds of the row), and discounts the usage it covers with credits of type
``COMMITTED_USAGE_DISCOUNT`` on the usage rows (minus the on-demand price of the covered quantity).
Read as plain rows, the fee would be usage of its own (a GPU commitment's SKU names the GPU, so it
would look like a GPU machine that no telemetry knows) and the covered usage would cost nothing.

Here the rows are mapped as FOCUS maps commitments (METHOD §1), per *pool*: the billing account,
region, currency, UTC day, unit and committed resource (the fee's SKU without its
``Commitment …:`` prefix and term, read as the usage SKU names the resource: ``N2 Cpu in Americas``
is ``N2 Instance Core running in Americas``):

* each covered usage row (a ``COMMITTED_USAGE_DISCOUNT`` credit in a pool with a fee) gets the
  pool's CommitmentDiscountId, status ``Used``, and EffectiveCost = its cost + its **amortised
  share** of the pool's fees: the fees × min(1, covered / committed) split by covered quantity
  (covered quantity = usage amount × −credit / cost), to 9 places, the shares adding up exactly
  (every ratio in whole billionths, :func:`share`: no floating point).
  Its credit stays a Credit row, as invoiced, and nets the covered part's on-demand price out on
  every basis, so that on the effective basis the row costs its uncovered part plus its share of
  the fee;
* the pool's fee rows become a recurring **Purchase** with that id, of the part of the fees the
  shares use (BilledCost; EffectiveCost 0: it is in the covered rows);
* where the shares leave part of the fees (fees − shares, exact), an **Unused** row with that rest
  as BilledCost and EffectiveCost, classed commitment_unused (platform overhead) on every basis.

So the billed basis still sums to the invoice (the used part of the fees spread over the lines that
used it, as for any FOCUS export) and the effective basis amortises. A pool's fee rows become one
Purchase and one Unused row per project they are billed to (GCP attributes a shared commitment's
fee to the projects that use it), each project's the pool's used and unused parts cut in proportion
to its fees (cumulative bounds again: the projects' rows add up exactly to the pool's), so that a
``[scope]`` of projects takes its own part. Spend-based commitments (``Commitment - dollar based v1:
…``) are pooled the same way (:func:`ctes`). A credit whose pool has no fee (the fee billed to
another account, or a SKU this mapping does not pair) is left as it was and named in the source's
notes (:func:`unpaired_notes`).
"""
from __future__ import annotations

from connectors.billing.gcp_sql import CONVERSION_RATE, GCP_KEYS

#: a resource-based fee row (``Commitment v1: …``)
IS_FEE = ("CASE WHEN cost_type = 'regular' AND sku_description ILIKE '%commitment%' "
          "THEN regexp_matches(sku_description, '^\\s*commitment\\s+v\\d+\\s*:', 'i') ELSE FALSE END")
#: a spend-based fee row: ``Commitment - dollar based v1: GCE for 1 year`` (or another product's,
#: spend- or dollar-based, flexible), or any row whose usage a ``FEE_UTILIZATION_OFFSET`` credit
#: offsets (the fee SKUs of Google's 2026 data model, whatever their names)
IS_SPEND_FEE = ("CASE WHEN cost_type <> 'regular' THEN FALSE WHEN credit_fee_utilization_offset <> 0 THEN TRUE "
                "WHEN sku_description ILIKE '%commitment%' THEN regexp_matches(sku_description, "
                "'^\\s*commitment\\s*-\\s*(dollar|spend)[\\s-]+based\\b|^\\s*commitment\\b.*\\bflexible\\b', 'i') "
                "ELSE FALSE END")
#: the CUD credit on a usage row (summed per row by the aggregation)
CUD_CREDIT = "credit_committed_usage_discount"
#: a spend-based commitment's credit on the usage it covers (legacy data model), and the credit on
#: its own fee row that offsets the part used (the data model of 2025 on, whose usage is billed at
#: the discounted price)
SPEND_CREDIT, OFFSET_CREDIT = "credit_committed_usage_discount_dollar_base", "credit_fee_utilization_offset"
#: a credits filter (over the unpivoted credits): a spend-based fee's offset credit is folded into the
#: fee's Unused row (a regular row with such a credit is a spend-based fee, :data:`IS_SPEND_FEE`)
OFFSET_FOLDED = f" AND NOT (kind = '{OFFSET_CREDIT}' AND cost_type = 'regular')"
#: the service a spend-based fee commits to: its ``goog-originating-service-id`` label, else its
#: service (Google's own utilisation queries pair fees and credits so)
FEE_SERVICE = ("coalesce(nullif(json_extract_string(labels, '$.\"goog-originating-service-id\"'), ''), "
               "service_id)")


def family(text: str) -> str:
    """SQL: the committed resource a SKU text names, in one spelling for fee and usage SKUs."""
    plain = (f"regexp_replace(regexp_replace(lower({text}), '^\\s*commitment\\s+v\\d+\\s*:\\s*', ''), "
             "'\\s+for\\s+\\d+\\s+years?\\s*$', '')")
    spaced = f"regexp_replace({plain}, '\\s+running\\s+in\\s+', ' in ', 'g')"
    return f"replace(replace({spaced}, 'instance core', 'cpu'), 'instance ram', 'ram')"


POOL_KEYS = ("pool_day", "billing_account_id", "region", "currency", "family", "usage_unit")
#: a spend-based pool: no region (a Compute flexible commitment applies in every region) and no unit
#: (the fee is in hundredths of a dollar of on-demand spend, the usage in its own units)
SPEND_KEYS = ("pool_day", "billing_account_id", "currency", "spend_key")


def pool_id(prefix: str = "", kind: str = "gcp-cud") -> str:
    """SQL: the CommitmentDiscountId of a pool (stable over the window: no day in it). The Unused
    rows carry ``<kind>-unused/…``: they hold their own BilledCost, so no Purchase may spread onto
    them (``audit.adjust`` spreads a purchase over the lines under its id)."""
    return (f"'{kind}/' || {prefix}billing_account_id || '/' || {prefix}region || '/' || "
            f"{prefix}family")


def spend_id(prefix: str = "", kind: str = "gcp-spend-cud") -> str:
    """SQL: the CommitmentDiscountId of a spend-based pool (its billing account and service)."""
    return f"'{kind}/' || {prefix}billing_account_id || '/' || {prefix}spend_key"


def nanos(value: str) -> str:
    """SQL: a DECIMAL(38, 9) amount as a whole number of its billionths (HUGEINT, exact)."""
    return f"CAST(({value}) * 1000000000 AS HUGEINT)"


def from_nanos(count: str) -> str:
    """SQL: a HUGEINT count of billionths as the DECIMAL(38, 9) amount it is (exact)."""
    return f"CAST(CAST({count} AS DECIMAL(38, 9)) * 0.000000001 AS DECIMAL(38, 9))"


#: the base of the limbs :func:`share` divides in (a limb × a number of 25 digits fits a HUGEINT)
LIMB = "CAST(1000000000000 AS HUGEINT)"
#: :func:`share` keeps a quantity's ratio to this many digits (byte-seconds in billionths run longer)
RATIO_DIGITS = 25


def share(total: str, part: str, whole: str) -> str:
    """SQL: ``total × part ÷ whole`` (HUGEINT counts of billionths) rounded half away from zero to a
    whole billionth, in integers, so exact: DECIMAL division in DuckDB is DOUBLE (about 16
    significant digits: a fee of 10^11 cut in thirds was off by thousands of billionths, one of
    10^14 by cents). ``part`` is divided in limbs of 12 digits, long division carrying the
    remainder, so no product passes 37 digits while ``total`` and ``whole`` have at most 25 (10^16
    of the unit); a longer ``whole`` (a quantity, never money in this range) is first rounded, with
    ``part``, to :data:`RATIO_DIGITS` digits. A longer ``total`` stops the query with DuckDB's
    HUGEINT overflow error rather than round."""
    digits = f"length(CAST(abs({whole}) AS VARCHAR))"
    scale = f"CAST('1' || repeat('0', greatest(0, {digits} - {RATIO_DIGITS})) AS HUGEINT)"
    t, w = f"abs({total})", f"((abs({whole}) + {scale} // 2) // {scale})"
    p = f"((abs({part}) + {scale} // 2) // {scale})"
    limbs = [f"({p} // ({LIMB} * {LIMB}))", f"(({p} // {LIMB}) % {LIMB})", f"({p} % {LIMB})"]
    value, quotient = f"({t} * {limbs[0]})", "0"
    for number, limb in enumerate(limbs):
        if number:
            value = f"(({value} % {w}) * {LIMB} + {t} * {limb})"
        quotient = f"({quotient} * {LIMB} + {value} // {w})"
    rounded = f"({quotient} + CASE WHEN 2 * ({value} % {w}) >= {w} THEN 1 ELSE 0 END)"
    return f"(sign({total}) * sign({part}) * sign({whole}) * {rounded})"


def _pool_ctes(kind: dict, rows: str) -> str:
    """The CTEs of one kind of pool over ``rows`` (``cud_cov``, or the ``cud`` table it became):
    ``<name>_pool`` (a row per pool with a fee: its fees, committed and covered totals, the fee
    rows' columns) and ``<name>_used`` (the part of the fees used). ``covered`` and ``committed``
    are quantities in billionths (HUGEINT); every cut is a :func:`share`."""
    name, keys, fee = kind["name"], kind["keys"], kind["fee"]
    cols = ", ".join(keys)
    fee_min = ", ".join(f"min({c}) FILTER (WHERE {fee}) AS fee_{alias}" for c, alias in (
        ("sku_description", "sku"), ("sku_id", "sku_id"), ("nullif(service_id, '')", "service_id"),
        ("nullif(invoice_month, '')", "invoice_month"), ("project_id", "project"),
        ("service_description", "service"), ("resource_name", "resource"), ("period_start", "start")))
    return f"""
    {name}_pool AS (
      SELECT {cols}, sum({kind["amount"]}) FILTER (WHERE {fee}) AS fee,
        sum({kind["committed"]}) FILTER (WHERE {fee}) AS committed, sum({kind["covered"]}) AS covered_total,
        sum(usage_amount) FILTER (WHERE {fee}) AS committed_amount,
        sum(export_rows) FILTER (WHERE {fee}) AS fee_rows, {fee_min},
        max(period_end) FILTER (WHERE {fee}) AS fee_end{kind["extra"]}
      FROM {rows} WHERE {keys[-1]} IS NOT NULL GROUP BY {cols}
      HAVING count(*) FILTER (WHERE {fee}) > 0),
    {name}_used AS (
      SELECT *, CASE WHEN coalesce(covered_total, 0) <= 0 THEN 0::DECIMAL(38, 9)
                     WHEN committed > 0 AND covered_total < committed
                     THEN least(fee, {from_nanos(share(nanos('fee'), 'covered_total', 'committed'))})
                     ELSE fee END AS used
      FROM {name}_pool)"""


def _share_ctes(kind: dict) -> str:
    """The CTEs of each covered row's share of its pool's used part: ``<name>_amortised`` (by
    ``cud_rid``), the differences of cumulative bounds over the rows in a total order."""
    name, keys, covered = kind["name"], kind["keys"], kind["covered"]
    cols = ", ".join(keys)
    order = ", ".join(f"{k} NULLS FIRST" for k in GCP_KEYS)  # the aggregated rows' keys: a total order
    c_order = ", ".join(f"c.{k} NULLS FIRST" for k in GCP_KEYS)
    return f"""
    {name}_cum AS (
      SELECT c.cud_rid, {", ".join(f"c.{k}" for k in keys)}, {", ".join(f"c.{k}" for k in GCP_KEYS if k not in keys)},
        p.used, p.covered_total, row_number() OVER shares = count(*) OVER pool AS is_last,
        sum(c.{covered}) OVER shares AS cum
      FROM cud_cov AS c JOIN {name}_used AS p USING ({cols})
      WHERE c.{covered} > 0
      WINDOW pool AS (PARTITION BY {", ".join(f"c.{k}" for k in keys)}),
             shares AS (pool ORDER BY {c_order} ROWS UNBOUNDED PRECEDING)),
    {name}_bound AS (
      SELECT *, CASE WHEN is_last THEN used
                     ELSE {from_nanos(share(nanos('used'), 'cum', 'covered_total'))} END AS bound
      FROM {name}_cum),
    {name}_amortised AS (
      SELECT cud_rid, bound - coalesce(lag(bound) OVER (PARTITION BY {cols} ORDER BY {order}), 0) AS amortised
      FROM {name}_bound)"""


def _cut_ctes(kind: dict, rows: str) -> str:
    """The CTEs of each project's part of its pool's used and unused parts, in proportion to its
    fee rows (cumulative bounds again): ``<name>_split``, a row per pool and project."""
    name, keys, fee = kind["name"], kind["keys"], kind["fee"]
    cols = ", ".join(keys)
    cut = lambda total, part, whole: from_nanos(share(nanos(total), nanos(part), nanos(whole)))  # noqa: E731
    return f"""
    {name}_project AS (
      SELECT {cols}, project_id, sum({kind["amount"]}) AS project_fee, sum(export_rows) AS project_rows,
        sum(usage_amount) AS project_amount
      FROM {rows} WHERE {fee} GROUP BY {cols}, project_id),
    {name}_cum_fee AS (
      SELECT u.*, p.project_id, p.project_rows, p.project_amount,
        row_number() OVER cut = count(*) OVER pool AS is_last, sum(p.project_fee) OVER cut AS cum_fee
      FROM {name}_used AS u JOIN {name}_project AS p USING ({cols})
      WINDOW pool AS (PARTITION BY {", ".join(f"u.{k}" for k in keys)}),
             cut AS (pool ORDER BY p.project_id ROWS UNBOUNDED PRECEDING)),
    {name}_cut AS (
      SELECT *,
        CASE WHEN is_last THEN used WHEN fee = 0 THEN 0 ELSE {cut('used', 'cum_fee', 'fee')} END AS used_bound,
        CASE WHEN is_last THEN fee - used WHEN fee = 0 THEN 0 ELSE {cut('fee - used', 'cum_fee', 'fee')}
        END AS unused_bound
      FROM {name}_cum_fee),
    {name}_split AS (
      SELECT * EXCLUDE (project_id, project_rows, project_amount, is_last, cum_fee, used_bound, unused_bound)
        REPLACE (
          used_bound - coalesce(lag(used_bound) OVER project, 0) AS used,
          project_id AS fee_project, project_rows AS fee_rows, project_amount AS committed_amount),
        unused_bound - coalesce(lag(unused_bound) OVER project, 0) AS unused
      FROM {name}_cut WINDOW project AS (PARTITION BY {cols} ORDER BY project_id))"""


def _kinds() -> tuple[dict, dict]:
    """The two kinds of pool, as the CTE builders take them. **Resource-based** (``Commitment v1:
    …``, :data:`POOL_KEYS`): covered quantity = usage amount × −credit ÷ cost, committed = the fee
    rows' usage amount. **Spend-based** (``Commitment - dollar based v1: …``, :data:`SPEND_KEYS`):
    covered = −the legacy credits, committed = the fee rows' pricing quantity ÷ 100 × their
    conversion rate (the fee is priced per hundredth of a US dollar of on-demand spend; Google's
    own utilisation query divides so), and the fees are net of their own ``FEE_UTILIZATION_OFFSET``
    credits (the data model of 2025 on, whose covered usage is billed at the discounted price:
    what the offset leaves is the unused rest). Quantities in billionths (HUGEINT)."""
    # the committed on-demand amount in the billing currency (a row without a rate is read at 1)
    rate = nanos(f"coalesce(nullif({CONVERSION_RATE}, 0), 1)")
    resource = {"name": "cud_r", "keys": POOL_KEYS, "fee": "is_fee", "amount": "cost", "covered": "covered",
                "committed": nanos("usage_amount"), "extra": ""}
    spend = {"name": "cud_s", "keys": SPEND_KEYS, "fee": "is_spend_fee", "amount": f"cost + {OFFSET_CREDIT}",
             "covered": "spend_covered",
             "committed": share(nanos("pricing_quantity"), rate, "CAST(100000000000 AS HUGEINT)"),
             "extra": ", min(region) FILTER (WHERE is_spend_fee) AS region, "
                      "min(usage_unit) FILTER (WHERE is_spend_fee) AS usage_unit"}
    return resource, spend


def ctes(source: str) -> str:
    """CTEs over ``source`` (the aggregated rows, with ``credit_*`` columns and a row number
    ``cud_rid``) that end in ``cud``: every row of ``source`` with ``is_fee``, ``is_spend_fee``, its
    pool's keys, ``covered`` and ``spend_covered``, ``cud_id`` and ``amortised``. Pools of both
    kinds (:func:`_kinds`); :func:`fee_ctes` reads the fees' rows from ``cud`` once it is a table.

    The used part is the fees × min(1, covered / committed) (all of them where the covered amount
    reaches the committed one, or where a spend-based fee states no committed amount); the shares
    are cut from it by cumulative covered amount, each row the difference of two rounded bounds,
    the last bound the used part itself, so they add up to it to the last digit and none is
    negative. Only the covered rows of pools with a fee are ordered (by every key of the aggregated
    rows: the same shares whichever engine aggregated); the others meet the small pool tables in a
    join."""
    covered = (f"CASE WHEN NOT is_fee AND {CUD_CREDIT} <> 0 AND cost <> 0 THEN "
               f"{share(nanos('usage_amount'), nanos(f'-{CUD_CREDIT}'), nanos('cost'))} END")
    spend_covered = f"CASE WHEN NOT is_spend_fee AND {SPEND_CREDIT} < 0 THEN {nanos(f'-{SPEND_CREDIT}')} END"
    on = " AND ".join
    resource_on = on(f"c.{k} = r.{k}" for k in POOL_KEYS)
    spend_on = on(f"c.{k} = s.{k}" for k in SPEND_KEYS)
    pools = ",".join(_pool_ctes(kind, "cud_cov") + "," + _share_ctes(kind) for kind in _kinds())
    return f"""
    cud_flag AS (SELECT *, {IS_FEE} AS is_fee, {IS_SPEND_FEE} AS is_spend_fee FROM {source}),
    cud_row AS (SELECT *, CASE WHEN is_fee OR {CUD_CREDIT} <> 0 THEN {family('sku_description')} END AS family,
                  CASE WHEN is_spend_fee THEN {FEE_SERVICE} WHEN {SPEND_CREDIT} <> 0 THEN service_id END AS spend_key,
                  date_trunc('day', bucket) AS pool_day FROM cud_flag),
    cud_cov AS (SELECT *, {covered} AS covered, {spend_covered} AS spend_covered FROM cud_row),
    {pools},
    cud AS (
      SELECT c.*,
        CASE WHEN r.fee IS NOT NULL AND (c.is_fee OR c.covered > 0) THEN {pool_id('c.')}
             WHEN s.fee IS NOT NULL AND (c.is_spend_fee OR c.spend_covered > 0) THEN {spend_id('c.')} END AS cud_id,
        CASE WHEN ra.amortised IS NOT NULL OR sa.amortised IS NOT NULL
             THEN coalesce(ra.amortised, 0) + coalesce(sa.amortised, 0) END AS amortised
      FROM cud_cov AS c LEFT JOIN cud_r_pool AS r ON {resource_on} LEFT JOIN cud_s_pool AS s ON {spend_on}
        LEFT JOIN cud_r_amortised AS ra ON ra.cud_rid = c.cud_rid
        LEFT JOIN cud_s_amortised AS sa ON sa.cud_rid = c.cud_rid)"""


def fee_ctes(rows: str = "cud") -> str:
    """CTEs over ``rows`` (the ``cud`` table of :func:`ctes`) that end in ``cud_fee``: a row per pool
    and project, its part of the fees, the ``used`` part the shares add up to, exactly, and the
    ``unused`` rest. Only the pools are aggregated again (from the rows :func:`ctes` flagged): the
    flags, the covered quantities and the shares are computed once."""
    resource, spend = (_pool_ctes(kind, rows) + "," + _cut_ctes(kind, rows) for kind in _kinds())
    return f"""{resource},{spend},
    cud_fee AS (
      SELECT *, {pool_id()} AS cud_id, {pool_id('', 'gcp-cud-unused')} AS unused_id FROM cud_r_split
      UNION ALL BY NAME
      SELECT * EXCLUDE (spend_key), {spend_id()} AS cud_id, {spend_id('', 'gcp-spend-cud-unused')} AS unused_id
      FROM cud_s_split)"""


#: the ``cud`` CTE of an export with no fee row: nothing to map (the full CTEs cost a fifth more)
NONE = ("cud AS (SELECT *, FALSE AS is_fee, FALSE AS is_spend_fee, NULL::VARCHAR AS cud_id, "
        "NULL::DECIMAL(38, 9) AS amortised FROM a)")


def fees_present(con) -> bool:
    """Whether ``agg_canonical`` has a commitment's fee row (resource- or spend-based)."""
    return con.execute(f"SELECT count(*) FROM agg_canonical WHERE {IS_FEE} OR {IS_SPEND_FEE}").fetchall()[0][0] > 0


def fee_rows() -> str:
    """SELECT the FOCUS rows of ``cud_fee``: per pool, the Purchase (the part of the fee its usage
    used: BilledCost, EffectiveCost 0) and the Unused row (the rest, on both bases); columns as
    ``gcp_billing.focus_sql`` names them. ListCost is 0 on both, as the CUR and Azure readers map
    unused commitments and the list basis counts a purchase: the covered usage carries its own list
    price (its ``cost_at_list``), and an unused commitment lists no usage."""
    common = """'Google Cloud' AS ProviderName, billing_account_id AS BillingAccountId,
        fee_project AS SubAccountId, fee_service AS ServiceName, fee_start AS ChargePeriodStart,
        fee_end AS ChargePeriodEnd, nullif(fee_resource, '') AS ResourceId,
        nullif(fee_resource, '') AS ResourceName, region AS RegionId, fee_sku_id AS SkuId,
        currency AS BillingCurrency, '{}' AS Tags, fee_sku_id AS x_SkuId,
        fee_service_id AS x_ServiceId, 'regular' AS x_CostType, fee_invoice_month AS x_InvoiceMonth,
        NULL::VARCHAR AS x_MachineSpec, NULL::DECIMAL(38, 9) AS PricingQuantity,
        NULL::VARCHAR AS PricingUnit, committed_amount AS ConsumedQuantity,
        nullif(usage_unit, '') AS ConsumedUnit, NULL::VARCHAR AS x_CreditType,
        'Committed Use Discount' AS CommitmentDiscountType, 0::DECIMAL(38, 9) AS ListCost"""
    return f"""
      SELECT {common}, fee_sku AS ChargeDescription, 'Purchase' AS ChargeCategory,
        used AS BilledCost, 0::DECIMAL(38, 9) AS EffectiveCost, fee_rows AS x_ExportRows,
        cud_id AS CommitmentDiscountId,
        NULL::VARCHAR AS CommitmentDiscountStatus, 'Recurring' AS ChargeFrequency, 0 AS part
      FROM cud_fee WHERE used <> 0
      UNION ALL BY NAME
      SELECT {common}, 'Unused: ' || fee_sku AS ChargeDescription, 'Usage' AS ChargeCategory,
        unused AS BilledCost, unused AS EffectiveCost, NULL::BIGINT AS x_ExportRows,
        unused_id AS CommitmentDiscountId,
        'Unused' AS CommitmentDiscountStatus, NULL::VARCHAR AS ChargeFrequency, 2 AS part
      FROM cud_fee WHERE unused <> 0"""


def charge_columns() -> str:
    """SELECT-list items of a usage row of ``cud`` (fee rows become :func:`fee_rows`): the charge
    category, the two costs and the commitment columns."""
    return """
        CASE cost_type WHEN 'regular' THEN 'Usage' WHEN 'tax' THEN 'Tax' ELSE 'Adjustment' END
          AS ChargeCategory,
        cost AS BilledCost, CASE WHEN amortised IS NOT NULL THEN cost + amortised ELSE cost END AS EffectiveCost,
        cud_id AS CommitmentDiscountId, CASE WHEN cud_id IS NOT NULL THEN 'Used' END AS CommitmentDiscountStatus,
        CASE WHEN cud_id IS NOT NULL THEN 'Committed Use Discount' END AS CommitmentDiscountType,
        NULL::VARCHAR AS ChargeFrequency"""


def unpaired_notes(con) -> list[tuple[int, str, str]]:
    """Notes (row 0, column, note) for committed use discount credits with no fee in their pool
    (their usage is at its cost net of the credit on every basis, the commitment's fee unseen), and
    for spend-based fees that state no committed amount (taken as used up to what their credits
    cover)."""
    return _resource_notes(con) + _spend_notes(con)


def _fee_skus(con, fee: str) -> str:
    fees = [r[0] for r in con.execute(
        f"SELECT DISTINCT sku_description || ' (' || region || ')' FROM cud WHERE {fee} ORDER BY 1").fetchall()]
    return "; fee SKUs in the export: " + ", ".join(fees[:5]) if fees else "; the export has no commitment fee"


def _resource_notes(con) -> list[tuple[int, str, str]]:
    rows = con.execute(f"""
        SELECT sku_description, region, count(*), sum({CUD_CREDIT})
        FROM cud WHERE NOT is_fee AND {CUD_CREDIT} <> 0 AND cud_id IS NULL
        GROUP BY 1, 2 ORDER BY 1, 2""").fetchall()
    seen = _fee_skus(con, "is_fee") if rows else ""
    return [(0, "credits", f"committed use discount credits on {count} row(s) of {sku!r} in {region or '(no region)'} "
                           f"({amount}) meet no commitment fee of their account, region and resource{seen}; "
                           "that usage is counted at its cost net of the credit, the commitment's fee unseen")
            for sku, region, count, amount in rows]


def _spend_notes(con) -> list[tuple[int, str, str]]:
    rows = con.execute(f"""
        SELECT service_description, service_id, count(*), sum({SPEND_CREDIT})
        FROM cud WHERE NOT is_spend_fee AND {SPEND_CREDIT} <> 0
          AND (cud_id IS NULL OR cud_id NOT LIKE 'gcp-spend-cud/%')
        GROUP BY 1, 2 ORDER BY 1, 2""").fetchall()
    seen = _fee_skus(con, "is_spend_fee") if rows else ""
    notes = [(0, "credits", f"spend-based committed use discount credits on {count} row(s) of {name!r} "
                            f"(service {service}, {amount}) meet no spend-based commitment fee of their billing "
                            f"account and service on their day{seen}; that usage is counted at its cost net of "
                            "the credit, the commitment's fee unseen")
             for name, service, count, amount in rows]
    if not con.execute("SELECT count(*) FROM cud WHERE is_spend_fee").fetchall()[0][0]:
        return notes  # no spend-based fee (``cud`` is then :data:`NONE`, with no pool keys)
    keys = " AND ".join(f"u.{k} = f.{k}" for k in SPEND_KEYS)
    paired = f"f.is_spend_fee AND EXISTS (SELECT 1 FROM cud AS u WHERE NOT u.is_spend_fee AND u.{SPEND_CREDIT} < 0 AND {keys})"
    unknown = con.execute(f"SELECT DISTINCT f.sku_description FROM cud AS f WHERE {paired} "
                          "AND coalesce(f.pricing_quantity, 0) <= 0 ORDER BY 1").fetchall()
    notes += [(0, "usage.amount_in_pricing_units",
               f"the spend-based commitment fee {sku!r} states no committed amount (its pricing quantity, "
               "hundredths of a dollar of on-demand spend): the fee is taken as used up to what its "
               "credits cover, an assumption") for (sku,) in unknown]
    rateless = con.execute(f"SELECT DISTINCT f.sku_description, f.currency FROM cud AS f WHERE {paired} "
                           f"AND upper(f.currency) <> 'USD' AND coalesce({CONVERSION_RATE}, 0) = 0 "
                           "ORDER BY 1, 2").fetchall()
    notes += [(0, "currency_conversion_rate",
               f"the spend-based commitment fee {sku!r} is billed in {currency} with no currency_conversion_rate: "
               "its committed amount (in US dollars) is compared with the credits at a rate of 1, an assumption")
              for sku, currency in rateless]
    return notes
