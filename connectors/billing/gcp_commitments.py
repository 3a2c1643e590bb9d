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
  (covered quantity = usage amount × −credit / cost), to 9 places, the shares adding up exactly.
  Its credit stays a Credit row, as invoiced, and nets the covered part's on-demand price out on
  every basis, so that on the effective basis the row costs its uncovered part plus its share of
  the fee;
* the pool's fee rows become a recurring **Purchase** with that id, of the part of the fees the
  shares use (BilledCost; EffectiveCost 0: it is in the covered rows);
* where the shares leave part of the fees (fees − shares, exact), an **Unused** row with that rest
  as BilledCost and EffectiveCost, classed commitment_unused (platform overhead) on every basis.

So the billed basis still sums to the invoice (the used part of the fees spread over the lines that
used it, as for any FOCUS export) and the effective basis amortises. The fee rows of one pool are
one Purchase row of it (a pool's commitments in several projects carry the first project's id). A
credit whose pool has no fee (the fee billed to another account, or a SKU this mapping does not
pair) is left as it was and named in the source's notes (:func:`unpaired_notes`).
"""
from __future__ import annotations

from connectors.billing.gcp_sql import GCP_KEYS

#: a resource-based fee row (``Commitment v1: …``). A spend-based commitment's fee (``Commitment -
#: dollar based v1: …``) discounts spend across services, not a resource's usage, and stays as it is.
IS_FEE = ("CASE WHEN cost_type = 'regular' AND sku_description ILIKE '%commitment%' "
          "THEN regexp_matches(sku_description, '^\\s*commitment\\s+v\\d+\\s*:', 'i') ELSE FALSE END")
#: the CUD credit on a usage row (summed per row by the aggregation)
CUD_CREDIT = "credit_committed_usage_discount"


def family(text: str) -> str:
    """SQL: the committed resource a SKU text names, in one spelling for fee and usage SKUs."""
    plain = (f"regexp_replace(regexp_replace(lower({text}), '^\\s*commitment\\s+v\\d+\\s*:\\s*', ''), "
             "'\\s+for\\s+\\d+\\s+years?\\s*$', '')")
    spaced = f"regexp_replace({plain}, '\\s+running\\s+in\\s+', ' in ', 'g')"
    return f"replace(replace({spaced}, 'instance core', 'cpu'), 'instance ram', 'ram')"


POOL_KEYS = ("pool_day", "billing_account_id", "region", "currency", "family", "usage_unit")


def pool_id(prefix: str = "", kind: str = "gcp-cud") -> str:
    """SQL: the CommitmentDiscountId of a pool (stable over the window: no day in it). The Unused
    rows carry ``gcp-cud-unused/…``: they hold their own BilledCost, so no Purchase may spread onto
    them (``audit.adjust`` spreads a purchase over the lines under its id)."""
    return (f"'{kind}/' || {prefix}billing_account_id || '/' || {prefix}region || '/' || "
            f"{prefix}family")


def ctes(source: str) -> str:
    """CTEs over ``source`` (the aggregated rows, with ``credit_*`` columns and a row number
    ``cud_rid``): ``cud`` (every row of ``source`` with ``is_fee``, ``family``, ``cud_id`` and
    ``amortised``) and ``cud_fee`` (a row per pool: its fees, the ``used`` part the shares add up
    to, exactly, and the ``unused`` rest).

    The used part is the fees × min(1, covered / committed) (all of them where the covered quantity
    reaches the committed one, exactly); the shares are cut from it by cumulative covered quantity,
    each row the difference of two rounded bounds, the last bound the used part itself, so they add
    up to it to the last digit and none is negative. Only the covered rows of pools with a fee are
    ordered (by every key of the aggregated rows: the same shares whichever engine aggregated); the
    others meet the small pool table in a join."""
    keys = ", ".join(POOL_KEYS)
    order = ", ".join(f"{k} NULLS FIRST" for k in GCP_KEYS)  # the aggregated rows' keys: a total order
    covered = (f"CASE WHEN NOT is_fee AND {CUD_CREDIT} <> 0 AND cost <> 0 THEN "
               f"usage_amount::DOUBLE * (-{CUD_CREDIT})::DOUBLE / cost::DOUBLE END")
    return f"""
    cud_flag AS (SELECT *, {IS_FEE} AS is_fee FROM {source}),
    cud_row AS (SELECT *, CASE WHEN is_fee OR {CUD_CREDIT} <> 0 THEN {family('sku_description')} END AS family,
                  date_trunc('day', bucket) AS pool_day FROM cud_flag),
    cud_cov AS (SELECT *, {covered} AS covered FROM cud_row),
    cud_pool AS (
      SELECT {keys}, sum(cost) FILTER (WHERE is_fee) AS fee,
        sum(usage_amount::DOUBLE) FILTER (WHERE is_fee) AS committed,
        sum(covered) AS covered_total,
        sum(usage_amount) FILTER (WHERE is_fee) AS committed_amount,
        sum(export_rows) FILTER (WHERE is_fee) AS fee_rows,
        min(sku_description) FILTER (WHERE is_fee) AS fee_sku,
        min(sku_id) FILTER (WHERE is_fee) AS fee_sku_id,
        min(nullif(service_id, '')) FILTER (WHERE is_fee) AS fee_service_id,
        min(nullif(invoice_month, '')) FILTER (WHERE is_fee) AS fee_invoice_month,
        min(project_id) FILTER (WHERE is_fee) AS fee_project,
        min(service_description) FILTER (WHERE is_fee) AS fee_service,
        min(resource_name) FILTER (WHERE is_fee) AS fee_resource,
        min(period_start) FILTER (WHERE is_fee) AS fee_start,
        max(period_end) FILTER (WHERE is_fee) AS fee_end
      FROM cud_cov WHERE family IS NOT NULL GROUP BY {keys}
      HAVING count(*) FILTER (WHERE is_fee) > 0),
    cud_used AS (
      SELECT *, CASE WHEN coalesce(covered_total, 0) <= 0 THEN 0::DECIMAL(38, 9)
                     WHEN committed > 0 AND covered_total < committed
                     THEN least(fee, CAST(fee::DOUBLE * covered_total / committed AS DECIMAL(38, 9)))
                     ELSE fee END AS used
      FROM cud_pool),
    cud_share AS (
      SELECT c.*, p.used, p.covered_total,
        row_number() OVER shares AS share_rank, count(*) OVER pool AS share_rows,
        sum(c.covered) OVER shares AS share_cum
      FROM cud_cov AS c JOIN cud_used AS p USING ({keys})
      WHERE c.covered > 0
      WINDOW pool AS (PARTITION BY {keys}), shares AS (pool ORDER BY {order} ROWS UNBOUNDED PRECEDING)),
    cud_bound AS (
      SELECT *, CASE WHEN share_rank = share_rows THEN used
                     ELSE CAST(used::DOUBLE * share_cum / covered_total AS DECIMAL(38, 9)) END AS bound
      FROM cud_share),
    cud_amortised AS (
      SELECT cud_rid, bound - coalesce(lag(bound) OVER (PARTITION BY {keys} ORDER BY {order}), 0) AS amortised
      FROM cud_bound),
    cud AS (
      SELECT c.* EXCLUDE (covered),
        CASE WHEN p.fee IS NOT NULL AND (c.is_fee OR c.covered > 0) THEN {pool_id('c.')} END AS cud_id,
        s.amortised
      FROM cud_cov AS c LEFT JOIN cud_pool AS p USING ({keys}) LEFT JOIN cud_amortised AS s USING (cud_rid)),
    cud_fee AS (
      SELECT *, fee - used AS unused, {pool_id()} AS cud_id, {pool_id('', 'gcp-cud-unused')} AS unused_id
      FROM cud_used)"""


#: the ``cud`` CTE of an export with no fee row: nothing to map (the full CTEs cost a fifth more)
NONE = "cud AS (SELECT *, FALSE AS is_fee, NULL::VARCHAR AS cud_id, NULL::DECIMAL(38, 9) AS amortised FROM a)"


def fees_present(con) -> bool:
    """Whether ``agg_canonical`` has a resource-based commitment's fee row."""
    return con.execute(f"SELECT count(*) FROM agg_canonical WHERE {IS_FEE}").fetchall()[0][0] > 0


