"""Builders of test inputs: in-memory tables and cases (so engine tests need no files), cloudgen
cases and copies with their billing rows rewritten, synthetic CUR exports, synthetic Kineto traces,
a query_range dump of an OpenMetrics file, and a collector bundle around a trace."""
from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from datetime import datetime, timezone
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import duckdb
import pandas as pd

from audit.case import Case, Service
from benchmarks.cloudgen.generate import generate
from connectors.base import ReadContext, SourceFrame, SourceSpec
from connectors.billing.cur import CurConnector

UTC = timezone.utc
ALWAYS = (datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC))


def line(row: int, **over) -> dict:
    """One BillingLine row with sensible defaults."""
    base = {
        "line_id": f"inline.csv:{row}", "row": row, "provider": "AWS", "billing_account_id": "999",
        "sub_account_id": "111", "service_name": "Amazon Elastic Compute Cloud", "service_category": "Compute",
        "charge_category": "Usage", "charge_class": "", "charge_description": "", "charge_frequency": "Usage-Based",
        "start": pd.Timestamp("2026-09-01T00:00:00Z"), "end": pd.Timestamp("2026-09-01T01:00:00Z"),
        "billed_cost": Decimal("1"), "effective_cost": Decimal("1"), "list_cost": None, "contracted_cost": None,
        "list_unit_price": None, "contracted_unit_price": None, "pricing_quantity": None,
        "consumed_quantity": None, "pricing_unit": "", "consumed_unit": "", "pricing_category": "Standard",
        "commitment_discount_id": "", "commitment_discount_status": "", "commitment_discount_type": "",
        "resource_id": "", "resource_name": "", "resource_type": "", "region": "us-east-1", "sku_id": "",
        "sku_price_id": "", "currency": "USD", "tags": "{}", "extra": "{}",
    }
    base.update(over)
    return base


def lines_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for col in ("start", "end"):
        frame[col] = pd.to_datetime(frame[col], utc=True).astype("datetime64[ns, UTC]")
    return frame


def frame(kind: str, fmt: str, tables: dict, name: str | None = None, **options) -> SourceFrame:
    spec = SourceSpec(name or f"{kind}-inline", kind, fmt, Path(f"/nonexistent/{kind}"), options)
    return SourceFrame(spec, tables, sum(len(t) for t in tables.values()), (None, None), "0" * 64)


