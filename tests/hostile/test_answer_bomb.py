"""A Prometheus answer that is a gzip bomb: a few megabytes on the wire, gigabytes inflated.

Before: ``gzip.decompress`` of the whole body (MemoryError, or gigabytes of RSS). Now the body is
read and inflated up to MAX_ANSWER (connectors/telemetry/promhttp.py), then refused, not retried.
"""
from __future__ import annotations

import gzip
import http.server
import threading

import pytest

from connectors.errors import FatalSourceError
from connectors.telemetry.promhttp import MAX_ANSWER, PromClient, gunzip
from tests.hostile.harness import assert_named_error, costaudit, write_case

BOMB = gzip.compress(bytes(64 << 20), compresslevel=9) * 32          # 2 GiB inflated, ~2 MB sent


class BombHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request with the bomb, as gzip."""

    def _bomb(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(BOMB)))
        self.end_headers()
        self.wfile.write(BOMB)

    do_GET = do_POST = _bomb

    def log_message(self, *args):
        pass


@pytest.fixture()
def bomb_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), BombHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_client_refuses_the_bomb(bomb_url):
    client = PromClient(bomb_url, {})
    with pytest.raises(FatalSourceError, match="larger than 256 MiB decompressed"):
        client.query_range("up", "0", "60", 60)
    assert client.requests == 0


def test_gunzip_stops_at_the_limit():
    assert gunzip(gzip.compress(b"x" * 100) * 2, 200) == b"x" * 200
    assert gunzip(gzip.compress(b"x" * 100) * 2, 199) is None
    member = len(BOMB) // 32
    assert len(gunzip(BOMB[:member * 4], MAX_ANSWER)) == MAX_ANSWER
    assert gunzip(BOMB[:member * 5], MAX_ANSWER) is None


def test_validate_names_the_url(tmp_path, bomb_url):
    case = write_case(tmp_path / "case", extra=f'[[telemetry]]\nname = "prom"\nformat = "prometheus"\nurl = "{bomb_url}"\n')
    outcome = costaudit("validate", case, cwd=tmp_path)
    assert_named_error(outcome, bomb_url, "larger than 256 MiB")
