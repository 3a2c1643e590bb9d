"""Replaying the shared Azure LLM trace against a local OpenAI-compatible server (tests/servers/
openai_server.py, a real HTTP server with a set pace): TTFT / TPOT / ITL against that pace, the
stated prompt and output lengths served, repeats with a t-interval, late sends from a deliberately
slow sender, the exit code and first error of a target that fails every request, and the trace
reader's errors (file, row, column)."""
from __future__ import annotations

import json
import math
import time

import pytest
import typer
from typer.testing import CliRunner

from audit.cli.collect import ALL_FAILED, collect_command, render_collect
from collector.drive import drive
from collector.latency import late_sends, parse_goodput
from collector.profile import CollectConfig, collect_bundle
from collector.repeat import interval, t_quantile
from collector.replay import TraceReplay, payload, scale_of
from collector.trace_file import TraceFileError, read_azure_trace
from collector.traffic import Request
from schemas.errors import UsageError
from tests.paths import DATA
from tests.servers.openai_server import Pace, openai_server
from tests.servers.ports import free_port

TRAFFIC = DATA / "traffic"
CODE, CONV = TRAFFIC / "AzureLLMInferenceTrace_code.csv", TRAFFIC / "AzureLLMInferenceTrace_conv.csv"
PACE = Pace(prefill_s=0.020, decode_s=0.003)
SLICE = dict(start=0.0, duration=60.0, time_scale=0.04)      # the trace's first minute in 2.4 s
RUNS = 3


def app() -> typer.Typer:
    cli = typer.Typer()
    cli.command("collect")(collect_command)
    cli.command("noop")(lambda: None)
    return cli


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    """The code trace's first 60 s, 25 times faster, three runs, against the server in its own process."""
    out = tmp_path_factory.mktemp("replay")
    with openai_server(PACE, process=True) as url:
        started = time.perf_counter()
        doc = collect_bundle(CollectConfig(out=out, url=url, mode="completions", concurrency=[64], warmup=1,
                                           trace=TraceReplay(CODE, **SLICE), repeat=RUNS, progress=False,
                                           goodput={"ttft": 60, "tpot": 10}))
        doc["_wall_s"] = time.perf_counter() - started
    return out, doc


def test_shared_traces_read_whole():
    """Row counts and token sums as PROVENANCE.md gives them."""
    for path, rows, prompt, generated in ((CONV, 19366, 22_361_870, 4_088_665), (CODE, 8819, 18_059_974, 245_896)):
        trace = read_azure_trace(path)
        assert len(trace) == rows and trace[0].offset == 0.0
        assert sum(r.prompt_tokens for r in trace) == prompt and sum(r.generated_tokens for r in trace) == generated
        assert all(a.offset <= b.offset for a, b in zip(trace, trace[1:]))
    assert read_azure_trace(CODE)[-1].offset == pytest.approx(3435.948, abs=0.001)   # 18:17:03.98 → 19:14:19.93


def test_replay_serves_the_trace_at_the_set_pace(replay):
    out, doc = replay
    arrival = doc["arrival"]
    assert arrival["process"] == "trace" and arrival["requests"] == 63 and arrival["time_scale"] == 0.04
    assert arrival["stated_prompt_tokens"] == 147_578 and arrival["stated_generated_tokens"] == 1_478
    assert arrival["schedule_s"] <= 60 * 0.04
    for run in doc["sweep"][0]["runs"]:
        assert run["succeeded"] == 63 and run["error_rate"] == 0
        stated = run["llm"]["stated"]     # every stated length served: text prompts of N words, vLLM's forcing
        assert stated["output_length_mismatches"] == 0 and stated["prompt_length_mismatches"] == 0
        assert run["llm"]["total_output_tokens"] == 1_478 and run["llm"]["total_input_tokens"] == 147_578
    llm = doc["llm"]
    prefill, decode = PACE.prefill_s * 1000, PACE.decode_s * 1000
    assert prefill <= llm["ttft_ms"]["p50"] <= prefill + 25
    # a sleep never ends early, so the pace is a floor; a loaded machine adds scheduler delay on top, and
    # TPOT (e2el - ttft over n - 1 gaps) also carries the stream's close, so it is bounded by ITL from below
    tpot_mean = llm["tpot_ms"]["mean"]
    assert decode * 0.95 <= tpot_mean <= decode * 2
    assert tpot_mean >= llm["itl_ms"]["mean"] * 0.8
    assert llm["itl_ms"]["p50"] == pytest.approx(decode, abs=1.0)
    assert llm["itl_ms"]["n"] == RUNS * (1_478 - 63)              # one gap between each pair of tokens
    assert llm["e2el_ms"]["max"] >= prefill + decode * 141        # the 142-token request
    assert llm["output_throughput"] == pytest.approx(llm["request_throughput"] * 1478 / 63)
    late = [run["late"]["late_sends"] for run in doc["sweep"][0]["runs"]]
    assert doc["late"]["sent"] == RUNS * 63 and doc["late"]["late_sends"] == sum(late) < RUNS * 63 / 2
    assert doc["host_pre_ms"] is None and doc["host_post_ms"] is None     # not measured, never 0.0
    assert doc["host_reason"].startswith("not measured: the target's host work runs in the server")
    assert doc["copy_ms"]["measured"] is False
    good = llm["request_goodput"]
    assert good["slo_ms"] == {"ttft": 60, "tpot": 10} and good["met"] >= 0.9 * RUNS * 63
    text = render_collect(doc, out)
    assert "TTFT mean" in text and "late sends:" in text and "request goodput" in text
    assert doc["_wall_s"] < 30


