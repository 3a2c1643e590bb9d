"""GcpBillingConnector and billing_sql: BigQuery (a local emulator) against DuckDB on the same rows.

The BigQuery tests run the connector's own code path, google-cloud-bigquery client included,
against bqemulator (PyPI) on 127.0.0.1, in its own virtual environment ``.venv-bq`` (it needs
duckdb 1.5.5 and its spatial extension from the duckdb-extension-spatial package; the fixture
builds the environment when it is missing). A ``FaultProxy`` between client and emulator records
requests and injects what the emulator lacks or cannot be asked for: 5xx faults, access denied,
a dry-run byte estimate (bqemulator always reports 0 bytes) and BigQuery's bytesBilledLimitExceeded
refusal (bqemulator ignores maximumBytesBilled).

Synthetic export: May 2024, detailed export, an a2-highgpu-8g and an a3-highgpu-8g billed in
parts (GPU, core, RAM SKUs), a g2-standard-8, internet egress, Cloud Logging, a GKE cluster fee,
tax, an adjustment and a rounding error, credits of four types plus one of an unknown type, rows
with 0, 1 and 2 credits, labels in export order (unsorted), rows on both sides of the window.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot

import connectors.billing.gcp_billing as gcp
from connectors.base import ReadContext, SourceSpec
from connectors.billing.gcp_sql import CREDIT_TYPES, render
from connectors.errors import FatalSourceError, InputError, RetriableSourceError
from connectors.registry import resolve

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("COSTAUDIT_BQ_VENV", ROOT / ".venv-bq"))
EMULATOR_PACKAGES = ["bqemulator==1.4.0", "duckdb==1.5.5", "duckdb-extensions==1.5.5",
                     "duckdb-extension-spatial==1.5.5", "duckdb-extension-avro==1.5.5", "numpy"]
# The emulator INSTALLs spatial (required) and avro (optional) at start; installed from these
# packages into ~/.duckdb, DuckDB never goes to its extension server for them.
INSTALL_EXTENSIONS = ("import duckdb_extensions as d; "
                      "[d.import_extension(name) for name in ('spatial', 'avro')]")
PROJECT, DATASET = "test-proj", "billing"
DETAILED = f"{PROJECT}.{DATASET}.gcp_billing_export_resource_v1_0A1B2C_3D4E5F_6A7B8C"
STANDARD = f"{PROJECT}.{DATASET}.gcp_billing_export_v1_0A1B2C_3D4E5F_6A7B8C"
MAY, JUNE = datetime(2024, 5, 1, tzinfo=timezone.utc), datetime(2024, 6, 1, tzinfo=timezone.utc)
ACCOUNT = "0A1B2C-3D4E5F-6A7B8C"


# --- the synthetic export --------------------------------------------------------------------

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


def bq_schema(*, detailed: bool = True, numeric: bool = False):
    """The export's BigQuery schema (FLOAT64 money as exported, or NUMERIC)."""
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
    return [f for f in fields if detailed or f.name != "resource"]


# --- the emulator and the fault proxy ---------------------------------------------------------

