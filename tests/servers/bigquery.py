"""bqemulator (PyPI) on 127.0.0.1 for the GCP billing tests, and a fault proxy in front of it.

The emulator runs in its own virtual environment ``.venv-bq`` (it needs duckdb 1.5.5 and its
spatial extension from the duckdb-extension-spatial package; ``ensure_emulator_venv`` builds the
environment when it is missing). ``start`` runs one emulator (one per test session, see
tests/connectors/conftest.py). A ``FaultProxy`` between client and emulator records requests and
injects what the emulator lacks or cannot be asked for: 5xx faults, access denied, a dry-run byte
estimate (bqemulator always reports 0 bytes) and BigQuery's bytesBilledLimitExceeded refusal
(bqemulator ignores maximumBytesBilled).
"""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.paths import ROOT
from tests.servers.ports import free_port

VENV = Path(os.environ.get("COSTAUDIT_BQ_VENV", ROOT / ".venv-bq"))
EMULATOR_PACKAGES = ["bqemulator==1.4.0", "duckdb==1.5.5", "duckdb-extensions==1.5.5",
                     "duckdb-extension-spatial==1.5.5", "duckdb-extension-avro==1.5.5", "numpy"]
# The emulator INSTALLs spatial (required) and avro (optional) at start; installed from these
# packages into ~/.duckdb, DuckDB never goes to its extension server for them.
INSTALL_EXTENSIONS = ("import duckdb_extensions as d; "
                      "[d.import_extension(name) for name in ('spatial', 'avro')]")
PROJECT, DATASET = "test-proj", "billing"


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


@contextlib.contextmanager
def start(folder: Path):
    """bqemulator on 127.0.0.1 (in-memory) until the block ends; yields its port."""
    binary = ensure_emulator_venv()
    port, log = free_port(), folder / "emulator.log"
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


SPLIT_TYPES = {"int64": "INT64", "bool": "BOOL", "object": "STRING", "str": "STRING", "string": "STRING"}


def load_split_tables(client, prepared) -> dict[str, str]:
    """The GPU split's prepared tables (audit.split_sql.tables) loaded into the emulator;
    stand-in name → project.dataset.table."""
    from google.cloud.bigquery import SchemaField

    client.create_dataset(f"{PROJECT}.{DATASET}", exists_ok=True)
    names = {}
    for name, frame in prepared.frames.items():
        table = names[name] = f"{PROJECT}.{DATASET}.{name}"
        schema = [SchemaField(c, SPLIT_TYPES[str(t)]) for c, t in frame.dtypes.items()]
        load_table(client, table, json.loads(frame.to_json(orient="records")), schema)
    return names


def split_engine(client, runs: list | None = None):
    """An engine for audit.split_sql.ENGINES: the prepared tables loaded into the emulator, the
    query's BigQuery rendering run there; ``runs`` hears the number of lines of each run."""
    from audit import split_sql

    def run(prepared):
        names = load_split_tables(client, prepared)
        if runs is not None:
            runs.append(len(prepared.frames["split_lines"]))
        return tuple([tuple(row.values()) for row in client.query(split_sql.render(
            q, "bigquery", names, limbs=prepared.limbs)).result()] for q in (split_sql.COVERAGE, split_sql.SUMS))

    return run