def test_repeats_give_a_t_interval(replay):
    _, doc = replay
    rep = doc["repeat"]
    assert rep["runs"] == RUNS and "t-interval" in rep["method"]
    values = [r["llm"]["tpot_ms"]["mean"] for r in doc["sweep"][0]["runs"]]
    ci = rep["figures"]["tpot_mean_ms"]
    mean = sum(values) / RUNS
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (RUNS - 1))
    assert ci["n"] == RUNS and ci["mean"] == pytest.approx(mean)
    assert ci["half_width"] == pytest.approx(4.302653 * sd / math.sqrt(RUNS), rel=1e-6)
    assert ci["low"] <= mean <= ci["high"]
    assert rep["figures"]["request_throughput"]["low"] <= rep["figures"]["request_throughput"]["high"]


def test_t_quantiles_match_the_tables():
    for df, t in ((1, 12.7062), (2, 4.3027), (4, 2.7764), (10, 2.2281), (30, 2.0423), (120, 1.9799)):
        assert t_quantile(0.95, df) == pytest.approx(t, abs=1e-4)
    assert interval([5.0])["low"] is None and "one run" in interval([5.0])["reason"]
    assert interval([1.0, 3.0]) == pytest.approx({"n": 2, "mean": 2.0, "sd": math.sqrt(2),
                                                   "half_width": 12.7062 * 1.0, "low": 2 - 12.7062,
                                                   "high": 2 + 12.7062}, abs=1e-3)


def test_forcing_the_output_length_shows_when_it_is_not_asked(tmp_path):
    """The server stops at 8 tokens unless forced: with --force-output max_tokens the trace's longer
    outputs come back short and are counted; token-id prompts are exact."""
    replay_of = dict(start=0.0, duration=20.0, time_scale=0.05)
    with openai_server(Pace(prefill_s=0.001, decode_s=0.0005)) as url:
        capped = collect_bundle(CollectConfig(out=tmp_path / "a", url=url, concurrency=[32], warmup=0, progress=False,
                                              trace=TraceReplay(CODE, force="max_tokens", prompt_form="ids",
                                                                **replay_of)))
    rows = [r for r in read_azure_trace(CODE) if r.offset < 20]
    longer = sum(r.generated_tokens > 8 for r in rows)
    stated = capped["llm"]["stated"]
    assert stated["requests"] == len(rows) and stated["output_length_mismatches"] == longer > 0
    assert capped["generated_tokens"] == sum(min(r.generated_tokens, 8) for r in rows)
    assert stated["prompt_length_mismatches"] == 0
    assert payload("completions", 3, 0, "vllm") == {"prompt": "hello hello hello", "max_tokens": 1,
                                                    "min_tokens": 1, "ignore_eos": True}
    assert payload("chat", 2, 5, "none") == {"messages": [{"role": "user", "content": "hello hello"}]}
    with pytest.raises(UsageError, match="--prompt-form ids needs --mode completions"):
        payload("chat", 2, 5, "vllm", "ids")


def test_late_sends_from_a_slow_sender():
    """One sender that takes 40 ms a request, requests scheduled 10 ms apart: every request after
    the first is sent late, by about 30 ms more each; with a sender per request none is."""
    def slow(request: Request) -> None:
        time.sleep(0.040)

    queued = [Request(i, None, i * 0.010) for i in range(8)]
    drive(queued, slow, 1)
    late = late_sends(queued, 0.010)
    assert late["late_sends"] >= 7 and late["sent"] == 8      # the first may be late too on a busy machine
    assert late["send_lag_ms"]["max"] >= 7 * 30 * 0.9
    assert queued[-1].latency >= 0.040 * 8 - 0.070           # the wait counts in latency (from the schedule)
    spread = [Request(i, None, i * 0.010) for i in range(8)]
    drive(spread, slow, 8)
    assert late_sends(spread, 0.010)["late_sends"] <= 3