def ensure_emulator_venv() -> Path:
    """``.venv-bq`` with bqemulator and its DuckDB (same commands as the Makefile's .venv-bq/.ok)."""
    binary, python = VENV / "bin" / "bqemulator", str(VENV / "bin" / "python")
    if not ((VENV / ".ok").exists() and binary.exists()):
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *EMULATOR_PACKAGES], check=True)
        (VENV / ".ok").touch()
    subprocess.run([python, "-c", INSTALL_EXTENSIONS], check=True)  # ~/.duckdb may be new
    return binary


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(port: int, proc: subprocess.Popen, log: Path, seconds: float = 90) -> None:
    """Poll the emulator's dataset list until it answers (or fail with its log)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"bqemulator exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", f"/bigquery/v2/projects/{PROJECT}/datasets")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        finally:
            conn.close()
        time.sleep(0.3)
    pytest.fail(f"bqemulator did not answer in {seconds} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    """bqemulator on 127.0.0.1 (in-memory), stopped at the end of the module; yields its port."""
    binary = ensure_emulator_venv()
    port, log = free_port(), tmp_path_factory.mktemp("bqemu") / "emulator.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(binary), "start", "--rest-host", "127.0.0.1", "--rest-port",
                                 str(port), "--grpc-port", str(free_port()), "--project", PROJECT,
                                 "--ephemeral", "--log-level", "warning"], stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_until_up(port, proc, log)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class FaultProxy:
    """Forwards to the emulator; records requests; answers chosen ones itself.

    ``faults``: (method, path substring, status, reason) answered once each, in order.
    ``dry_run_bytes``: the byte estimate put into dry-run answers (the emulator says 0).
    ``billed_bytes``: a real query whose maximumBytesBilled is below this is refused with
    BigQuery's bytesBilledLimitExceeded (the emulator ignores the limit).
    """

    target: int
    faults: list = field(default_factory=list)
    dry_run_bytes: int | None = None
    billed_bytes: int | None = None
    requests: list = field(default_factory=list)

    def start(self) -> "FaultProxy":
        """Serve on a free loopback port in a daemon thread."""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                proxy.handle(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        """The endpoint the client is given."""
        return f"http://127.0.0.1:{self.port}"

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        """Inject, refuse or forward one request."""
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        payload = json.loads(body) if body.strip().startswith(b"{") else {}
        self.requests.append((handler.command, handler.path, payload))
        for fault in list(self.faults):
            method, part, status, reason = fault
            if handler.command == method and part in handler.path:
                self.faults.remove(fault)
                return reply(handler, status, error_body(status, reason, f"injected {reason}"))
        query = payload.get("configuration", {}).get("query", {})
        dry = payload.get("configuration", {}).get("dryRun", False)
        limit = query.get("maximumBytesBilled")
        if query and not dry and self.billed_bytes is not None and limit is not None \
                and int(limit) < self.billed_bytes:
            message = (f"Query exceeded limit for bytes billed: {limit}. "
                       f"{self.billed_bytes} or higher required.")
            return reply(handler, 400, error_body(400, "bytesBilledLimitExceeded", message))
        status, data = forward(self.target, handler, body)
        if dry and self.dry_run_bytes is not None and status == 200:
            answer = json.loads(data)
            stats = answer.setdefault("statistics", {})
            stats["totalBytesProcessed"] = str(self.dry_run_bytes)
            stats.setdefault("query", {})["totalBytesProcessed"] = str(self.dry_run_bytes)
            data = json.dumps(answer).encode()
        reply(handler, status, data)

    def stop(self) -> None:
        """Shut the server down."""
        self.server.shutdown()
        self.server.server_close()


def forward(port: int, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes]:
    """Send the request on to the emulator; return its status and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("host", "connection")}
    try:
        conn.request(handler.command, handler.path, body=body or None, headers=headers)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def error_body(status: int, reason: str, message: str) -> bytes:
    """A BigQuery REST error document."""
    return json.dumps({"error": {"code": status, "message": message, "status": reason,
                                 "errors": [{"message": message, "domain": "global",
                                             "reason": reason}]}}).encode()


