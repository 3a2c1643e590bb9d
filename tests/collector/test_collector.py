"""The collector on the CPU: an in-process MLP with a profiler window, a loopback OpenAI-style
streaming server (TTFT / ITL, a 1 s stall found in p99), NVML unmeasured, and the compare verdict."""
from __future__ import annotations

import gzip
import json
import socket
import sys
import threading
import time
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from pathlib import Path

import pytest

from collector.inprocess import Window
from collector.profile import CollectConfig, collect_bundle
from collector.stats import compare, cost_per_1000
from collector.traffic import Arrival, offsets, read_traffic
from connectors.base import ReadContext, SourceSpec
from schemas.errors import UsageError

TOKENS = 5


class Handler(BaseHTTPRequestHandler):
    """/v1/completions and /v1/chat/completions, streamed as SSE; an optional one-off stall."""

    delay = 0.005
    stall_at: int | None = None
    served = 0

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        cls.served += 1
        if cls.stall_at is not None and cls.served == cls.stall_at:
            time.sleep(1.0)
        if not body.get("stream"):
            return self._json({"usage": {"prompt_tokens": 3, "completion_tokens": 1}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chat = self.path.endswith("/chat/completions")
        for i in range(TOKENS):
            time.sleep(cls.delay)
            choice = {"delta": {"content": f"t{i}"}} if chat else {"text": f"t{i}"}
            self._event({"choices": [choice]})
        self._event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": TOKENS}})
        self.wfile.write(b"data: [DONE]\n\n")

    def _event(self, doc):
        self.wfile.write(b"data: " + json.dumps(doc).encode() + b"\n\n")
        self.wfile.flush()

    def _json(self, doc):
        data = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(threaded=True, delay=0.005, stall_at=None, port=0):
    """A loopback server in a daemon thread; returns (server, base url)."""
    handler = type("H", (Handler,), {"delay": delay, "stall_at": stall_at, "served": 0})
    cls = ThreadingHTTPServer if threaded else HTTPServer
    cls.request_queue_size = 256
    server = cls(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _close(server) -> None:
    server.shutdown()
    server.server_close()


DEMO = dict(function="collector.demo:mlp", pre="collector.demo:pre",
            post="collector.demo:post")


@pytest.fixture(scope="module")
def mlp_bundle(tmp_path_factory):
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("mlp")
    doc = collect_bundle(CollectConfig(out=out, **DEMO, arrival=Arrival("closed", requests=30),
                                       concurrency=[1, 2], batch_sizes=[1, 4], window=Window(1, 1, 3),
                                       progress=False))
    return out, doc


def test_inprocess_bundle_figures(mlp_bundle):
    out, doc = mlp_bundle
    assert json.loads((out / "profile.json").read_text()) == json.loads(json.dumps(doc, default=str))
    assert [(p["concurrency"], p["batch_size"]) for p in doc["sweep"]] == [(1, 1), (2, 1), (1, 4), (2, 4)]
    first = doc["sweep"][0]
    assert first["succeeded"] == 30 and first["error_rate"] == 0
    assert 0 < first["latency_ms"]["p50"] <= first["latency_ms"]["p99"]
    assert doc["sweep"][2]["inferences_per_s"] == pytest.approx(4 * doc["sweep"][2]["requests_per_s"])
    assert first["host_pre_ms"]["p50"] > 0 and first["host_post_ms"]["p50"] > 0 and first["host_reason"] is None
    assert first["copy_ms"] == {"measured": False, "reason": "unmeasured: no CUDA device"}
    assert doc["window"]["measured"] and doc["window"]["requests"] == 3
    assert doc["arrival"]["process"] == "closed" and doc["arrival"]["seed"] == 0


def _ctx():
    from datetime import datetime, timezone
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    return ReadContext(t, t, "USD")


def test_kineto_reads_the_collector_trace(mlp_bundle, tmp_path):
    from connectors.errors import InputError
    from connectors.profiles.bundle import ProfileBundleConnector
    from connectors.profiles.events import read_trace, request_spans
    from connectors.profiles.kineto import KinetoConnector

    out, _ = mlp_bundle
    starts, ends = request_spans(read_trace(out / "trace.json.gz"))
    assert starts.size == 3 and (ends > starts).all()
    with pytest.raises(InputError, match="no GPU kernel"):     # CPU only: no GPU work recorded
        KinetoConnector(SourceSpec("p", "profiles", "kineto", out / "trace.json.gz"), _ctx()).read()
    bundle = _with_synthetic_kernels(out, tmp_path / "bundle")
    frame = KinetoConnector(SourceSpec("p", "profiles", "kineto", bundle / "trace.json.gz"), _ctx()).read()
    row = frame.tables["profile"].iloc[0]
    assert row["gap_basis"] == "request_spans" and row["gap_ratio"] > 0
    frame = ProfileBundleConnector(SourceSpec("p", "profiles", "profile_bundle", bundle,
                                              {"service": "s"}), _ctx()).read()
    assert frame.tables["profile"].iloc[0]["gap_basis"] == "request_spans"
    assert frame.spec.options["requests"] == 3 and frame.spec.options["service"] == "s"
    assert frame.spec.path == bundle / "trace.json.gz"
    from audit.trace.findings import findings_from_profile
    assert isinstance(findings_from_profile(frame.spec.where), list)


def _with_synthetic_kernels(src: Path, dst: Path) -> Path:
    """A copy of the bundle whose trace has one synthetic 10 us kernel inside each request span."""
    dst.mkdir()
    (dst / "profile.json").write_text((src / "profile.json").read_text())
    doc = json.loads(gzip.open(src / "trace.json.gz").read())
    spans = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("costaudit.request")]
    for e in spans:
        doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "synthetic_gemm", "pid": 0,
                                   "tid": 7, "ts": e["ts"] + 1, "dur": 10,
                                   "args": {"device": 0, "stream": 7}})
    with gzip.open(dst / "trace.json.gz", "wt") as handle:
        json.dump(doc, handle)
    return dst