def fee_rows() -> str:
    """SELECT the FOCUS rows of ``cud_fee``: per pool, the Purchase (the part of the fee its usage
    used: BilledCost, EffectiveCost 0) and the Unused row (the rest, on both bases); columns as
    ``gcp_billing.focus_sql`` names them."""
    common = """'Google Cloud' AS ProviderName, billing_account_id AS BillingAccountId,
        fee_project AS SubAccountId, fee_service AS ServiceName, fee_start AS ChargePeriodStart,
        fee_end AS ChargePeriodEnd, nullif(fee_resource, '') AS ResourceId,
        nullif(fee_resource, '') AS ResourceName, region AS RegionId, fee_sku_id AS SkuId,
        currency AS BillingCurrency, '{}' AS Tags, fee_sku_id AS x_SkuId,
        fee_service_id AS x_ServiceId, 'regular' AS x_CostType, fee_invoice_month AS x_InvoiceMonth,
        NULL::VARCHAR AS x_MachineSpec, NULL::DECIMAL(38, 9) AS PricingQuantity,
        NULL::VARCHAR AS PricingUnit, committed_amount AS ConsumedQuantity,
        nullif(usage_unit, '') AS ConsumedUnit, NULL::VARCHAR AS x_CreditType,
        'Committed Use Discount' AS CommitmentDiscountType"""
    return f"""
      SELECT {common}, fee_sku AS ChargeDescription, 'Purchase' AS ChargeCategory,
        fee - unused AS BilledCost, 0::DECIMAL(38, 9) AS EffectiveCost, fee_rows AS x_ExportRows,
        cud_id AS CommitmentDiscountId,
        NULL::VARCHAR AS CommitmentDiscountStatus, 'Recurring' AS ChargeFrequency, 0 AS part
      FROM cud_fee WHERE fee - unused <> 0
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
    """Notes (row 0, column, note) for committed use discount credits with no fee in their pool:
    their usage is at its cost net of the credit on every basis, the commitment's fee unseen."""
    rows = con.execute(f"""
        SELECT sku_description, region, count(*), sum({CUD_CREDIT})
        FROM cud WHERE NOT is_fee AND {CUD_CREDIT} <> 0 AND cud_id IS NULL
        GROUP BY 1, 2 ORDER BY 1, 2""").fetchall()
    if not rows:
        return []
    fees = [r[0] for r in con.execute(
        "SELECT DISTINCT sku_description || ' (' || region || ')' FROM cud WHERE is_fee ORDER BY 1").fetchall()]
    seen = "; fee SKUs in the export: " + ", ".join(fees[:5]) if fees else "; the export has no commitment fee"
    return [(0, "credits", f"committed use discount credits on {count} row(s) of {sku!r} in {region or '(no region)'} "
                           f"({amount}) meet no commitment fee of their account, region and resource{seen}; "
                           "that usage is counted at its cost net of the credit, the commitment's fee unseen")
            for sku, region, count, amount in rows]
