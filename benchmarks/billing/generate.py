"""A CUR 2.0-shaped export (Parquet, snake_case columns, ``product`` / ``resource_tags`` MAPs), made by DuckDB.

    .venv/bin/python benchmarks/billing/generate.py FOLDER ROWS

The folder is laid out as AWS Data Exports deliver it::

    FOLDER/costaudit-bench/data/BILLING_PERIOD=2025-01/part-0000N-bench.snappy.parquet
    FOLDER/costaudit-bench/metadata/BILLING_PERIOD=2025-01/costaudit-bench-Manifest.json

Cardinalities: 2,000 resources (each uses three of the 300 SKUs), 20 linked accounts, hourly
lines over January 2025 (744 hours). The 300 SKUs are EC2 instance-hours (150, among them
p5.48xlarge, p4d.24xlarge, g6e.12xlarge, g6e.xlarge, g5.xlarge, g5.12xlarge, g6.xlarge and
trn1.32xlarge), EBS, data transfer, S3, RDS instance-hours and a few hourly network services.
Line item types: Usage, SavingsPlanCoveredUsage with its SavingsPlanNegation, DiscountedUsage
(RI, unblended 0), SavingsPlanRecurringFee (some with an unused part), RIFee, Tax, Credit,
EdpDiscount and Refund. Money and quantities are DOUBLE, as in AWS's CUR 2.0 Parquet, rounded to
10 decimal places. Every value is a function of the row number: the same rows every time.

``--fleet N`` (benchmarks/fleet) makes the GPU lines a fleet that a telemetry source can match:
N p5.48xlarge instances billed every hour (one BoxUsage line per instance-hour, a quarter of the
instances under a Savings Plan: SavingsPlanCoveredUsage), instance ids ``i-%017x`` of 2,000 + n
(after the 2,000 resources), and no other accelerated instance types among the remaining lines.
``--hours H`` spreads the hourly lines over the first H hours of the month instead of 744. Without
either option the output is the same bytes as before they existed.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import duckdb

EXPORT = "costaudit-bench"
PERIOD = "BILLING_PERIOD=2025-01"
HOURS = 744
RESOURCES = 2000
SKUS = 300
ROWS_PER_FILE = 2_000_000
INSTANCE_TYPES = (
    # (instance type, on-demand $/h); the GPU types first
    ("p5.48xlarge", 98.32), ("p4d.24xlarge", 32.7726), ("g6e.12xlarge", 10.49264),
    ("g6e.xlarge", 1.861), ("g5.xlarge", 1.006), ("g5.12xlarge", 5.672), ("g6.xlarge", 0.8048),
    ("trn1.32xlarge", 21.5),
    ("m5.large", 0.096), ("m5.xlarge", 0.192), ("m5.2xlarge", 0.384), ("c5.2xlarge", 0.34),
    ("c7i.2xlarge", 0.357), ("c6i.4xlarge", 0.68), ("r6i.xlarge", 0.252), ("r6i.4xlarge", 1.008),
    ("t3.medium", 0.0416), ("t3.large", 0.0832), ("m7g.large", 0.0816), ("m7g.2xlarge", 0.3264),
    ("c7g.xlarge", 0.1445), ("i4i.2xlarge", 0.686), ("m6i.8xlarge", 1.536), ("x2idn.16xlarge", 6.669),
    ("r7g.2xlarge", 0.4284),
)
REGIONS = (("us-east-1", "USE1", "US East (N. Virginia)"), ("us-west-2", "USW2", "US West (Oregon)"),
           ("eu-west-1", "EU", "EU (Ireland)"), ("ap-northeast-1", "APN1", "Asia Pacific (Tokyo)"),
           ("us-east-2", "USE2", "US East (Ohio)"), ("eu-central-1", "EUC1", "EU (Frankfurt)"))
# Money and quantities: DOUBLE, as AWS writes them.
DOUBLES = ("line_item_usage_amount", "line_item_normalization_factor", "line_item_unblended_cost",
           "line_item_blended_cost", "line_item_net_unblended_cost", "pricing_public_on_demand_cost",
           "reservation_effective_cost", "reservation_unused_amortized_upfront_fee_for_billing_period",
           "reservation_unused_recurring_fee", "savings_plan_savings_plan_effective_cost",
           "savings_plan_savings_plan_rate", "savings_plan_total_commitment_to_date",
           "savings_plan_used_commitment")
# SKU ranges: [start, end) → (product code, product name, unit, usage type, operation, $/unit)
OTHER_SKUS = (
    (150, 200, "AmazonEC2", "Amazon Elastic Compute Cloud", "GB-Mo", "EBS:VolumeUsage.gp3", "CreateVolume-Gp3", 0.08),
    (200, 230, "AWSDataTransfer", "AWS Data Transfer", "GB", "DataTransfer-Out-Bytes", "", 0.09),
    (230, 260, "AmazonS3", "Amazon Simple Storage Service", "GB-Mo", "TimedStorage-ByteHrs", "", 0.023),
    (260, 280, "AmazonRDS", "Amazon Relational Database Service", "Hrs", "InstanceUsage:db.r6g.large",
     "CreateDBInstance:0016", 0.26),
    (280, 290, "AWSELB", "Elastic Load Balancing", "LCU-Hrs", "LCUUsage", "LoadBalancing:Application", 0.008),
    (290, 295, "AmazonVPC", "Amazon Virtual Private Cloud", "Hrs", "NatGateway-Hours", "NatGateway", 0.045),
    (295, 300, "AmazonEKS", "Amazon Elastic Kubernetes Service", "Hrs", "AmazonEKS-Hours:perCluster",
     "CreateOperation", 0.10),
)


def values_sql(rows: list[tuple]) -> str:
    """A VALUES list of SQL literals."""
    def literal(value):
        if isinstance(value, str):
            return "'" + value.replace("'", "''") + "'"
        return repr(value)
    return ", ".join("(" + ", ".join(literal(v) for v in row) + ")" for row in rows)


GPU_TYPES = 8  # the first entries of INSTANCE_TYPES are accelerated
FLEET_TYPE, FLEET_REGION = INSTANCE_TYPES[0], REGIONS[0]  # p5.48xlarge in us-east-1


def create_skus(con, instance_types: tuple = INSTANCE_TYPES) -> None:
    """Table ``sku``: the 300 SKUs with product, unit, usage type, rate and description."""
    types = values_sql([(i, t, r) for i, (t, r) in enumerate(instance_types)])
    regions = values_sql([(i, *r) for i, r in enumerate(REGIONS)])
    others = values_sql(list(OTHER_SKUS))
    n_types, n_regions = len(instance_types), len(REGIONS)
    con.execute(f"CREATE TEMP TABLE itype AS SELECT * FROM (VALUES {types}) v(k, instance_type, rate)")
    con.execute(f"CREATE TEMP TABLE region AS SELECT * FROM (VALUES {regions}) v(k, code, prefix, location)")
    con.execute(f"CREATE TEMP TABLE other AS SELECT * FROM (VALUES {others}) "
                "v(lo, hi, code, name, unit, usage, op, rate)")
    con.execute(f"""
        CREATE TEMP TABLE sku AS
        SELECT s.k,
               printf('SKU%06dBENCH', s.k) AS sku_id,
               r.code AS region, r.prefix AS prefix, r.location AS location,
               coalesce(o.code, 'AmazonEC2') AS product_code,
               coalesce(o.name, 'Amazon Elastic Compute Cloud') AS product_name,
               coalesce(o.unit, 'Hrs') AS unit,
               CASE WHEN o.code IS NULL THEN t.instance_type
                    WHEN o.usage LIKE 'InstanceUsage:%' THEN split_part(o.usage, ':', 2) END AS instance_type,
               r.prefix || '-' || coalesce(o.usage, 'BoxUsage:' || t.instance_type) AS usage_type,
               coalesce(o.op, 'RunInstances') AS operation,
               round(coalesce(o.rate, t.rate) * (1 + 0.05 * r.k), 6) AS rate,
               CASE WHEN o.code IS NULL
                    THEN '$' || round(t.rate * (1 + 0.05 * r.k), 6) || ' per On Demand Linux '
                         || t.instance_type || ' Instance Hour'
                    ELSE '$' || round(o.rate * (1 + 0.05 * r.k), 6) || ' per ' || o.unit || ' of '
                         || o.usage || ' in ' || r.location END AS description,
               o.code IS NULL AS ec2_instance
        FROM range({SKUS}) s(k)
        LEFT JOIN other o ON s.k >= o.lo AND s.k < o.hi
        LEFT JOIN itype t ON s.k < 150 AND t.k = s.k % {n_types}
        JOIN region r ON r.k = (s.k // {n_types}) % {n_regions}
    """)


def lines_sql(first: int, last: int, rows: int, hours: int = HOURS) -> str:
    """SELECT of CUR 2.0 rows ``first`` .. ``last - 1`` of an export of ``rows`` rows."""
    return f"""
    WITH base AS (
      SELECT i,
             CAST(i * {hours} // {rows} AS INTEGER) AS hour,
             (i * 2654435761) % 4294967296 AS a
      FROM range({first}, {last}) r(i)
    ), pick AS (
      SELECT *, CAST(a % {RESOURCES} AS INTEGER) AS res,
             CAST((a // 7919) % 1000 AS INTEGER) AS b,
             CASE WHEN i % 5000 = 0 THEN 'Tax' WHEN i % 5000 = 1 THEN 'Credit'
                  WHEN i % 5000 = 2 THEN 'EdpDiscount' WHEN i % 4000 = 3 THEN 'SavingsPlanRecurringFee'
                  WHEN i % 200000 = 4 THEN 'RIFee' WHEN i % 400000 = 5 THEN 'Refund' END AS special
      FROM base
    ), typed AS (
      SELECT p.* EXCLUDE (special), s.* EXCLUDE (instance_type, unit),
             CASE WHEN special IS NULL THEN s.instance_type END AS instance_type,
             CASE WHEN special IS NULL THEN s.unit END AS unit,
             coalesce(special, CASE WHEN NOT s.ec2_instance THEN 'Usage'
                                    WHEN b < 700 THEN 'Usage' WHEN b < 820 THEN 'SavingsPlanCoveredUsage'
                                    WHEN b < 880 THEN 'SavingsPlanNegation' WHEN b < 960 THEN 'DiscountedUsage'
                                    ELSE 'Usage' END) AS t,
             CASE WHEN s.unit LIKE '%Hrs' THEN (CASE WHEN b % 10 = 0 THEN 0.5 ELSE 1.0 END)
                  ELSE round(0.001 + (b * 37 % 997) / 13.0, 10) END AS amount
      FROM pick p JOIN sku s ON s.k = (p.res * 37 + CAST((p.a // {RESOURCES}) % 3 AS INTEGER)) % {SKUS}
    ), money AS (
      SELECT *, round(rate * amount, 10) AS od,
             TIMESTAMP '2025-01-01' + to_hours(hour) AS h_start,
             t IN ('Tax', 'Credit', 'EdpDiscount', 'Refund', 'RIFee', 'SavingsPlanRecurringFee') AS monthly
      FROM typed
    )
    """ + EXPORT_SQL


def fleet_sql(first: int, last: int, nodes: int, first_id: int) -> str:
    """SELECT of fleet lines ``first`` .. ``last - 1``: line k is instance k % nodes in hour
    k // nodes, numbered ``first_id + k``; the same columns as :func:`lines_sql`."""
    (itype, rate), (region, prefix, location) = FLEET_TYPE, FLEET_REGION
    return f"""
    WITH base AS (
      SELECT i, CAST(i // {nodes} AS INTEGER) AS hour, CAST(i % {nodes} AS INTEGER) AS node
      FROM range({first}, {last}) r(i)
    ), money AS (
      SELECT i + {first_id} AS i, {RESOURCES} + node AS res, 500 AS b,
             CASE WHEN node % 4 = 0 THEN 'SavingsPlanCoveredUsage' ELSE 'Usage' END AS t,
             1.0 AS amount, {rate} AS rate, {rate} AS od,
             TIMESTAMP '2025-01-01' + to_hours(hour) AS h_start, false AS monthly,
             'AmazonEC2' AS product_code, 'Amazon Elastic Compute Cloud' AS product_name,
             'Hrs' AS unit, '{itype}' AS instance_type, '{prefix}-BoxUsage:{itype}' AS usage_type,
             'RunInstances' AS operation, '{region}' AS region, '{prefix}' AS prefix,
             '{location}' AS location, true AS ec2_instance, 'SKU999999FLEET' AS sku_id,
             '${rate} per On Demand Linux {itype} Instance Hour' AS description
      FROM base
    )
    """ + EXPORT_SQL


EXPORT_SQL = """    , export AS (SELECT
      printf('bench%012d', i) AS identity_line_item_id,
      '2025-01-01T00:00:00Z/2025-02-01T00:00:00Z' AS identity_time_interval,
      'Anniversary' AS bill_bill_type, 'AWS' AS bill_billing_entity,
      TIMESTAMP '2025-01-01' AS bill_billing_period_start_date,
      TIMESTAMP '2025-02-01' AS bill_billing_period_end_date,
      '2718281828' AS bill_invoice_id, 'Amazon Web Services, Inc.' AS bill_invoicing_entity,
      '999999999999' AS bill_payer_account_id, 'Example Corp' AS bill_payer_account_name,
      printf('%012d', 111111111111 + (res % 20)) AS line_item_usage_account_id,
      'account-' || (res % 20) AS line_item_usage_account_name,
      t AS line_item_line_item_type,
      CASE WHEN monthly THEN TIMESTAMP '2025-01-01' ELSE h_start END AS line_item_usage_start_date,
      CASE WHEN monthly THEN TIMESTAMP '2025-02-01' ELSE h_start + INTERVAL 1 HOUR END AS line_item_usage_end_date,
      CASE WHEN t = 'SavingsPlanRecurringFee' THEN 'ComputeSavingsPlans' ELSE product_code END
        AS line_item_product_code,
      CASE t WHEN 'SavingsPlanRecurringFee' THEN 'ComputeSP:1yrNoUpfront'
             WHEN 'RIFee' THEN prefix || '-HeavyUsage:' || coalesce(instance_type, 'm5.large')
             WHEN 'Tax' THEN 'Tax' ELSE usage_type END AS line_item_usage_type,
      operation AS line_item_operation,
      region || chr(97 + CAST(res % 3 AS INTEGER)) AS line_item_availability_zone,
      CASE WHEN t IN ('Tax', 'Credit', 'EdpDiscount', 'Refund', 'SavingsPlanRecurringFee') THEN NULL
           WHEN product_code = 'AmazonEC2' AND unit = 'Hrs'
             THEN printf('arn:aws:ec2:%s:%012d:instance/i-%017x', region, 111111111111 + (res % 20), res)
           ELSE printf('res-%s-%05d', lower(product_code), res) END AS line_item_resource_id,
      CASE WHEN t IN ('Tax', 'Credit', 'EdpDiscount', 'Refund', 'RIFee', 'SavingsPlanRecurringFee') THEN NULL
           ELSE amount END AS line_item_usage_amount,
      CASE WHEN t = 'Tax' THEN NULL ELSE 1.0 END AS line_item_normalization_factor,
      'USD' AS line_item_currency_code,
      CAST(rate AS VARCHAR) AS line_item_unblended_rate,
      CASE t WHEN 'Usage' THEN od WHEN 'SavingsPlanCoveredUsage' THEN od WHEN 'SavingsPlanNegation' THEN -od
             WHEN 'DiscountedUsage' THEN 0.0 WHEN 'Tax' THEN round(b * 0.731 + 12.5, 10)
             WHEN 'Credit' THEN -round(b * 0.213 + 1.25, 10) WHEN 'EdpDiscount' THEN -round(od * 0.03, 10)
             WHEN 'Refund' THEN -round(b * 0.05 + 0.5, 10) WHEN 'RIFee' THEN round(731.5 + b, 10)
             WHEN 'SavingsPlanRecurringFee' THEN 1.25 END AS line_item_unblended_cost,
      CASE t WHEN 'DiscountedUsage' THEN 0.0 ELSE round(od * 0.98, 10) END AS line_item_blended_cost,
      CASE t WHEN 'SavingsPlanNegation' THEN -od ELSE od END AS line_item_net_unblended_cost,
      CASE WHEN monthly THEN NULL ELSE description END AS line_item_line_item_description,
      CASE WHEN t = 'Tax' THEN 'VAT' END AS line_item_tax_type,
      'Amazon Web Services, Inc.' AS line_item_legal_entity,
      CASE WHEN t IN ('Usage', 'SavingsPlanCoveredUsage', 'DiscountedUsage') THEN od END
        AS pricing_public_on_demand_cost,
      CAST(rate AS VARCHAR) AS pricing_public_on_demand_rate,
      CASE WHEN t = 'DiscountedUsage' THEN 'Reserved' WHEN b >= 990 THEN 'Spot' ELSE 'OnDemand' END AS pricing_term,
      unit AS pricing_unit,
      'USD' AS pricing_currency,
      instance_type AS product_instance_type,
      CASE WHEN ec2_instance THEN split_part(instance_type, '.', 1) END AS product_instance_family,
      sku_id AS product_sku, region AS product_region_code, location AS product_location,
      MAP {'product_name': product_name, 'servicecode': product_code, 'region': region,
            'product_family': CASE WHEN unit = 'Hrs' THEN 'Compute Instance' ELSE 'Storage' END,
            'operating_system': 'Linux'} AS product,
      CASE WHEN res % 7 = 0 THEN MAP {}::MAP(VARCHAR, VARCHAR)
           ELSE MAP {'user_team': 'team-' || (res % 23), 'user_environment':
                      CASE WHEN res % 3 = 0 THEN 'prod' ELSE 'dev' END,
                      'user_application': 'app-' || (res % 61)} END AS resource_tags,
      CASE WHEN t IN ('DiscountedUsage', 'RIFee')
           THEN printf('arn:aws:ec2:%s:999999999999:reserved-instances/ri-%04d', region, res % 40) END
        AS reservation_reservation_a_r_n,
      CASE WHEN t = 'DiscountedUsage' THEN round(od * 0.6, 10) ELSE 0.0 END AS reservation_effective_cost,
      CASE WHEN t = 'RIFee' THEN round(b * 0.11, 10) ELSE 0.0 END
        AS reservation_unused_amortized_upfront_fee_for_billing_period,
      CASE WHEN t = 'RIFee' THEN round(b * 0.07, 10) ELSE 0.0 END AS reservation_unused_recurring_fee,
      CASE WHEN t LIKE 'SavingsPlan%' THEN printf('arn:aws:savingsplans::999999999999:savingsplan/sp-%04d', res % 5) END
        AS savings_plan_savings_plan_a_r_n,
      CASE WHEN t = 'SavingsPlanCoveredUsage' THEN round(od * 0.72, 10) ELSE 0.0 END
        AS savings_plan_savings_plan_effective_cost,
      CASE WHEN t = 'SavingsPlanCoveredUsage' THEN round(rate * 0.72, 10) END AS savings_plan_savings_plan_rate,
      CASE WHEN t = 'SavingsPlanRecurringFee' THEN 1.25 END AS savings_plan_total_commitment_to_date,
      CASE WHEN t = 'SavingsPlanRecurringFee' THEN CASE WHEN b < 800 THEN 1.25 ELSE round(1.25 * b / 1000, 10) END END
        AS savings_plan_used_commitment
    FROM money)
    SELECT * REPLACE (""" + ", ".join(f"CAST({c} AS DOUBLE) AS {c}" for c in DOUBLES) + """) FROM export
    """


def generate(folder: Path, rows: int, rows_per_file: int = ROWS_PER_FILE, threads: int | None = None,
             fleet: int = 0, hours: int = HOURS) -> Path:
    """Write an export of ``rows`` rows under ``folder``; return the export's own folder.

    ``fleet`` > 0: the last ``fleet * hours`` rows are the fleet's instance-hours
    (:func:`fleet_sql`) and the others bill no accelerated instance type."""
    fleet_rows = fleet * hours
    if fleet_rows > rows:
        raise ValueError(f"{rows} rows cannot hold {fleet} instances x {hours} hours")
    root = Path(folder) / EXPORT
    data = root / "data" / PERIOD
    meta = root / "metadata" / PERIOD
    data.mkdir(parents=True, exist_ok=True)
    meta.mkdir(parents=True, exist_ok=True)
    names = []
    other = rows - fleet_rows
    queries = [lines_sql(first, min(other, first + rows_per_file), other, hours)
               for first in range(0, other, rows_per_file)]
    queries += [fleet_sql(first, min(fleet_rows, first + rows_per_file), fleet, other)
                for first in range(0, fleet_rows, rows_per_file)]
    with duckdb.connect(":memory:") as con:
        con.execute("SET preserve_insertion_order = true")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        create_skus(con, INSTANCE_TYPES[GPU_TYPES:] if fleet else INSTANCE_TYPES)
        for part, query in enumerate(queries):
            name = f"part-{part:05d}-bench.snappy.parquet"
            target = data / name
            con.execute(f"COPY ({query}) TO '{target}' "
                        "(FORMAT parquet, COMPRESSION snappy, ROW_GROUP_SIZE 122880)")
            names.append(name)
    manifest = {"executionId": "bench", "billingPeriod": {"start": "2025-01-01T00:00:00Z"},
                "dataFiles": [f"s3://bench-bucket/exports/{EXPORT}/data/{PERIOD}/{n}" for n in names]}
    (meta / f"{EXPORT}-Manifest.json").write_text(json.dumps(manifest, indent=2))
    return root


def main() -> None:
    """``generate.py FOLDER ROWS [--fleet N] [--hours H]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("rows", type=int)
    parser.add_argument("--fleet", type=int, default=0, help="p5.48xlarge instances billed every hour")
    parser.add_argument("--hours", type=int, default=HOURS, help="hours of the month the lines cover")
    args = parser.parse_args()
    print(generate(args.folder, args.rows, fleet=args.fleet, hours=args.hours))


if __name__ == "__main__":
    main()