def test_target_failing_every_request_exits_non_zero(tmp_path):
    with openai_server(Pace(fail_status=404)) as url:
        result = CliRunner().invoke(app(), ["collect", "--out", str(tmp_path / "b"), "--url", url, "--arrival",
                                            "closed", "--requests", "5", "--no-progress"])
    assert result.exit_code == ALL_FAILED, result.output
    assert "every request failed (5 of 5); first error: HTTP 404 from" in result.output
    assert "the model 'missing' does not exist" in result.output and "Traceback" not in result.output
    doc = json.loads((tmp_path / "b" / "profile.json").read_text())
    assert doc["error_rate"] == 1.0 and doc["first_error"].startswith("HTTP 404")
    refused = CliRunner().invoke(app(), ["collect", "--out", str(tmp_path / "c"), "--url",
                                         f"http://127.0.0.1:{free_port()}", "--arrival", "closed",
                                         "--requests", "2", "--no-progress"])
    assert refused.exit_code == ALL_FAILED and "ConnectionRefusedError" in refused.output


def test_cli_replays_a_trace_and_refuses_a_bad_one(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,12,3\n"
                     "2023-11-16 18:17:04.0319600,7,2\n")
    with openai_server(Pace(prefill_s=0.001, decode_s=0.001)) as url:
        good = CliRunner().invoke(app(), ["collect", "--out", str(tmp_path / "b"), "--url", url, "--mode", "chat",
                                          "--trace", str(trace), "--rate-multiplier", "10", "--no-progress",
                                          "--goodput", "ttft:500 e2el:1000"])
    assert good.exit_code == 0, good.output
    doc = json.loads((tmp_path / "b" / "profile.json").read_text())
    assert doc["arrival"]["time_scale"] == pytest.approx(0.1) and doc["generated_tokens"] == 5
    assert doc["llm"]["request_goodput"]["met"] == 2 and "TPOT" in good.output
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,12,3\n"
                     "2023-11-16 18:17:04.0319600,7,-2\n")
    bad = CliRunner().invoke(app(), ["collect", "--out", str(tmp_path / "x"), "--url", "http://127.0.0.1:9",
                                     "--trace", str(trace), "--no-progress"])
    assert bad.exit_code == 1 and "Traceback" not in bad.output
    assert f"{trace}: row 3, column GeneratedTokens: not a token count: '-2'" in bad.output
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("text, row, column", [
    ("", 1, None),
    ("TIMESTAMP,ContextTokens\n2023-11-16 18:17:03,1\n", 1, "GeneratedTokens"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n", 2, None),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,5\n", 2, "GeneratedTokens"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,5,1\n\n2023-11-31 00:00:00,5,1\n", 4, "TIMESTAMP"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,0,1\n", 2, "ContextTokens"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1.5,1\n", 2, "ContextTokens"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.12x,1,1\n", 2, "TIMESTAMP"),
])
def test_trace_errors_name_file_row_and_column(tmp_path, text, row, column):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    with pytest.raises(TraceFileError) as caught:
        read_azure_trace(path)
    error = caught.value
    assert (error.path, error.row, error.column) == (str(path), row, column)
    assert str(error).startswith(f"{path}: row {row}")
    (tmp_path / "bin.csv").write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\n\xff\xfe,1,1\n")
    with pytest.raises(TraceFileError, match="row 2: byte 40 is not UTF-8"):
        read_azure_trace(tmp_path / "bin.csv")


def test_slices_scales_and_slos_refused_when_unusable(tmp_path):
    assert scale_of(None, 4.0) == 0.25 and scale_of(0.5, None) == 0.5 and scale_of(None, None) == 1.0
    with pytest.raises(UsageError, match="not both"):
        scale_of(0.5, 2.0)
    with pytest.raises(UsageError, match=r"no arrival in \[4000 s, 4010 s\) of trace time; the trace spans 0 to 3435"):
        TraceReplay(CODE, start=4000, duration=10).rows()
    with pytest.raises(UsageError, match="--time-scale"):
        TraceReplay(CODE, time_scale=0)
    assert parse_goodput("ttft:200 tpot:50,e2el:2000") == {"ttft": 200.0, "tpot": 50.0, "e2el": 2000.0}
    assert parse_goodput("time_to_first_token:100 inter_token_latency:3.4") == {"ttft": 100.0, "tpot": 3.4}
    with pytest.raises(UsageError, match="--goodput"):
        parse_goodput("latency:100")
    with pytest.raises(UsageError, match="completions or chat"):
        collect_bundle(CollectConfig(out=tmp_path / "j", url="http://127.0.0.1:9", mode="json",
                                     trace=TraceReplay(CODE, duration=1.0), progress=False))


def test_compare_names_trace_differences_readably():
    from decimal import Decimal

    from collector.stats import compare

    def bundle(scale):
        return {"arrival": {"process": "trace", "requests": 63, "time_scale": scale, "concurrency": [64],
                            "batch_sizes": [1]}, "payload_bytes": 40, "traffic_file_sha256": "ab" * 32,
                "sweep": [{"batch_size": 1, "concurrency": 64, "inferences_per_s": 20.0,
                           "latency_ms": {"p95": 80.0}, "error_rate": 0.0}]}

    result = compare(bundle(0.05), bundle(0.1), Decimal("2"), Decimal("2"))
    assert result["verdict"] == "not_comparable" and result["reason"] == "traffic differs: time scale 0.05 vs 0.1"