def test_http_streaming_ttft_and_itl(tmp_path):
    server, url = serve(delay=0.01)
    try:
        doc = collect_bundle(CollectConfig(out=tmp_path, url=url, mode="completions",
                                           arrival=Arrival("closed", requests=12), concurrency=[3],
                                           progress=False, warmup=1))
    finally:
        _close(server)
    assert doc["succeeded"] == 12 and doc["generated_tokens"] == 12 * TOKENS
    assert doc["prompt_tokens"] == 36
    assert doc["ttft_ms"]["p50"] >= 9 and doc["itl_ms"]["p50"] == pytest.approx(10, abs=8)
    assert doc["latency_ms"]["p50"] >= doc["ttft_ms"]["p50"]
    assert doc["window"]["measured"] is False and "another process" in doc["window"]["reason"]
    assert not (tmp_path / "trace.json.gz").exists()


def test_http_chat_and_json_modes(tmp_path):
    server, url = serve(delay=0.0)
    try:
        chat = collect_bundle(CollectConfig(out=tmp_path / "c", url=url, mode="chat", warmup=0,
                                            arrival=Arrival("closed", requests=4), progress=False))
        plain = collect_bundle(CollectConfig(out=tmp_path / "j", url=url + "/score", mode="json", warmup=0,
                                             arrival=Arrival("closed", requests=4), progress=False))
    finally:
        _close(server)
    assert chat["generated_tokens"] == 4 * TOKENS and chat["ttft_ms"] is not None
    assert plain["succeeded"] == 4 and plain["ttft_ms"] is None and plain["prompt_tokens"] == 12


def test_open_loop_stall_shows_in_p99(tmp_path):
    """A single-worker server stalls once for 1 s: requests scheduled behind it wait, and since
    latency counts from the scheduled send time the stall reaches p99 (no coordinated omission)."""
    server, url = serve(threaded=False, delay=0.0, stall_at=30)
    try:
        doc = collect_bundle(CollectConfig(out=tmp_path, url=url, mode="completions", warmup=0,
                                           arrival=Arrival("poisson", rate=100, seed=7, requests=200),
                                           concurrency=[64], progress=False))
    finally:
        _close(server)
    assert doc["succeeded"] == 200
    assert doc["latency_ms"]["p99"] >= 800 and doc["latency_ms"]["max"] >= 950
    assert doc["latency_ms"]["p50"] < 500
    assert doc["arrival"] == {"process": "poisson", "seed": 7, "requests": 200, "concurrency": [64],
                              "rate_per_s": 100, "batch_sizes": [1], "repeat": 1}