def reply(handler: BaseHTTPRequestHandler, status: int, data: bytes) -> None:
    """Answer with a JSON body."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json; charset=UTF-8")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@pytest.fixture
def proxy(emulator):
    """A fresh FaultProxy in front of the emulator."""
    server = FaultProxy(emulator).start()
    yield server
    server.stop()


def client_for(port: int):
    """A client straight to the emulator (test set-up only)."""
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import bigquery

    return bigquery.Client(project=PROJECT, credentials=AnonymousCredentials(),
                           client_options=ClientOptions(api_endpoint=f"http://127.0.0.1:{port}"))


def load_table(client, table: str, rows: list[dict], schema) -> None:
    """(Re)create ``table`` and stream ``rows`` into it in batches."""
    from google.cloud import bigquery

    client.delete_table(table, not_found_ok=True)
    client.create_table(bigquery.Table(table, schema=schema))
    names = {f.name for f in schema}
    for i in range(0, len(rows), 500):
        batch = [{k: v for k, v in r.items() if k in names} for r in rows[i:i + 500]]
        errors = client.insert_rows_json(table, batch)
        assert not errors, errors[:3]


@pytest.fixture(scope="module")
def rows():
    """The synthetic export."""
    return export_rows()


@pytest.fixture(scope="module")
def loaded(emulator, rows):
    """The detailed export (FLOAT64 money, as GCP writes it) and a standard one (NUMERIC money)."""
    client = client_for(emulator)
    client.create_dataset(f"{PROJECT}.{DATASET}", exists_ok=True)
    load_table(client, DETAILED, [as_float_json(r) for r in rows], bq_schema())
    standard = [dict(r, resource=None) for r in rows if r["service"]["description"] != "Compute Engine"]
    load_table(client, STANDARD, standard, bq_schema(detailed=False, numeric=True))
    yield client
    client.close()


def connector(*, table: str | None = None, path: Path | None = None, endpoint: str | None = None,
              start=MAY, end=JUNE, **options):
    """A GcpBillingConnector over a table (through ``endpoint``) or a local path."""
    if table:
        options = {"table": table, "project": PROJECT, "api_endpoint": endpoint, **options}
    spec = SourceSpec(name="gcp", kind="billing", format="gcp_billing", path=path, options=options)
    return resolve("gcp_billing")(spec, ReadContext(start=start, end=end, currency="USD"))


# --- oracles ---------------------------------------------------------------------------------

CATEGORY = {"regular": "Usage", "tax": "Tax", "adjustment": "Adjustment", "rounding_error": "Adjustment"}


def dsum(values) -> Decimal:
    """Exact Decimal sum."""
    return sum((Decimal(v) for v in values), Decimal(0))


def expected_totals(rows: list[dict]) -> dict[str, Decimal]:
    """Per charge category and per credit type, straight from the export rows."""
    out: dict[str, Decimal] = {}
    for r in in_window(rows):
        key = CATEGORY[r["cost_type"]]
        out[key] = out.get(key, Decimal(0)) + Decimal(r["cost"])
        for credit in r["credits"]:
            kind = credit["type"] if credit["type"] in CREDIT_TYPES else "OTHER"
            out[f"Credit:{kind}"] = out.get(f"Credit:{kind}", Decimal(0)) + Decimal(credit["amount"])
    return out


def totals(lines) -> dict[str, Decimal]:
    """The same keys from a ``lines`` table."""
    out: dict[str, Decimal] = {}
    for line in lines.to_dict("records"):
        key = line["charge_category"]
        if key == "Credit":
            key = f"Credit:{json.loads(line['extra'])['x_CreditType']}"
        out[key] = out.get(key, Decimal(0)) + line["billed_cost"]
    return out


def comparable(lines):
    """A lines table without the line ids (they name the table or file read)."""
    return lines.drop(columns=["line_id"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def local_files(tmp_path_factory, rows):
    """The same rows as bq extract NDJSON and as Parquet."""
    folder = tmp_path_factory.mktemp("gcp_export")
    return {"json": write_ndjson(rows, folder / "export-000000000000.json"),
            "parquet": write_parquet(rows, folder / "export.parquet")}


@pytest.fixture(scope="module")
def from_bigquery(loaded, emulator):
    """The detailed export read through the connector from the emulator (no proxy)."""
    source = connector(table=DETAILED, endpoint=f"http://127.0.0.1:{emulator}")
    return source, source.read()


# --- BigQuery (emulator) and DuckDB on the same rows -----------------------------------------

def test_bigquery_totals_exact(from_bigquery, rows):
    """Every category and credit type matches the export to the last digit; window respected."""
    source, frame = from_bigquery
    lines = frame.tables["lines"]
    assert totals(lines) == expected_totals(rows)
    assert frame.rows == len(in_window(rows)) == len(rows) - 2
    assert lines["start"].min() >= MAY and lines["start"].max() < JUNE
    assert frame.covered == (MAY, datetime(2024, 6, 1, 7, tzinfo=timezone.utc))
    assert len(frame.sha256) == 64 and source.fingerprint() == frame.sha256
    assert source.bytes_scanned == 0  # bqemulator has no cost model: its dry run says 0 bytes


def test_bigquery_lines_carry_focus_fields(from_bigquery, rows):
    """GPU SKUs, machine parts, resource, project, labels, invoice month, Pacific time."""
    lines = from_bigquery[1].tables["lines"]
    a100 = lines[(lines.charge_description == "Nvidia Tesla A100 GPU running in Americas")
                 & (lines.charge_category == "Usage")]
    assert dsum(a100.pricing_quantity) == 8 * 240 and set(a100.pricing_unit) == {"hour"}
    assert set(a100.resource_id) == {"gke-inference-a2-pool-7f3a"}
    assert set(a100.sub_account_id) == {"ml-prod"}
    assert set(a100.tags) == {'{"goog-k8s-cluster-name":"inference","team":"ml"}'}
    extra = [json.loads(e) for e in a100.extra]
    assert {e["x_MachineSpec"] for e in extra} == {"a2-highgpu-8g"}
    # hours before 07:00 UTC on the 1st are April's invoice (Pacific time); runs of identical hours
    # are one line each, so April's run ends at 07:00 and May's starts there
    assert {e["x_InvoiceMonth"] for e, s in zip(extra, a100.end) if s.hour <= 7 and s.day == 1} == {"202404"}
    assert {e["x_InvoiceMonth"] for e, s in zip(extra, a100.end) if s.day > 1} == {"202405"}
    h100 = lines[lines.charge_description.str.startswith("Nvidia H100")]
    assert set(h100.tags) == set(a100.tags)  # labels in another export order: the same Tags
    credits = lines[lines.charge_category == "Credit"]
    assert credits.pricing_quantity.isna().all()  # a credit never adds usage (GPU-hours)
    assert set(lines.charge_category) == {"Usage", "Credit", "Tax", "Adjustment"}


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_same_sql_on_duckdb_gives_identical_lines(from_bigquery, local_files, fmt):
    """The DuckDB rendering over the same rows as a local export: every line, every digit."""
    local = connector(path=local_files[fmt]).read()
    assert local.rows == from_bigquery[1].rows
    pd_assert_equal(comparable(local.tables["lines"]), comparable(from_bigquery[1].tables["lines"]))


def pd_assert_equal(left, right) -> None:
    """Frames equal column by column, every Decimal to the last digit."""
    assert list(left.columns) == list(right.columns)
    assert len(left) == len(right)
    for column in left.columns:
        assert left[column].tolist() == right[column].tolist(), column


def test_duckdb_list_rewrite_equals_correlated_subqueries(local_files):
    """DuckDB's list-lambda rewrite gives what the correlated subqueries as written give."""
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        gcp.export_view(con, [str(local_files["json"])], "json", local_files["json"])
        results = []
        for lambdas in (True, False):
            sql = render("gcp_lines", "duckdb", table="billing_export", start=MAY, end=JUNE,
                         list_lambdas=lambdas)
            assert ("UNNEST" in sql) != lambdas
            results.append(sorted(con.execute(sql).fetchall(), key=repr))
    assert results[0] == results[1] and len(results[0]) > 1000


