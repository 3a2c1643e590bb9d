"""`costaudit compare` on bundles that are not what a collector run writes (METHOD §8).

Before (found by a read-only check): a top-level list, a string where a rate or a percentile
belongs, NaN, 10**400 or JSON nested 100,000 deep each ended in a Python traceback; a negative
latency, an infinite throughput, an error rate of 5, percentiles out of order or a point measured
twice each gave a verdict without a word; a JSON file that is no bundle at all was "not
comparable"; a 226 MB bundle took 2.1 GB. Now each is one error naming the file and the field,
exit 1, nothing on stdout. And costs per 1,000 that differ only past their sixth decimal were
compared rounded: B 2 % dearer at every point was a net gain.
"""
from __future__ import annotations

import json
from decimal import Decimal

import pytest
from typer.testing import CliRunner

from audit.cli import app
from collector.stats import compare
from connectors.profiles import bundle_doc


def bundle(**top) -> dict:
    point = {"batch_size": 1, "concurrency": 1, "requests": 60, "succeeded": 60, "error_rate": 0.0,
             "latency_ms": {"p50": 1.0, "p95": 2.0, "p99": 3.0}, "requests_per_s": 500.0,
             "inferences_per_s": 500.0, "goodput": {"requests_per_s": 500.0, "error_rate_bound": 0.01}}
    second = {**point, "batch_size": 8, "inferences_per_s": 4000.0}
    return {"costaudit_profile_bundle": 1, "arrival": {"process": "closed", "seed": 0, "requests": 60},
            "payload_bytes": 12, "traffic_file_sha256": None, "sweep": [point, second], **top}


def run(tmp_path, b_text: str | bytes, *prices: str):
    for name, text in (("a", json.dumps(bundle())), ("b", b_text)):
        (tmp_path / name).mkdir(exist_ok=True)
        data = text.encode() if isinstance(text, str) else text
        (tmp_path / name / "profile.json").write_bytes(data)
    prices = prices or ("2", "2")
    return CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"),
                                    "--price-a", prices[0], "--price-b", prices[1]])


def assert_refused(result, *words):
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, (TypeError, ValueError))
    errors = [line for line in result.output.splitlines() if line.startswith("costaudit: error:")]
    assert len(errors) == 1 and "verdict" not in result.output, result.output
    for word in words:
        assert word in errors[0], errors[0]


def with_point(**changes) -> str:
    doc = bundle()
    doc["sweep"][0] = {**doc["sweep"][0], **changes}
    return json.dumps(doc)


