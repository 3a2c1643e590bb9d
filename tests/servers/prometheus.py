"""A real Prometheus for the tests: backfilled with promtool, run on 127.0.0.1, and a fault proxy.

One server holds every data set the tests query (``load``): the seeded scenarios (2024-03),
fixtures/telemetry_small (2025-01-01, first hour), fixtures/telemetry_serving a day later (it
shares its hour with telemetry_small: a copy is shifted by ``SERVING_SHIFT``), and the demo case's
month of telemetry (2026-09). The windows never meet, so each test reads only its own series.

Debian's package (``apt-get install --no-install-recommends prometheus``, 2.42) provides both
``prometheus`` and ``promtool``. ``promtool tsdb create-blocks-from openmetrics`` re-reads its
whole input once per 2-hour block, so files are first split by UTC day (a month of demo telemetry
then imports in seconds instead of minutes). Compaction is switched off (min = max block duration)
so that the server does no background work while the tests query it; the fleet benchmark starts it
with ``compacting=True`` (a month of 2 h blocks is not what a long-running server holds).
"""
from __future__ import annotations

import gzip
import http.server
import shutil
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from tests.paths import DEMO, FIXTURES
from tests.servers.ports import free_port
from tests.servers.prom_scenarios import Scenario, scenario

INSTALL = "apt-get install -y --no-install-recommends prometheus"
CONFIG = "global:\n  scrape_interval: 1h\n"  # no scrape jobs: the TSDB holds backfilled blocks only
SEEDS = range(10)
SMALL = FIXTURES / "telemetry_small" / "cluster.om"
SERVING = FIXTURES / "telemetry_serving" / "serving.om"
DEMO_METRICS = DEMO / "telemetry" / "metrics.om.gz"
SERVING_SHIFT = timedelta(days=1)


def binaries() -> tuple[str, str]:
    """Paths of prometheus and promtool; a clear failure (never a skip) when missing."""
    found = shutil.which("prometheus"), shutil.which("promtool")
    if not all(found):
        raise RuntimeError(f"Prometheus is not installed: run `{INSTALL}` (make test does)")
    return found  # type: ignore[return-value]


def split_by_day(path: Path, folder: Path) -> list[Path]:
    """Write the samples of ``path`` into one OpenMetrics file per UTC day (comments dropped)."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    handles: dict[int, object] = {}
    with opener(path, "rt", encoding="utf-8") as source:
        for line in source:
            if line.startswith("#") or not line.strip():
                continue
            day = int(float(line.rsplit(" ", 1)[1]) // 86400)
            if day not in handles:
                handles[day] = open(folder / f"{path.name}.{day}.om", "w", encoding="utf-8")
            handles[day].write(line)
    for handle in handles.values():
        handle.write("# EOF\n")
        handle.close()
    return sorted(folder / f"{path.name}.{day}.om" for day in handles)


def backfill(files: list[Path], tsdb: Path, scratch: Path) -> None:
    """Import OpenMetrics files (timestamps in seconds) into a TSDB folder with promtool."""
    _, promtool = binaries()
    scratch.mkdir(parents=True, exist_ok=True)
    pieces = [p for f in files for p in split_by_day(f, scratch)]

    def run(piece: Path) -> None:
        """One promtool import."""
        subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(piece),
                        str(tsdb)], check=True, capture_output=True, timeout=600)
        piece.unlink()

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(run, pieces))


class PromServer:
    """One Prometheus process on 127.0.0.1 over a TSDB folder; restartable on the same port."""

    def __init__(self, tsdb: Path, folder: Path, compacting: bool = False):
        self.tsdb, self.folder = tsdb, folder
        #: False (the tests): blocks stay 2 h, the server does no background work; True: Prometheus's
        #: own block durations, so it compacts backfilled 2 h blocks as a long-running server has
        self.compacting = compacting
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = folder / "prometheus.yml"
        self.config.write_text(CONFIG)
        self.process: subprocess.Popen | None = None
        self.log = folder / "prometheus.log"

    def start(self, wait: float = 60.0) -> None:
        """Start the server and wait until /-/ready answers."""
        prometheus, _ = binaries()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [prometheus, f"--config.file={self.config}", f"--storage.tsdb.path={self.tsdb}",
                 "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{self.port}",
                 *([] if self.compacting else ["--storage.tsdb.min-block-duration=2h",
                                               "--storage.tsdb.max-block-duration=2h"]),
                 "--log.level=warn"], stdout=log, stderr=log)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and reap it."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart_later(self, delay: float) -> threading.Thread:
        """Stop now and start again after ``delay`` seconds, in a thread."""
        self.stop()
        thread = threading.Thread(target=lambda: (time.sleep(delay), self.start()), daemon=True)
        thread.start()
        return thread


@dataclass(frozen=True)
class Served:
    """The running server, the scenarios it holds and the shifted copy of serving.om."""

    server: PromServer
    scenarios: list[Scenario]
    serving: Path

    @property
    def url(self) -> str:
        """The server's base url."""
        return self.server.url


