"""moto in server mode on 127.0.0.1, and a fault-injecting proxy in front of it.

``start`` runs moto's server (``python -m tests.servers.moto_main``: Athena's result files quoted as
Athena quotes them) in a subprocess on a free port (one per test session, see
tests/connectors/conftest.py). ``FaultProxy`` is a small threaded HTTP server in front of moto: it
forwards every request, counts them by kind (list / head / get), and answers chosen ones with
503 SlowDown, 500 InternalError, 403 AccessDenied, a dropped connection or a truncated body.
``aws_environment`` gives a test fake credentials and a cache of its own.
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

import connectors.objectstore_faults as objectstore_faults
from tests.servers.ports import free_port

FAKE_KEY_ID = "AKIAFAKELEAKTEST0001"
FAKE_SECRET = "fAkEsEcReT/LeakTest+0123456789abcdefGHIJ"
FAKE_TOKEN = "FwoGZXIvYXdzEFAKEleakTESTsessionTOKEN//////////wEaDFAKEtokenValue0123456789+abc="


@dataclass
class Moto:
    """A moto server subprocess."""

    port: int
    process: subprocess.Popen
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def post(self, path: str, body: bytes = b"") -> dict:
        """POST to the moto control api (/moto-api/...)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("POST", path, body)
            reply = conn.getresponse()
            return json.loads(reply.read() or b"{}")
        finally:
            conn.close()


def wait_for_moto(moto: Moto, seconds: float = 60) -> None:
    """Poll until moto answers HTTP, failing early if the process died."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if moto.process.poll() is not None:
            pytest.fail(f"moto server exited: {moto.log.read_text()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", moto.port, timeout=2)
            conn.request("GET", "/moto-api/")
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"moto server did not answer within {seconds} s")


@contextlib.contextmanager
def start(folder: Path):
    """moto in server mode on 127.0.0.1 until the block ends; its log in ``folder``."""
    log = folder / "moto.log"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    with open(log, "wb") as sink:
        process = subprocess.Popen([sys.executable, "-m", "tests.servers.moto_main", "-H", "127.0.0.1", "-p",
                                    str(port := free_port())], stdout=sink, stderr=subprocess.STDOUT, env=env,
                                   cwd=Path(__file__).resolve().parents[2])
    server = Moto(port, process, log)
    try:
        wait_for_moto(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


ERROR_XML = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
             '<RequestId>FAULTPROXY</RequestId></Error>')
FAULTS = {
    "slowdown": (503, "SlowDown", "Please reduce your request rate."),
    "internal": (500, "InternalError", "We encountered an internal error. Please try again."),
    "denied": (403, "AccessDenied", "Access Denied"),
}


@dataclass
class Rule:
    """Answer ``times`` requests of ``kind`` with ``fault`` (times=None: for ever)."""

    kind: str
    fault: str
    times: int | None


@dataclass
class FaultProxy:
    """Threaded HTTP proxy in front of moto: forwards, counts, injects faults."""

    upstream: int
    rules: list[Rule] = field(default_factory=list)
    seen: list[tuple[str, str]] = field(default_factory=list)   # (kind, outcome)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def fail(self, kind: str, fault: str, times: int | None = 1) -> None:
        """Inject ``fault`` into the next ``times`` requests of ``kind`` (list, head, get)."""
        self.rules.append(Rule(kind, fault, times))

    def count(self, kind: str, outcome: str | None = None) -> int:
        """Requests of ``kind`` seen (optionally only those answered with ``outcome``)."""
        with self.lock:
            return sum(1 for k, o in self.seen if k == kind and (outcome is None or o == outcome))

    def reset(self) -> None:
        with self.lock:
            self.seen.clear()
            self.rules.clear()

    def take(self, kind: str) -> str | None:
        """The fault for this request, if a rule still applies (and record it)."""
        with self.lock:
            for rule in self.rules:
                if rule.kind == kind and (rule.times is None or rule.times > 0):
                    if rule.times is not None:
                        rule.times -= 1
                    self.seen.append((kind, rule.fault))
                    return rule.fault
            self.seen.append((kind, "forwarded"))
            return None


def request_kind(method: str, target: str) -> str:
    """list / head / get / put / ... for a path-style S3 request."""
    path, _, query = target.partition("?")
    if path.startswith("/moto-api"):
        return "moto"
    _, _, key = path.lstrip("/").partition("/")
    if not key:
        return "list" if method == "GET" and "list-type" in query else f"{method.lower()}_bucket"
    return {"GET": "get", "HEAD": "head"}.get(method, method.lower())


class ProxyHandler(BaseHTTPRequestHandler):
    """Forward to moto unless a rule says otherwise."""

    protocol_version = "HTTP/1.1"
    proxy: FaultProxy  # set on a subclass per proxy

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self.handle_any()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

    def handle_any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fault = self.proxy.take(request_kind(self.command, self.path))
        if fault == "drop":
            self.close_connection = True
            return
        if fault in FAULTS:
            return self.answer_error(*FAULTS[fault])
        status, headers, payload = self.forward(body)
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            if fault == "truncate":
                self.wfile.write(payload[: len(payload) // 2])
                self.close_connection = True
            else:
                self.wfile.write(payload)

    def forward(self, body: bytes):
        conn = http.client.HTTPConnection("127.0.0.1", self.proxy.upstream, timeout=30)
        try:
            conn.request(self.command, self.path, body or None, dict(self.headers.items()))
            reply = conn.getresponse()
            payload = reply.read()
            skip = {"transfer-encoding", "connection", "keep-alive", "content-length"}
            headers = [(k, v) for k, v in reply.getheaders() if k.lower() not in skip]
            length = reply.getheader("Content-Length") if self.command == "HEAD" else str(len(payload))
            headers.append(("Content-Length", length or "0"))
            return reply.status, headers, payload
        finally:
            conn.close()

    def answer_error(self, status: int, code: str, message: str) -> None:
        payload = b"" if self.command == "HEAD" else ERROR_XML.format(code=code, message=message).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def serve_proxy(upstream: int, handler_base: type, **attributes):
    """A FaultProxy in front of moto on a free port of 127.0.0.1, served by a subclass of
    ``handler_base`` (with ``attributes``) in a thread; a generator for a fixture to yield from."""
    state = FaultProxy(upstream)
    handler = type("Handler", (handler_base,), {"proxy": state, **attributes})
    state.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    state.server.daemon_threads = True
    thread = threading.Thread(target=state.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.server.shutdown()
        state.server.server_close()
        thread.join(10)


def aws_environment(monkeypatch, folder: Path) -> None:
    """Fake credentials in the environment, no shared config, the cache in ``folder``."""
    for name in list(os.environ):
        if name.startswith("AWS_") or "proxy" in name.lower():
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(folder / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("COSTAUDIT_CACHE", str(folder / "cache"))
    monkeypatch.setattr(objectstore_faults, "MAX_RETRIES", 2)  # three tries a request


def put(s3, bucket: str, key: str, body: bytes | str) -> None:
    """Upload one object straight to moto (test set-up)."""
    s3.put_object(Bucket=bucket, Key=key, Body=body.encode() if isinstance(body, str) else body)
