"""A synthetic GCP detailed billing export: May 2024, rows as bq extract writes them.

An a2-highgpu-8g and an a3-highgpu-8g billed in parts (GPU, core, RAM SKUs), a g2-standard-8,
internet egress, Cloud Logging, a GKE cluster fee, tax, an adjustment and a rounding error, credits
of four types plus one of an unknown type, rows with 0, 1 and 2 credits, labels in export order
(unsorted), rows on both sides of the window. Written as NDJSON or Parquet (local exports), or
loaded into the BigQuery emulator with ``bq_schema`` (tests/servers/bigquery.py).
"""
from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

MAY, JUNE = datetime(2024, 5, 1, tzinfo=timezone.utc), datetime(2024, 6, 1, tzinfo=timezone.utc)
ACCOUNT = "0A1B2C-3D4E5F-6A7B8C"


def row(start: datetime, service: str, sku: str, cost: str, *, project="ml-prod", resource=None,
        labels=(), machine=None, credits=(), amount="1", unit="seconds", priced="1",
        pricing_unit="hour", cost_type="regular", hours=1) -> dict:
    """One export row as bq extract writes it (money as text here; floats when serialised)."""
    pacific = (start - timedelta(hours=7)).strftime("%Y%m")
    return {
        "billing_account_id": ACCOUNT,
        "service": {"id": f"id-{service[:8]}", "description": service},
        "sku": {"id": "SKU-" + hashlib.md5(sku.encode()).hexdigest()[:12].upper(), "description": sku},
        "usage_start_time": start.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "usage_end_time": (start + timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "project": {"id": project, "number": "123456789", "name": project},
        "labels": [{"key": k, "value": v} for k, v in labels],
        "system_labels": ([{"key": "compute.googleapis.com/machine_spec", "value": machine},
                           {"key": "compute.googleapis.com/cores", "value": "96"}] if machine else []),
        "location": {"location": "us-central1", "country": "US", "region": "us-central1",
                     "zone": "us-central1-a"},
        "resource": {"name": resource, "global_name": f"//compute.googleapis.com/{resource}"}
        if resource else None,
        "cost": cost, "currency": "USD", "currency_conversion_rate": "1",
        "usage": {"amount": amount, "unit": unit, "amount_in_pricing_units": priced,
                  "pricing_unit": pricing_unit},
        "credits": [{"name": n, "amount": a, "full_name": n, "id": f"id-{n}", "type": t}
                    for n, a, t in credits],
        "invoice": {"month": pacific}, "cost_type": cost_type,
    }


def export_rows() -> list[dict]:
    """About 900 rows of a realistic May 2024 detailed export (plus rows outside the window)."""
    rows = []
    node = [("team", "ml"), ("goog-k8s-cluster-name", "inference")]
    for h in range(240):  # a2-highgpu-8g, 10 days: 8 A100 GPU-hours, 96 vCPU-hours, 680 GiB-hours
        t = MAY + timedelta(hours=h)
        cud = (("Committed use discount", "-0.950000", "COMMITTED_USAGE_DISCOUNT"),)
        two = cud + (("Free trial", "-0.125000", "PROMOTION"),) if h % 5 == 0 else cud
        rows.append(row(t, "Compute Engine", "Nvidia Tesla A100 GPU running in Americas",
                        "23.471264", resource="gke-inference-a2-pool-7f3a", labels=node,
                        machine="a2-highgpu-8g", credits=two, amount="28800", priced="8"))
        rows.append(row(t, "Compute Engine", "A2 Instance Core running in Americas", "3.034656",
                        resource="gke-inference-a2-pool-7f3a", labels=node, machine="a2-highgpu-8g",
                        credits=cud if h % 2 else (), amount="345600", priced="96"))
        rows.append(row(t, "Compute Engine", "A2 Instance Ram running in Americas", "2.881160",
                        resource="gke-inference-a2-pool-7f3a", labels=node, machine="a2-highgpu-8g",
                        amount="2.57e+15", unit="byte-seconds", priced="680",
                        pricing_unit="gibibyte hour"))
    for h in range(48):  # a3-highgpu-8g, 2 days
        t = MAY + timedelta(days=20, hours=h)
        for sku, cost, priced in (("Nvidia H100 80GB GPU running in Americas", "88.490000", "8"),
                                  ("A3 Instance Core running in Americas", "3.950000", "208"),
                                  ("A3 Instance Ram running in Americas", "5.250000", "1872")):
            rows.append(row(t, "Compute Engine", sku, cost, resource="gke-inference-a3-pool-91c2",
                            labels=node[::-1], machine="a3-highgpu-8g", priced=priced))
    for h in range(0, 720, 3):  # g2-standard-8, every third hour (3-hour rows), SUD
        t = MAY + timedelta(hours=h)
        sud = (("Sustained usage discount", "-0.084012", "SUSTAINED_USAGE_DISCOUNT"),)
        for sku, cost in (("Nvidia L4 GPU running in Americas", "1.680120"),
                          ("G2 Instance Core running in Americas", "0.599712"),
                          ("G2 Instance Ram running in Americas", "0.280992")):
            rows.append(row(t, "Compute Engine", sku, cost, resource="search-g2-node-01",
                            labels=[("team", "search")], machine="g2-standard-8", hours=3,
                            credits=sud if sku.startswith("Nvidia") else (), priced="3"))
    for d in range(31):  # daily: egress (two rows a day, no credit), logging, GKE fee (free tier)
        t = MAY + timedelta(days=d)
        for part in ("1", "2"):
            rows.append(row(t, "Networking", "Network Internet Egress from Americas to Americas",
                            f"{12 + d % 5}.34560{part}", amount="1.5e+11", unit="bytes",
                            priced="137.5", pricing_unit="gibibyte", hours=24))
        rows.append(row(t, "Cloud Logging", "Log Volume", "4.250000", pricing_unit="gibibyte",
                        credits=(("Free tier", "-1.666666", "FREE_TIER"),), hours=24))
        rows.append(row(t, "Kubernetes Engine", "Regional Kubernetes Clusters", "2.400000",
                        resource="inference", labels=[("goog-k8s-cluster-name", "inference")],
                        credits=(("GKE free tier", "-2.400000", "FREE_TIER"),
                                 ("Partner margin", "-0.010000", "SOME_NEW_TYPE")), hours=24))
    rows.append(row(MAY + timedelta(hours=7), "Invoice", "Tax", "1234.560000", cost_type="tax",
                    amount="0", priced="0", pricing_unit="", hours=744))
    rows.append(row(MAY + timedelta(days=3), "Compute Engine",
                    "Nvidia Tesla A100 GPU running in Americas", "-15.000000", cost_type="adjustment",
                    resource="gke-inference-a2-pool-7f3a", labels=node, machine="a2-highgpu-8g",
                    amount="0", priced="0"))
    rows.append(row(MAY + timedelta(days=30), "Invoice", "Rounding error", "-0.004000",
                    cost_type="rounding_error", amount="0", priced="0", pricing_unit=""))
    rows.append(row(MAY - timedelta(hours=1), "Compute Engine", "A2 Instance Core running in Americas",
                    "999.000000", resource="gke-inference-a2-pool-7f3a"))  # before the window
    rows.append(row(JUNE, "Compute Engine", "A2 Instance Core running in Americas", "777.000000",
                    resource="gke-inference-a2-pool-7f3a"))  # after it
    return rows


def in_window(rows: list[dict]) -> list[dict]:
    """Rows whose usage starts in May 2024 (UTC)."""
    return [r for r in rows if "2024-05-" in r["usage_start_time"]]


def as_float_json(record: dict) -> dict:
    """The row as BigQuery stores it: cost, amounts and credits FLOAT64."""
    out = json.loads(json.dumps(record))
    out["cost"] = float(out["cost"])
    out["currency_conversion_rate"] = 1.0
    for key in ("amount", "amount_in_pricing_units"):
        out["usage"][key] = float(out["usage"][key])
    for credit in out["credits"]:
        credit["amount"] = float(credit["amount"])
    return out


def write_ndjson(rows: list[dict], path: Path) -> Path:
    """The rows as newline-delimited JSON, numbers as JSON numbers (as bq extract writes FLOAT64)."""
    path.write_text("".join(json.dumps(as_float_json(r)) + "\n" for r in rows))
    return path


def write_parquet(rows: list[dict], path: Path, *, detailed: bool = True) -> Path:
    """The rows as Parquet with the export's nested types (no ``resource`` when not detailed)."""
    kv = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
    records = [as_float_json(r) for r in rows]
    for record in records:
        for key in ("usage_start_time", "usage_end_time"):
            record[key] = datetime.strptime(record[key], "%Y-%m-%d %H:%M:%S UTC").replace(
                tzinfo=timezone.utc)
        if not detailed:
            record.pop("resource")
    fields = [("billing_account_id", pa.string()),
              ("service", pa.struct([("id", pa.string()), ("description", pa.string())])),
              ("sku", pa.struct([("id", pa.string()), ("description", pa.string())])),
              ("usage_start_time", pa.timestamp("us", tz="UTC")),
              ("usage_end_time", pa.timestamp("us", tz="UTC")),
              ("project", pa.struct([("id", pa.string()), ("number", pa.string()), ("name", pa.string())])),
              ("labels", kv), ("system_labels", kv),
              ("location", pa.struct([(k, pa.string()) for k in ("location", "country", "region", "zone")])),
              ("resource", pa.struct([("name", pa.string()), ("global_name", pa.string())])),
              ("cost", pa.float64()), ("currency", pa.string()), ("currency_conversion_rate", pa.float64()),
              ("usage", pa.struct([("amount", pa.float64()), ("unit", pa.string()),
                                   ("amount_in_pricing_units", pa.float64()),
                                   ("pricing_unit", pa.string())])),
              ("credits", pa.list_(pa.struct([("name", pa.string()), ("amount", pa.float64()),
                                              ("full_name", pa.string()), ("id", pa.string()),
                                              ("type", pa.string())]))),
              ("invoice", pa.struct([("month", pa.string())])), ("cost_type", pa.string())]
    schema = pa.schema([f for f in fields if detailed or f[0] != "resource"])
    pq.write_table(pa.Table.from_pylist(records, schema=schema), path)
    return path


def bq_schema(*, detailed: bool = True, numeric: bool = False, full: bool = False):
    """The export's BigQuery schema (FLOAT64 money as exported, or NUMERIC); ``full`` adds the
    columns the connector does not read (project labels and ancestry, tags, price, cost_at_list,
    transaction_type, seller_name, export_time, adjustment_info), as the real table has them."""
    from google.cloud.bigquery import SchemaField as F

    money = "NUMERIC" if numeric else "FLOAT"
    kv = [F("key", "STRING"), F("value", "STRING")]
    fields = [F("billing_account_id", "STRING"),
              F("service", "RECORD", fields=[F("id", "STRING"), F("description", "STRING")]),
              F("sku", "RECORD", fields=[F("id", "STRING"), F("description", "STRING")]),
              F("usage_start_time", "TIMESTAMP"), F("usage_end_time", "TIMESTAMP"),
              F("project", "RECORD", fields=[F("id", "STRING"), F("number", "STRING"), F("name", "STRING")]),
              F("labels", "RECORD", mode="REPEATED", fields=kv),
              F("system_labels", "RECORD", mode="REPEATED", fields=kv),
              F("location", "RECORD",
                fields=[F(k, "STRING") for k in ("location", "country", "region", "zone")]),
              F("resource", "RECORD", fields=[F("name", "STRING"), F("global_name", "STRING")]),
              F("cost", money), F("currency", "STRING"), F("currency_conversion_rate", "FLOAT"),
              F("usage", "RECORD", fields=[F("amount", money), F("unit", "STRING"),
                                           F("amount_in_pricing_units", money), F("pricing_unit", "STRING")]),
              F("credits", "RECORD", mode="REPEATED",
                fields=[F("name", "STRING"), F("amount", money), F("full_name", "STRING"),
                        F("id", "STRING"), F("type", "STRING")]),
              F("invoice", "RECORD", fields=[F("month", "STRING")]), F("cost_type", "STRING")]
    if full:
        fields[5] = F("project", "RECORD", fields=[F("id", "STRING"), F("number", "STRING"), F("name", "STRING"),
                                                   F("labels", "RECORD", mode="REPEATED", fields=kv),
                                                   F("ancestry_numbers", "STRING")])
        fields += [F("tags", "RECORD", mode="REPEATED", fields=[*kv, F("inherited", "BOOLEAN"),
                                                                 F("namespace", "STRING")]),
                   F("export_time", "TIMESTAMP"), F("cost_at_list", money), F("transaction_type", "STRING"),
                   F("seller_name", "STRING"),
                   F("adjustment_info", "RECORD", fields=[F(k, "STRING") for k in ("id", "description", "mode",
                                                                                      "type")]),
                   F("price", "RECORD", fields=[F("effective_price", money), F("tier_start_amount", money),
                                                F("unit", "STRING"), F("pricing_unit_quantity", money)])]
    return [f for f in fields if detailed or f.name != "resource"]