def test_http_cold_start(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = f"{sys.executable} {Path(__file__).resolve()} {port}"
    doc = collect_bundle(CollectConfig(out=tmp_path, url=f"http://127.0.0.1:{port}", cold_command=command,
                                       arrival=Arrival("closed", requests=3), progress=False, warmup=0,
                                       cold_timeout=20))
    assert doc["cold_start"]["measured"] and 0 < doc["cold_start"]["seconds"] < 20
    assert doc["succeeded"] == 3


def test_nvml_unmeasured_without_gpu():
    from collector.nvml import Sampler, nvml_open

    handle, reason = nvml_open()
    if handle:
        pytest.skip("this host has NVML and a GPU")
    sampler = Sampler(interval=0.01).start()
    time.sleep(0.05)
    sampler.stop()
    nvml = sampler.summary()["nvml"]
    assert nvml == {"measured": False, "reason": reason} and reason.startswith("unmeasured: ")
    assert sampler.summary()["host_cpu"]["measured"]


def test_schedules_are_seeded_and_replay_reads_jsonl(tmp_path):
    a = offsets(Arrival("gamma", rate=50, shape=0.5, seed=3, requests=500))
    assert (a == offsets(Arrival("gamma", rate=50, shape=0.5, seed=3, requests=500))).all()
    assert a[0] == 0 and 500 / a[-1] == pytest.approx(50, rel=0.25)
    path = tmp_path / "t.jsonl"
    path.write_text('{"t": 0.2, "payload": {"p": 2}}\n\n{"t": 0.0, "payload": {"p": 1}}\n')
    assert read_traffic(path) == [(0.0, {"p": 1}), (0.2, {"p": 2})]
    path.write_text('{"payload": 1}\n')
    with pytest.raises(UsageError, match="t.jsonl:1"):
        read_traffic(path)


def test_replay_drives_the_callable(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"t": i * 0.01, "payload": f"x{i}"}) + "\n" for i in range(10)))
    doc = collect_bundle(CollectConfig(out=tmp_path / "b", function="json:dumps", traffic=path, window=None,
                                       progress=False, warmup=0, post=None))
    assert doc["succeeded"] == 10 and doc["arrival"]["process"] == "replay"
    assert doc["traffic_file_sha256"] and doc["window"]["measured"] is False


def _bundle(points, rate=10):
    return {"costaudit_profile_bundle": 1, "arrival": {"process": "poisson", "rate_per_s": rate, "seed": 0, "requests": 100,
                        "concurrency": 1}, "payload_bytes": 10, "traffic_file_sha256": None,
            "sweep": [{"batch_size": b, "concurrency": 1, "inferences_per_s": t,
                       "latency_ms": {"p95": l}, "error_rate": 0.0} for b, t, l in points]}


def test_cost_per_1000_and_compare_verdict():
    assert cost_per_1000(Decimal("3.6"), 10.0) == Decimal("0.100000")
    assert cost_per_1000(Decimal("3.6"), 0.0) is None
    a = _bundle([(1, 10.0, 100.0), (8, 80.0, 300.0)])
    b = _bundle([(1, 40.0, 20.0), (8, 90.0, 400.0)])
    result = compare(a, b, Decimal("1"), Decimal("3"), "p95")
    assert result["verdict"] == "mixed"
    assert result["holds_at_batch_sizes"] == [1] and result["inverts_at_batch_sizes"] == [8]
    first, second = result["points"]
    assert first["cost_per_1000"] == {"a": "0.027778", "b": "0.020833"} and first["verdict"] == "net_gain"
    assert second["verdict"] == "no_gain"
    assert compare(a, a, Decimal("1"), Decimal("1"))["verdict"] == "no_gain"
    differs = compare(a, _bundle([(1, 10.0, 50.0)], rate=20), Decimal("1"), Decimal("1"))
    assert differs["verdict"] == "not_comparable"
    assert differs["reason"] == "traffic differs: rate per s 10 vs 20"      # readable, not Python reprs