@pytest.mark.parametrize("grain", ["hour", "day"])
def test_credits_never_dropped_or_duplicated(loaded, emulator, tmp_path, rows, grain):
    """Rows with 0, 1 and 2 credits: each credit once, each charge once, on both engines."""
    start = MAY + timedelta(hours=5)
    picked = [r for r in rows if r["usage_start_time"] == start.strftime("%Y-%m-%d %H:%M:%S UTC")
              and r["resource"] and "a2" in r["resource"]["name"]]
    assert sorted(len(r["credits"]) for r in picked) == [0, 1, 2]
    table = f"{PROJECT}.{DATASET}.gcp_billing_export_resource_v1_credits"
    load_table(loaded, table, [as_float_json(r) for r in picked], bq_schema())
    remote = connector(table=table, endpoint=f"http://127.0.0.1:{emulator}", grain=grain).read()
    local = connector(path=write_ndjson(picked, tmp_path / "c.json"), grain=grain).read()
    for frame in (remote, local):
        lines = frame.tables["lines"]
        assert (lines.charge_category == "Usage").sum() == 3
        kinds = sorted(json.loads(e)["x_CreditType"] for e in lines[lines.charge_category == "Credit"].extra)
        assert kinds == ["COMMITTED_USAGE_DISCOUNT", "COMMITTED_USAGE_DISCOUNT", "PROMOTION"]
        assert totals(lines) == expected_totals(picked)
    pd_assert_equal(comparable(local.tables["lines"]), comparable(remote.tables["lines"]))