BAD = {
    "top-level list": ("[1, 2]", "holds list"),
    "top-level null": ("null", "holds NoneType"),
    "no bundle at all": ('{"hello": "world"}', "costaudit_profile_bundle"),
    "unknown version": (json.dumps(bundle(costaudit_profile_bundle=99)), "costaudit_profile_bundle is 99"),
    "arrival a string": (json.dumps(bundle(arrival="closed")), "column arrival"),
    "sweep a string": (json.dumps(bundle(sweep="x")), "column sweep"),
    "sweep empty": (json.dumps(bundle(sweep=[])), "column sweep"),
    "sweep missing": (json.dumps({k: v for k, v in bundle().items() if k != "sweep"}), "column sweep"),
    "a sweep point null": (json.dumps(bundle(sweep=[None])), "column sweep"),
    "batch size a list": (with_point(batch_size=[1]), "sweep[0].batch_size"),
    "batch size a string": (with_point(batch_size="1"), "sweep[0].batch_size"),
    "batch size missing": (with_point(batch_size=None), "sweep[0].batch_size"),
    "batch size negative": (with_point(batch_size=-1), "sweep[0].batch_size"),
    "batch size a boolean": (with_point(batch_size=True), "sweep[0].batch_size"),
    "throughput a string": (with_point(inferences_per_s="fast"), "sweep[0].inferences_per_s"),
    "throughput a boolean": (with_point(inferences_per_s=True), "sweep[0].inferences_per_s"),
    "throughput negative": (with_point(inferences_per_s=-100), "sweep[0].inferences_per_s"),
    "throughput 1e999": (with_point(inferences_per_s=float("inf")).replace("Infinity", "1e999"),
                         "sweep[0].inferences_per_s"),
    "throughput 10**400": (with_point(inferences_per_s=10**400), "sweep[0].inferences_per_s"),
    "throughput NaN": (with_point(inferences_per_s=float("nan")), "NaN is not a JSON number"),
    "throughput below the requests": (with_point(inferences_per_s=1.0), "below requests_per_s"),
    "latency a list": (with_point(latency_ms=[1, 2]), "sweep[0].latency_ms"),
    "latency negative": (with_point(latency_ms={"p50": 1, "p95": -5, "p99": 3}), "sweep[0].latency_ms.p95"),
    "latency a string": (with_point(latency_ms={"p50": 1, "p95": "12", "p99": 3}), "sweep[0].latency_ms.p95"),
    "percentiles out of order": (with_point(latency_ms={"p50": 100, "p95": 1, "p99": 0.5}), "out of order"),
    "error rate 5": (with_point(error_rate=5.0), "sweep[0].error_rate"),
    "error rate a string": (with_point(error_rate="0.5"), "sweep[0].error_rate"),
    "error rate negative": (with_point(error_rate=-0.5), "sweep[0].error_rate"),
    "bound a string": (with_point(goodput={"error_rate_bound": "x"}), "sweep[0].goodput.error_rate_bound"),
    "a point twice": (json.dumps(bundle(sweep=[bundle()["sweep"][0]] * 2)), "measured twice"),
    "nested 100,000 deep": ("[" * 100_000 + "]" * 100_000, "nest"),
    "not UTF-8": (b'{"sweep": "\xff"}', "not UTF-8"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bundle_a_collector_cannot_write_is_refused_by_field(tmp_path, name):
    text, word = BAD[name]
    assert_refused(run(tmp_path, text), str(tmp_path / "b" / "profile.json"), word)


def test_a_bundle_past_the_size_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle_doc, "MAX_BYTES", 1000)
    padded = bundle(padding=["x" * 10] * 200)
    assert_refused(run(tmp_path, json.dumps(padded)), "bytes", "at most 1,000 bytes")


@pytest.mark.parametrize("price", ["NaN", "Infinity", "sNaN", "1e999", "-1"])
def test_a_price_that_is_no_finite_amount_is_refused(tmp_path, price):
    result = run(tmp_path, json.dumps(bundle()), price, "2")
    assert result.exit_code != 0 and "Traceback" not in result.output and "finite number" in result.output


def test_minus_zero_is_zero(tmp_path):
    result = run(tmp_path, json.dumps(bundle()), "-0", "-0")
    assert "-0" not in result.output.replace("→ -", "")


def test_costs_that_differ_past_the_sixth_decimal_are_compared_exactly():
    """B 2 % dearer and 10 % faster at thousands of inferences a second: faster but dearer, never
    a net gain (before: both costs rounded to 0.000017 and B won on latency)."""
    a = bundle()
    b = bundle()
    for point in b["sweep"]:
        point["latency_ms"] = {k: v * 0.9 for k, v in point["latency_ms"].items()}
    for point in (*a["sweep"], *b["sweep"]):
        point["inferences_per_s"] = point["requests_per_s"] = 16_000.0 * point["batch_size"]
    result = compare(a, b, Decimal("1.00"), Decimal("1.02"))
    assert result["verdict"] == "no_gain"
    assert {p["verdict"] for p in result["points"]} == {"faster_but_dearer"}
    shown = result["points"][0]["cost_per_1000"]
    assert shown["a"] != shown["b"] and Decimal(shown["b"]) > Decimal(shown["a"])
    assert shown == {"a": "0.000017", "b": "0.000018"}
    # two costs that read alike at six places are shown to as many more as tell them apart
    closer = compare(a, b, Decimal("1.00"), Decimal("1.005"))
    assert closer["points"][0]["cost_per_1000"] == {"a": "0.00001736", "b": "0.00001745"}
    assert closer["verdict"] == "no_gain"


def test_slower_but_cheaper_is_said_and_close_latencies_read_apart(tmp_path):
    """The verifier's bundles: B 4.5 % slower (0.1574 against 0.1506 ms) and 30 % cheaper read
    "p95 0.2 ms → 0.2 ms … no gain"; now the latencies to the places that tell them apart and the
    verdict "slower but cheaper" (still no net gain: exit 3)."""
    b = bundle()
    for point in b["sweep"]:
        point["latency_ms"] = {"p50": 0.1, "p95": 0.1574, "p99": 0.2}
    a = bundle()
    for point in a["sweep"]:
        point["latency_ms"] = {"p50": 0.1, "p95": 0.1506, "p99": 0.2}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "profile.json").write_text(json.dumps(a))
    (tmp_path / "b" / "profile.json").write_text(json.dumps(b))
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b"),
                                      "--price-a", "2.0", "--price-b", "1.5"])
    assert result.exit_code == 3, result.output
    assert "p95     0.15 ms →     0.16 ms" in result.output and "slower but cheaper" in result.output
    assert {p["verdict"] for p in compare(a, b, Decimal("2.0"), Decimal("1.5"))["points"]} == {"slower_but_cheaper"}