def test_compare_weighs_only_what_was_measured_at_the_fixed_error_rate():
    """METHOD §8: successful requests per second at a fixed error rate, under identical traffic.
    Before, B failing half its requests was a net gain on its cheaper price, a B that served nothing
    was "no gain, inverts at 1, 8", and traffic that differed still listed where the gain held."""
    a = _bundle([(1, 10.0, 100.0), (8, 80.0, 300.0)])
    failing = _bundle([(1, 40.0, 20.0), (8, 90.0, 200.0)])
    for point in failing["sweep"]:
        point["error_rate"] = 0.5
    result = compare(a, failing, Decimal("2"), Decimal("0.5"))
    assert result["verdict"] == "no_gain" and result["holds_at_batch_sizes"] == []
    assert result["inverts_at_batch_sizes"] == [1, 8]
    assert result["points"][0]["reason"] == "B's error rate 0.5000 exceeds the bound 0.01: it serves nothing at the fixed error rate"
    # the bound the runs were held to, the stricter of the two
    for point in failing["sweep"]:
        point["goodput"] = {"error_rate_bound": 0.6}
    assert compare(a, failing, Decimal("2"), Decimal("0.5"))["verdict"] == "no_gain"
    for point in a["sweep"]:
        point["goodput"] = {"error_rate_bound": 0.6}
    assert compare(a, failing, Decimal("2"), Decimal("0.5"))["verdict"] == "net_gain"
    # A over its bound: nothing to weigh B against
    assert compare(failing, a, Decimal("1"), Decimal("1"))["verdict"] == "no_gain"  # bound 0.6 on both
    del a["sweep"][0]["goodput"]
    back = compare(failing, a, Decimal("1"), Decimal("1"))
    assert back["points"][0]["verdict"] == "not_measured" and "A's error rate 0.5000" in back["points"][0]["reason"]

    served_nothing = _bundle([(1, 0.0, None), (8, 0.0, None)])
    nothing = compare(a, served_nothing, Decimal("1"), Decimal("1"))
    assert nothing["verdict"] == "not_measured" and nothing["inverts_at_batch_sizes"] == []
    assert nothing["not_measured_at_batch_sizes"] == [1, 8] and "B served no request" in nothing["reason"]
    half = _bundle([(1, 40.0, 20.0), (8, 0.0, None)])
    partly = compare(_bundle([(1, 10.0, 100.0), (8, 80.0, 300.0)]), half, Decimal("1"), Decimal("1"))
    assert partly["verdict"] == "mixed" and partly["holds_at_batch_sizes"] == [1]
    assert partly["inverts_at_batch_sizes"] == [] and partly["reason"].startswith("not weighed at batch sizes 8")

    differs = compare(_bundle([(1, 10.0, 100.0)]), _bundle([(1, 40.0, 20.0)], rate=20), Decimal("1"), Decimal("1"))
    assert differs["verdict"] == "not_comparable"
    assert differs["holds_at_batch_sizes"] == differs["inverts_at_batch_sizes"] == []
    assert [p["verdict"] for p in differs["points"]] == ["not_comparable"]
    assert differs["points"][0]["cost_per_1000"]["b"] is not None  # the figures are still shown


def test_compare_cli(tmp_path):
    import typer
    from typer.testing import CliRunner

    from audit.cli.compare import compare_command

    app = typer.Typer()
    app.command("compare")(compare_command)
    app.command("noop")(lambda: None)
    for name, points in (("a", [(1, 10.0, 100.0)]), ("b", [(1, 20.0, 80.0)])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "profile.json").write_text(json.dumps(_bundle(points)))
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"),
                                      "--price-a", "2", "--price-b", "2"])
    assert result.exit_code == 0, result.output
    assert "verdict: net_gain" in result.output and "holds at batch sizes: 1; inverts at: none" in result.output
    assert "[" not in result.output and "None" not in result.output


if __name__ == "__main__":          # the cold-start test's server: python tests/test_collector.py PORT
    time.sleep(0.3)
    server, _ = serve(port=int(sys.argv[1]), delay=0.0)
    time.sleep(30)