def test_standard_export_with_numeric_money(loaded, emulator, rows, tmp_path):
    """A standard export (no resource column; NUMERIC money here) reads with empty ResourceId."""
    frame = connector(table=STANDARD, endpoint=f"http://127.0.0.1:{emulator}").read()
    lines = frame.tables["lines"]
    subset = [r for r in rows if r["service"]["description"] != "Compute Engine"]
    assert set(lines.resource_id) == {""}
    assert totals(lines) == expected_totals(subset)
    local = connector(path=write_parquet(subset, tmp_path / "std.parquet", detailed=False)).read()
    pd_assert_equal(comparable(local.tables["lines"]), comparable(lines))


def test_billing_totals_same_on_bigquery_and_duckdb(loaded, from_bigquery):
    """billing_totals over a FOCUS-named table: BigQuery rendering = DuckDB rendering = lines."""
    from google.cloud import bigquery

    lines = from_bigquery[1].tables["lines"]
    focus = [{"ChargeCategory": l["charge_category"], "ServiceName": l["service_name"],
              "BillingCurrency": l["currency"], "BilledCost": str(l["billed_cost"]),
              "EffectiveCost": str(l["effective_cost"]),
              "ChargePeriodStart": l["start"].strftime("%Y-%m-%d %H:%M:%S UTC"),
              "ChargePeriodEnd": l["end"].strftime("%Y-%m-%d %H:%M:%S UTC")}
             for l in lines.to_dict("records")]
    F = bigquery.SchemaField
    schema = [F(n, "STRING") for n in ("ChargeCategory", "ServiceName", "BillingCurrency")] + \
             [F("BilledCost", "NUMERIC"), F("EffectiveCost", "NUMERIC"),
              F("ChargePeriodStart", "TIMESTAMP"), F("ChargePeriodEnd", "TIMESTAMP")]
    table = f"{PROJECT}.{DATASET}.focus_view"
    load_table(loaded, table, focus, schema)
    remote = [tuple(r.values()) for r in loaded.query(render(
        "billing_totals", "bigquery", table=table, start=MAY, end=JUNE)).result()]
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("CREATE TABLE focus_view AS SELECT * FROM read_json(?, format='array', columns="
                    "{ChargeCategory: 'VARCHAR', ServiceName: 'VARCHAR', BillingCurrency: 'VARCHAR', "
                    "BilledCost: 'VARCHAR', EffectiveCost: 'VARCHAR', ChargePeriodStart: 'VARCHAR', "
                    "ChargePeriodEnd: 'VARCHAR'})", [str(write_json(focus))])
        local = con.execute(render("billing_totals", "duckdb", table="focus_view", start=MAY,
                                   end=JUNE)).fetchall()
    assert remote == local
    assert dsum(r[3] for r in local) == dsum(lines.billed_cost)
    assert {r[0] for r in local} == {"Usage", "Credit", "Tax", "Adjustment"}


def write_json(records: list[dict]) -> Path:
    """Records as one JSON array in a temporary file."""
    import tempfile

    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    with handle:
        json.dump(records, handle)
    return Path(handle.name)


# --- dry run, maximum_bytes_billed, faults (through the proxy) -------------------------------

def query_jobs(proxy: FaultProxy, *, dry: bool) -> list[dict]:
    """Query job requests the proxy saw (dry runs or real queries)."""
    return [body for method, path, body in proxy.requests
            if method == "POST" and "/jobs" in path and "query" in body.get("configuration", {})
            and bool(body["configuration"].get("dryRun")) == dry]


def test_dry_run_first_and_limit_sent(loaded, proxy, caplog):
    """A dry run precedes the query; its bytes are logged and kept; the limit goes with the query."""
    proxy.dry_run_bytes = 7_340_032
    source = connector(table=DETAILED, endpoint=proxy.url, maximum_bytes_billed=10**9)
    with caplog.at_level(logging.INFO, logger="connectors.billing.gcp_billing"):
        source.read()
    assert source.bytes_scanned == 7_340_032
    assert "would scan 7340032 bytes" in caplog.text and DETAILED in caplog.text
    dry, real = query_jobs(proxy, dry=True), query_jobs(proxy, dry=False)
    assert len(dry) == 1 and len(real) == 1
    assert real[0]["configuration"]["query"]["maximumBytesBilled"] == str(10**9)
    order = [i for i, (_, _, body) in enumerate(proxy.requests) if body in (dry[0], real[0])]
    assert proxy.requests[order[0]][2] is dry[0]