def shifted(path: Path, seconds: int, target: Path) -> Path:
    """A copy of an OpenMetrics file (integer-second timestamps) with every sample ``seconds`` later."""
    with open(path, encoding="utf-8") as source, open(target, "w", encoding="utf-8") as out:
        for line in source:
            if line.startswith("#") or not line.strip():
                out.write(line)
                continue
            head, stamp = line.rstrip("\n").rsplit(" ", 1)
            out.write(f"{head} {int(stamp) + seconds}\n")
    return target


def load(folder: Path) -> Served:
    """Backfill every data set into one TSDB under ``folder`` and start the server on it."""
    scenarios = [scenario(seed, folder) for seed in SEEDS]
    serving = shifted(SERVING, int(SERVING_SHIFT.total_seconds()), folder / "serving-shifted.om")
    backfill([s.path for s in scenarios] + [SMALL, serving, DEMO_METRICS], folder / "tsdb",
             folder / "scratch")
    server = PromServer(folder / "tsdb", folder)
    server.start()
    return Served(server, scenarios, serving)


class FaultProxy:
    """A forwarding HTTP proxy on 127.0.0.1 that answers with injected faults first.

    ``faults`` is a list of (status, body) answers given, in order, to the next requests whose
    path starts with ``only``; ``always`` answers every request with one fault. ``tls`` = (cert,
    key) files serves HTTPS. The Authorization header of each request is kept in ``auth``.
    """

    def __init__(self, target: str, tls: tuple[Path, Path] | None = None):
        self.target = target
        self.faults: list[tuple[int, bytes]] = []
        self.always: tuple[int, bytes] | None = None
        self.only = "/api/v1/"
        self.seen = 0
        self.auth: list[str | None] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                proxy.answer(self)

            def do_POST(self):  # noqa: N802
                proxy.answer(self)

            def log_message(self, *args):
                """Quiet."""

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, handler) -> None:
        """Send a fault, or forward the request to Prometheus and relay its answer."""
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        self.seen += 1
        self.auth.append(handler.headers.get("Authorization"))
        fault = self.always
        if fault is None and self.faults and handler.path.startswith(self.only):
            fault = self.faults.pop(0)
        if fault is not None:
            status, payload, headers = fault[0], fault[1], {"Content-Type": "application/json"}
        else:
            status, payload, headers = self._forward(handler, body)
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _forward(self, handler, body: bytes | None) -> tuple[int, bytes, dict]:
        """The upstream answer: status, body and the headers worth relaying."""
        keep = ("Content-Type", "Accept-Encoding", "Authorization")
        request = urllib.request.Request(self.target + handler.path, data=body, method=handler.command,
                                         headers={k: v for k, v in handler.headers.items() if k in keep})
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, answer.read(), _relayed(answer.headers)
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.read(), _relayed(exc.headers)

    def close(self) -> None:
        """Stop serving and release the socket."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def _relayed(headers) -> dict:
    """Content type and encoding of an upstream answer."""
    return {k: headers[k] for k in ("Content-Type", "Content-Encoding") if headers.get(k)}


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with the openssl command."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key