def activity(rows: list[dict]) -> pd.DataFrame:
    defaults = {"gpu": "0", "uuid": "", "model_name": "H100", "pod": "", "namespace": "", "container": "",
                "step_seconds": 3600, "source": "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
    out = pd.DataFrame([{**defaults, **r} for r in rows])
    out["ts"] = pd.to_datetime(out["ts"], utc=True).astype("datetime64[ns, UTC]")
    return out


def window(start="2026-09-01", end="2026-10-01"):
    return (datetime.fromisoformat(start).replace(tzinfo=UTC), datetime.fromisoformat(end).replace(tzinfo=UTC))


def make_case(accounts=("111",), basis="effective") -> Case:
    """A one-day case (2026-09-01) with one service, ``chat`` (namespace llm), and no sources."""
    start, end = window("2026-09-01", "2026-09-02")
    return Case(path=Path("/nonexistent/case.toml"), name="prop", start=start, end=end,
                currency="USD", cost_basis=basis, tolerance=Decimal("0.02"), step_seconds=3600,
                target_utilisation=Decimal("0.8"), loaded_rate=Decimal("100"), sources=(),
                services={"chat": Service("chat", {"namespace": "llm"}, 1, 1, 3600)},
                scope={"accounts": list(accounts), "services": [], "tags": {}}, rules=(), nodes={},
                option_overrides={})


def billing_case(folder: Path, name: str, window: tuple[str, str], basis: str, **source) -> Path:
    """A case folder whose case.toml names one billing source (``source``: format, path or uri, …)."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = "\n".join(f"{key} = {_toml(value)}" for key, value in {"name": name, **source}.items())
    (folder / "case.toml").write_text(
        f'[case]\nname = "{name}"\nwindow = ["{window[0]}", "{window[1]}"]\ncurrency = "USD"\n'
        f'cost_basis = "{basis}"\nloaded_rate = 120\n\n[[billing]]\n{entries}\n')
    return folder


def _toml(value) -> str:
    """A TOML string literal (paths and URLs, as JSON escapes them)."""
    return json.dumps(str(value))


# --- cloudgen cases, and copies with billing rows rewritten ----------------------------------------

def generated(tmp_path_factory, label: str, cloud: str, seed: int, **options) -> Path:
    """cloudgen's case of ``cloud`` and ``seed`` (``options``: billing, commitments, …), written once
    into a fresh folder ``label``/case of the session's temporary tree."""
    folder = tmp_path_factory.mktemp(label) / "case"
    generate(cloud, seed, folder, **options)
    return folder


def generated_over(tmp_path_factory, label: str, cloud: str, seed: int, fixture: Path) -> Path:
    """cloudgen's FOCUS case of ``cloud`` and ``seed`` with a fixture folder's edited files over it
    (its ``focus_azure.csv`` as the billing, its ``metrics.om.gz`` as the telemetry)."""
    folder = generated(tmp_path_factory, label, cloud, seed, billing="focus")
    shutil.copyfile(fixture / "focus_azure.csv", folder / "billing" / "focus_azure.csv")
    shutil.copyfile(fixture / "metrics.om.gz", folder / "telemetry" / "metrics.om.gz")
    return folder


def rewritten_billing(folder: Path, target: Path, change) -> Path:
    """A copy of the case at ``target`` whose billing CSV files' rows (gzipped or not) are
    ``change(rows)``; the header is every column the rows carry, in their order (new columns allowed)."""
    shutil.copytree(folder, target)
    for path in (target / "billing").rglob("*.csv*"):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8", newline="") as handle:
            rows = change(list(csv.DictReader(handle)))
        out = io.StringIO()
        writer = csv.DictWriter(out, list(dict.fromkeys(k for r in rows for k in r)), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        with opener(path, "wt", encoding="utf-8", newline="") as handle:
            handle.write(out.getvalue())
    return target


# --- CUR: reading, synthetic CUR 2.0 and legacy exports ---------------------------------------

def read_cur(path: Path, start=ALWAYS[0], end=ALWAYS[1], currency="USD"):
    """Read ``path`` with the CUR connector through the base read() (validation included)."""
    spec = SourceSpec(name="cur", kind="billing", format="cur", path=Path(path))
    return CurConnector(spec, ReadContext(start=start, end=end, currency=currency)).read()


@lru_cache(maxsize=None)
def read_cur_once(path: Path, start: datetime, end: datetime):
    """A real CUR file read once per test session (the frames are only inspected)."""
    return read_cur(path, start=start, end=end)


CUR2_COLUMNS = {
    "bill_payer_account_id": "VARCHAR", "line_item_usage_account_id": "VARCHAR",
    "line_item_line_item_type": "VARCHAR", "line_item_usage_start_date": "TIMESTAMP",
    "line_item_usage_end_date": "TIMESTAMP", "line_item_product_code": "VARCHAR",
    "line_item_usage_type": "VARCHAR", "line_item_operation": "VARCHAR", "line_item_resource_id": "VARCHAR",
    "line_item_usage_amount": "DOUBLE", "line_item_currency_code": "VARCHAR",
    "line_item_unblended_rate": "VARCHAR", "line_item_unblended_cost": "DOUBLE",
    "line_item_line_item_description": "VARCHAR", "pricing_unit": "VARCHAR", "pricing_term": "VARCHAR",
    "pricing_public_on_demand_rate": "VARCHAR", "pricing_public_on_demand_cost": "DOUBLE",
    "product": "MAP(VARCHAR, VARCHAR)", "product_sku": "VARCHAR", "resource_tags": "MAP(VARCHAR, VARCHAR)",
    "cost_category": "MAP(VARCHAR, VARCHAR)", "discount": "MAP(VARCHAR, DOUBLE)",
    "reservation_reservation_arn": "VARCHAR", "reservation_effective_cost": "DOUBLE",
    "reservation_unused_amortized_upfront_fee_for_billing_period": "DOUBLE",
    "reservation_unused_recurring_fee": "DOUBLE", "savings_plan_savings_plan_arn": "VARCHAR",
    "savings_plan_savings_plan_effective_cost": "DOUBLE", "savings_plan_savings_plan_rate": "DOUBLE",
    "savings_plan_total_commitment_to_date": "DOUBLE", "savings_plan_used_commitment": "DOUBLE",
    "split_line_item_parent_resource_id": "VARCHAR", "split_line_item_split_cost": "DOUBLE",
    "split_line_item_unused_cost": "DOUBLE",
}
SP = "arn:aws:savingsplans::999999999999:savingsplan/5f1c-demo"
RI = "arn:aws:ec2:us-east-1:999999999999:reserved-instances/9a7e-demo"
EC2 = {"product_name": "Amazon Elastic Compute Cloud", "region": "us-east-1"}
TEAM = {"user_team": "ml", "user_service": "chat", "aws_eks_cluster_name": "inference-prod"}


def instance_hour(hour: int, kind: str, itype: str, cost: str, resource: str | None, **over) -> dict:
    """One hourly EC2 line of a CUR 2.0 export (2026-09-01, hour ``hour``)."""
    start = datetime(2026, 9, 1, hour)
    row = {"bill_payer_account_id": "999999999999", "line_item_usage_account_id": "111111111111",
           "line_item_line_item_type": kind, "line_item_usage_start_date": start,
           "line_item_usage_end_date": start.replace(hour=hour + 1), "line_item_product_code": "AmazonEC2",
           "line_item_usage_type": f"USE1-BoxUsage:{itype}", "line_item_operation": "RunInstances",
           "line_item_resource_id": resource, "line_item_usage_amount": 1.0,
           "line_item_currency_code": "USD", "line_item_unblended_rate": cost,
           "line_item_unblended_cost": float(cost),
           "line_item_line_item_description": f"${cost} per On Demand Linux {itype} Instance Hour",
           "pricing_unit": "Hrs", "pricing_term": "OnDemand", "pricing_public_on_demand_rate": cost,
           "pricing_public_on_demand_cost": float(cost), "product": {**EC2, "instance_type": itype},
           "resource_tags": TEAM, "discount": {}}
    row.update(over)
    return row


def cur2_rows() -> list[dict]:
    """Four hours of a GPU inference account: a Savings Plan on one p5, a p5 on demand, a g6e under a
    reservation and one on demand, EKS split rows, the plan's fee, and the month's tax, credit, discount."""
    rows = []
    for h in range(4):
        rows.append(instance_hour(h, "SavingsPlanCoveredUsage", "p5.48xlarge", "55.04", "i-0p5a",
                                  savings_plan_savings_plan_arn=SP, savings_plan_savings_plan_rate=38.53,
                                  savings_plan_savings_plan_effective_cost=38.53))
        rows.append(instance_hour(h, "SavingsPlanNegation", "p5.48xlarge", "-55.04", None,
                                  savings_plan_savings_plan_arn=SP, pricing_public_on_demand_cost=None,
                                  line_item_line_item_description="SavingsPlanNegation used by AccountId : 111111111111"))
        rows.append(instance_hour(h, "Usage", "p5.48xlarge", "55.04", "i-0p5b"))
        rows.append(instance_hour(h, "Usage", "g6e.12xlarge", "10.49264", "i-0g6ea"))
        rows.append(instance_hour(h, "DiscountedUsage", "g6e.12xlarge", "0", "i-0g6eb",
                                  reservation_reservation_arn=RI, reservation_effective_cost=7.1,
                                  pricing_public_on_demand_rate="10.49264", pricing_public_on_demand_cost=10.49264))
        for pod in ("chat-0", "chat-1"):
            rows.append(instance_hour(h, "Usage", "p5.48xlarge", "0", f"arn:aws:eks:us-east-1:111111111111:pod/inference-prod/llm/{pod}/u{h}",
                                      line_item_operation="EKSPod-EC2", line_item_usage_type="USE1-EKS-EC2-GPU-Hours",
                                      split_line_item_parent_resource_id="i-0p5a", split_line_item_split_cost=19.265,
                                      split_line_item_unused_cost=0.0))
        rows.append(instance_hour(h, "SavingsPlanRecurringFee", "", "40.0", SP, line_item_product_code="ComputeSavingsPlans",
                                  line_item_usage_type="ComputeSP:3yrNoUpfront", line_item_operation=None,
                                  product={"product_name": "Savings Plans for AWS Compute usage"},
                                  savings_plan_savings_plan_arn=SP, savings_plan_total_commitment_to_date=40.0,
                                  savings_plan_used_commitment=38.53))
    month = {"line_item_usage_start_date": datetime(2026, 9, 1), "line_item_usage_end_date": datetime(2026, 10, 1)}
    rows.append(instance_hour(0, "RIFee", "g6e.12xlarge", "28.4", None, reservation_reservation_arn=RI,
                              reservation_unused_amortized_upfront_fee_for_billing_period=0.0,
                              reservation_unused_recurring_fee=3.55, **month))
    rows.append(instance_hour(0, "Fee", "g6e.12xlarge", "100", None, reservation_reservation_arn=RI,
                              line_item_line_item_description="Sign up charge for subscription: 9a7e",
                              **month))  # the reservation's partial upfront payment: a purchase
    for kind, cost in (("Tax", "12.34"), ("Credit", "-5"), ("EdpDiscount", "-2.5")):
        rows.append(instance_hour(0, kind, "", cost, None, product={"product_name": "Amazon Elastic Compute Cloud"},
                                  line_item_usage_type="", **month))
    return rows


def write_cur2(path: Path, rows: list[dict]) -> Path:
    """A CUR 2.0 Parquet file (MAP columns for product, tags, cost categories, discounts)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("CREATE TABLE t (" + ", ".join(f"{c} {t}" for c, t in CUR2_COLUMNS.items()) + ")")
    cast = ", ".join(f"CAST(CAST(? AS JSON) AS {t})" if t.startswith("MAP") else "?"
                     for t in CUR2_COLUMNS.values())
    for row in rows:
        values = [json.dumps(row.get(c) or {}) if t.startswith("MAP") else row.get(c)
                  for c, t in CUR2_COLUMNS.items()]
        con.execute(f"INSERT INTO t VALUES ({cast})", values)
    con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    return path


LEGACY_HEADER = ["identity/LineItemId", "bill/PayerAccountId", "lineItem/UsageAccountId",
                 "lineItem/LineItemType", "lineItem/UsageStartDate", "lineItem/UsageEndDate",
                 "lineItem/ProductCode", "lineItem/UsageType", "lineItem/Operation", "lineItem/ResourceId",
                 "lineItem/UsageAmount", "lineItem/CurrencyCode", "lineItem/UnblendedRate",
                 "lineItem/UnblendedCost", "lineItem/LineItemDescription", "product/ProductName",
                 "product/instanceType", "product/region", "pricing/unit", "resourceTags/user:team"]


def legacy_row(n: int, cost: str, hour: int = 0, **over) -> list[str]:
    """One legacy CUR CSV record (slash headers), an hour of g6e.xlarge."""
    row = {"identity/LineItemId": f"id{n}", "bill/PayerAccountId": "999999999999",
           "lineItem/UsageAccountId": "111111111111", "lineItem/LineItemType": "Usage",
           "lineItem/UsageStartDate": f"2026-09-01T{hour:02d}:00:00Z",
           "lineItem/UsageEndDate": f"2026-09-01T{hour + 1:02d}:00:00Z", "lineItem/ProductCode": "AmazonEC2",
           "lineItem/UsageType": "USE1-BoxUsage:g6e.xlarge", "lineItem/Operation": "RunInstances",
           "lineItem/ResourceId": f"i-{n:04d}", "lineItem/UsageAmount": "1.0", "lineItem/CurrencyCode": "USD",
           "lineItem/UnblendedRate": cost, "lineItem/UnblendedCost": cost,
           "lineItem/LineItemDescription": "g6e.xlarge hour", "product/ProductName": "Amazon Elastic Compute Cloud",
           "product/instanceType": "g6e.xlarge", "product/region": "us-east-1", "pricing/unit": "Hrs",
           "resourceTags/user:team": "ml"}
    row.update(over)
    return [row.get(name, "") for name in LEGACY_HEADER]


def write_legacy(path: Path, rows: list[list[str]], header=LEGACY_HEADER) -> Path:
    """A legacy CUR file (.csv or .csv.gz)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_manifest(path: Path, keys: list[str], field: str = "reportKeys") -> Path:
    """A CUR manifest naming ``keys``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"assemblyId": path.parent.name, field: keys}))
    return path


# --- synthetic Kineto traces -------------------------------------------------------------------

T0 = 1_700_000_000_000.0          # epoch-scale base, as in real traces; offsets are binary fractions
GEMM = "ampere_sgemm_128x64_nn"
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")

CURRENT = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset", "runtime": "cuda_runtime"}
SCHEMA_2021 = {"kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset", "runtime": "Runtime"}


def x(cat, name, offset, dur, **args):
    """A complete (ph X) event ``offset`` us after T0."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": args.get("stream", 1),
            "ts": T0 + offset, "dur": dur, "args": {"device": 0, **args}}


def gpu_events(cats, device=0, shift=0.0):
    """Two streams of overlapping kernels, a HtoD and a DtoH memcpy and a memset on one device."""
    events = [
        x(cats["kernel"], GEMM, shift + 0.5, 10.25, stream=7, correlation=1),
        x(cats["kernel"], ADD, shift + 5.25, 10.0, stream=8, correlation=2),
        x(cats["memcpy"], "Memcpy HtoD (Pageable -> Device)", shift + 16.0, 2.5, stream=7),
        x(cats["memset"], "Memset (Device)", shift + 20.125, 1.875, stream=7),
        x(cats["kernel"], GEMM, shift + 30.0, 4.5, stream=7, correlation=3),
        x(cats["memcpy"], "Memcpy DtoH (Device -> Pinned)", shift + 33.0, 3.0, stream=7),
    ]
    for event in events:
        event["args"]["device"] = device
        event["pid"] = device
    return events


def host_events(cats, current=True):
    """CPU-side noise plus synchronisation: one runtime sync call, and (current schema) its
    cuda_sync twin, an uncorrelated context sync and a GPU-side stream wait."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python", "labels": [1, 2]}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": T0, "pid": 1, "tid": 1,
         "s": "t", "args": {"Bytes": 512}},
        {"ph": "X", "cat": "python_function", "name": "model.py(12): forward", "pid": 1, "tid": 1,
         "ts": T0 - 3, "dur": 60, "args": {"Python id": 3, "Python parent id": None, "device": "cpu"}},
        {"ph": "X", "cat": "cpu_op" if current else "Operator", "name": "aten::mm", "pid": 1,
         "tid": 1, "ts": T0, "dur": 50, "args": {"External id": 4, "Input Dims": [[2, 2]]}},
        {"ph": "s", "cat": "ac2g", "id": 1, "pid": 1, "tid": 1, "ts": T0, "name": "flow"},
        x(cats["runtime"], "cudaLaunchKernel", 0.1, 0.3, correlation=1),
        x(cats["runtime"], "cudaStreamSynchronize", 40.0, 2.5, correlation=99),
    ]
    if current:
        events += [x("cuda_sync", "Stream Sync", 40.25, 2.0, correlation=99),
                   x("cuda_sync", "Context Sync", 45.0, 1.25, correlation=100),
                   x("cuda_sync", "Stream Wait Event", 46.0, 0.5, correlation=101)]
    return events


def trace_doc(events, devices=("NVIDIA H100 80GB HBM3",)):
    """A Kineto-style top-level object."""
    return {"schemaVersion": 1, "traceName": "synthetic", "displayTimeUnit": "ms",
            "deviceProperties": [{"id": i, "name": name, "totalGlobalMem": 1} for i, name in enumerate(devices)],
            "traceEvents": events}


def write_trace(tmp_path: Path, doc, name="trace.json") -> Path:
    """Write ``doc`` (dict or bytes) as JSON, gzipped when ``name`` ends in .gz."""
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


# --- telemetry and profiles ---------------------------------------------------------------------

def query_range_dump(om: Path, target: Path) -> Path:
    """The samples of an OpenMetrics file (integer-second timestamps) as one query_range answer."""
    series: dict[str, dict] = {}
    for text in om.read_text().splitlines():
        if not text or text[0] == "#":
            continue
        head, value, stamp = text.rsplit(" ", 2)
        name, _, rest = head.partition("{")
        labels = dict(pair.split("=", 1) for pair in rest.rstrip("}").split(",")) if rest else {}
        metric = {"__name__": name, **{k: v.strip('"') for k, v in labels.items()}}
        key = json.dumps(metric, sort_keys=True)
        series.setdefault(key, {"metric": metric, "values": []})["values"].append([int(stamp), value])
    dump = {"status": "success", "data": {"resultType": "matrix", "result": list(series.values())}}
    target.write_text(json.dumps(dump))
    return target


def profile_bundle(trace: Path, folder: Path, requests: int = 16) -> Path:
    """A `costaudit collect` bundle folder around a Kineto trace: profile.json with a measured window."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(trace, folder / "trace.json.gz")
    window = {"measured": True, "trace": "trace.json.gz", "requests": requests,
              "prompt_tokens": requests * 2048, "generated_tokens": requests}
    (folder / "profile.json").write_text(json.dumps({"window": window}))
    return folder


def on_walk(monkeypatch, walk: str) -> list:
    """Make the audit's GPU split take ``walk`` (an engine: "duckdb", or "bigquery" / "trino" as
    rendered and run back on DuckDB); returns the list each engine run is appended to, to check
    that the walk was taken."""
    from audit import gpusplit, split_sql

    if walk != "duckdb":
        monkeypatch.setitem(split_sql.ENGINES, walk, rendered_on_duckdb(walk))
    monkeypatch.setenv("COSTAUDIT_SPLIT", walk)
    used: list = []
    real = gpusplit.GpuSplitter.add_lines_in_engine
    monkeypatch.setattr(gpusplit.GpuSplitter, "add_lines_in_engine",
                        lambda self, lines, run: used.append(run) or real(self, lines, run))
    return used


def rendered_on_duckdb(dialect: str):
    """An engine for :meth:`audit.gpusplit.GpuSplitter.add_lines_in_engine`: the split query
    rendered for ``dialect`` (audit.split_sql.render), read back by sqlglot as that dialect, written
    as DuckDB and run over the prepared tables: what that engine's text computes, on DuckDB."""
    import sqlglot

    from audit import split_sql

    def run(prepared):
        with duckdb.connect() as con:
            for name, table in prepared.frames.items():
                con.register(name, table)
            out = []
            for query in (split_sql.COVERAGE, split_sql.SUMS):
                text = split_sql.render(query, dialect, limbs=prepared.limbs)
                back = sqlglot.transpile(text, read=dialect, write="duckdb")[0]
                out.append(con.execute(back).fetchall())
        return out[0], out[1]

    return run


P5_HOUR = "$98.32 per On Demand Linux p5.48xlarge Instance Hour"


def gpu_line(n: int, **over) -> dict:
    """One priced gpu_compute line: an hour (2026-09-01 00:00 UTC) of a p5.48xlarge (8 GPUs) unless told otherwise."""
    start = pd.Timestamp("2026-09-01T00:00:00Z")
    row = {"line_id": f"cur.csv:{n}", "resource_id": "i-1", "instance_type": "p5.48xlarge", "start": start,
           "end": start + pd.Timedelta(hours=1), "pricing_quantity": Decimal(1), "consumed_quantity": Decimal(1),
           "gpus_per_instance": 8, "charge_description": P5_HOUR, "net": Decimal("98.32"),
           "pretax": Decimal("98.32"), "priced": Decimal("98.32"), "resource_class": "gpu_compute"}
    row.update(over)
    return row


def misfits_of(misfits, kind: str) -> list:
    """The misfits of ``kind`` among ``misfits`` (a split's, or an audit's fit), in their order."""
    return [m for m in misfits if m.kind == kind]


def assert_same_split(got, want, *, within: Decimal, ordered: bool = True, to_the_cent: bool = False) -> None:
    """Two GpuSplitters hold the same split: the same groups (in the same order where ``ordered``),
    time, GPUs, types, sources, nodes and pods exactly, money within ``within`` (and to the cent of
    each group where ``to_the_cent``), the same coverage in the same order and the same extra GPUs."""
    assert (list(got.groups) if ordered else sorted(got.groups)) == (
        list(want.groups) if ordered else sorted(want.groups))
    for key, group in want.groups.items():
        other = got.groups[key]
        for name in ("gpus", "paid_seconds", "busy_seconds", "types", "type_seconds", "sources", "nodes", "pods"):
            assert getattr(other, name) == getattr(group, name), (key, name)
        pairs = [(name, getattr(other, name), getattr(group, name)) for name in ("paid", "gross", "priced", "busy",
                                                                          "committed", "committed_busy")]
        assert set(other.type_paid) == set(group.type_paid), key
        pairs += [(f"type_paid {kind}", other.type_paid[kind], amount) for kind, amount in group.type_paid.items()]
        for name, a, b in pairs:
            assert abs(a - b) < within, (key, name, a, b)
            assert not to_the_cent or a.quantize(Decimal("0.01")) == b.quantize(Decimal("0.01")), (key, name, a, b)
    assert list(got.coverage) == list(want.coverage)
    for key, cover in want.coverage.items():
        assert vars(got.coverage[key]) == vars(cover), key
    assert got.extra_gpus == want.extra_gpus