def test_dry_run_above_limit_refused_before_running(loaded, proxy):
    """An estimate above maximum_bytes_billed: InputError naming table and limit; nothing runs."""
    proxy.dry_run_bytes = 3 * 10**12
    source = connector(table=DETAILED, endpoint=proxy.url, maximum_bytes_billed=10**9)
    with pytest.raises(InputError) as caught:
        source.read()
    message = str(caught.value)
    assert DETAILED in message and "1,000,000,000" in message and "3,000,000,000,000" in message
    assert query_jobs(proxy, dry=False) == []


def test_bigquery_refusal_above_maximum_bytes_billed(loaded, proxy):
    """BigQuery's own bytesBilledLimitExceeded refusal becomes an InputError (not retried)."""
    proxy.billed_bytes = 10_485_760  # what BigQuery bills at least; the emulator never refuses
    source = connector(table=DETAILED, endpoint=proxy.url, maximum_bytes_billed=1000)
    with pytest.raises(InputError) as caught:
        source.read()
    message = str(caught.value)
    assert DETAILED in message and "maximum_bytes_billed = 1,000" in message
    assert "10485760 or higher required" in message
    assert len(query_jobs(proxy, dry=False)) == 1


@pytest.fixture
def quick_retries(monkeypatch):
    """Shorter backoff for the fault tests."""
    monkeypatch.setattr(gcp.GcpBillingConnector, "backoff_seconds", 0.01)


def test_transient_faults_are_retried(loaded, proxy, quick_retries, rows):
    """503 on the dry run and 429 on the table look-up: retried, then the same totals."""
    proxy.faults = [("GET", "/tables/", 429, "rateLimitExceeded"),
                    ("POST", "/jobs", 503, "backendError"),
                    ("POST", "/jobs", 500, "internalError")]
    frame = connector(table=DETAILED, endpoint=proxy.url).read()
    assert proxy.faults == []
    assert totals(frame.tables["lines"]) == expected_totals(rows)


def test_persistent_fault_is_retriable_error(loaded, proxy, quick_retries):
    """A fault that outlasts the retries surfaces as RetriableSourceError."""
    proxy.faults = [("GET", "/tables/", 503, "backendError")] * (gcp.GcpBillingConnector.retries + 1)
    with pytest.raises(RetriableSourceError, match="transient"):
        connector(table=DETAILED, endpoint=proxy.url).read()
    assert proxy.faults == []


def test_permission_denied_names_table_and_roles(loaded, proxy, quick_retries):
    """403 accessDenied: FatalSourceError with the table and the roles; never retried."""
    proxy.faults = [("GET", "/tables/", 403, "accessDenied")] * 2
    with pytest.raises(FatalSourceError) as caught:
        connector(table=DETAILED, endpoint=proxy.url).read()
    message = str(caught.value)
    assert DETAILED in message and "roles/bigquery.dataViewer" in message
    assert "roles/bigquery.jobUser" in message
    assert len(proxy.faults) == 1


def test_missing_table_and_non_export(loaded, emulator):
    """A missing table is fatal; a table without the export's columns is an InputError."""
    endpoint = f"http://127.0.0.1:{emulator}"
    with pytest.raises(FatalSourceError, match="not found"):
        connector(table=f"{PROJECT}.{DATASET}.no_such_table", endpoint=endpoint).read()
    with pytest.raises(InputError, match="ChargeCategory|billing_account_id"):
        connector(table=f"{PROJECT}.{DATASET}.focus_view", endpoint=endpoint).read()


def test_empty_window(loaded, emulator):
    """No export row in the window: no line, nothing covered, on BigQuery as locally."""
    frame = connector(table=DETAILED, endpoint=f"http://127.0.0.1:{emulator}",
                      start=datetime(2023, 1, 1, tzinfo=timezone.utc), end=MAY - timedelta(hours=1)).read()
    assert (frame.rows, len(frame.tables["lines"]), frame.covered) == (0, 0, (None, None))


def test_case_errors_without_a_server():
    """A malformed table name, and plain http off this machine, are refused before any call."""
    with pytest.raises(InputError, match="project.dataset.table"):
        connector(table="just_a_table").read()
    with pytest.raises(InputError, match="plain http"):
        connector(table=DETAILED, endpoint="http://192.0.2.1:9050").read()


@pytest.mark.parametrize("error, expected", [
    ("ServiceUnavailable", RetriableSourceError), ("InternalServerError", RetriableSourceError),
    ("TooManyRequests", RetriableSourceError), ("BadGateway", RetriableSourceError),
    ("Forbidden", FatalSourceError), ("NotFound", FatalSourceError),
    ("Unauthorized", FatalSourceError), ("BadRequest", FatalSourceError)])
def test_error_mapping(error, expected):
    """google.api_core exceptions map onto our three error kinds."""
    from google.api_core import exceptions as gexc

    mapped = gcp.source_error(getattr(gexc, error)("boom"), DETAILED, 1000)
    assert isinstance(mapped, expected) and DETAILED in str(mapped)


def test_rate_limit_403_and_no_credentials():
    """A 403 with reason rateLimitExceeded is transient; missing ADC says how to log in."""
    from google.api_core import exceptions as gexc
    from google.auth.exceptions import DefaultCredentialsError

    limited = gexc.Forbidden("slow down", errors=[{"reason": "rateLimitExceeded"}])
    assert isinstance(gcp.source_error(limited, DETAILED, 1), RetriableSourceError)
    fatal = gcp.source_error(DefaultCredentialsError("none"), DETAILED, 1)
    assert isinstance(fatal, FatalSourceError) and "application-default login" in str(fatal)


# --- rendering and local files ---------------------------------------------------------------

@pytest.mark.parametrize("name", ["gcp_lines", "billing_totals"])
@pytest.mark.parametrize("dialect", ["duckdb", "bigquery", "trino"])
def test_renderings_parse(name, dialect):
    """Every definition renders and parses back in every dialect (trino: the Athena path)."""
    table = {"bigquery": "my-project.billing.t", "trino": "awsdatacatalog.cur.t"}.get(dialect, "t")
    sql = render(name, dialect, table=table, start=MAY, end=JUNE)
    assert sqlglot.parse_one(sql, read=dialect) is not None
    assert "DOUBLE" not in sql.upper() and "FLOAT" not in sql.upper()


def test_bigquery_rendering_details():
    """Correlated credit subqueries, exact NUMERIC, quoted table, UTC window, partition filter."""
    sql = render("gcp_lines", "bigquery", table="example.com:proj.billing.gcp_billing_export_v1_X",
                 start=MAY, end=JUNE, partition_slack_days=5)
    assert "FROM UNNEST(e.credits) AS c" in sql and "PARSE_NUMERIC(CAST(c.amount AS STRING))" in sql
    assert "NUMERIC(38" not in sql  # BigQuery takes type parameters on columns only
    assert "`example.com:proj`.`billing`.`gcp_billing_export_v1_X`" in sql
    assert "'2024-05-01 00:00:00 UTC'" in sql and "_PARTITIONTIME" in sql
    standard = render("gcp_lines", "bigquery", table="p.d.t", start=MAY, end=JUNE, detailed=False)
    assert "e.resource" not in standard and "resource_name" in standard
    with pytest.raises(ValueError):
        render("gcp_lines", "duckdb", table="t", start=MAY, end=JUNE, partition_slack_days=5)
    with pytest.raises(ValueError):
        render("gcp_lines", "duckdb", table="t", start=MAY, end=JUNE, grain="minute")


def test_local_folder_day_grain_and_bad_inputs(tmp_path, rows):
    """A folder of gzipped NDJSON parts at day grain; mixed or unknown files are InputErrors."""
    import gzip

    folder = tmp_path / "export"
    folder.mkdir()
    for i, part in enumerate((rows[:800], rows[800:])):
        with gzip.open(folder / f"part-{i}.json.gz", "wt") as handle:
            handle.writelines(json.dumps(as_float_json(r)) + "\n" for r in part)
    frame = connector(path=folder, grain="day").read()
    assert totals(frame.tables["lines"]) == expected_totals(rows)
    assert frame.rows == len(in_window(rows))
    assert len(frame.tables["lines"]) < 400  # days, not hours
    write_parquet(rows[:5], folder / "extra.parquet")
    with pytest.raises(InputError, match="both JSON and Parquet"):
        connector(path=folder).read()
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(InputError, match="no export file"):
        connector(path=other).read()
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"cost": [1.0]}), bad)
    with pytest.raises(InputError, match="usage_start_time"):
        connector(path=bad).read()
