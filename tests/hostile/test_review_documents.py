"""`costaudit review` on audit.json files that no audit writes (METHOD §10).

Before (found by a read-only check): an amount of 1e999 or 1e30, 10**400 requests, a daily list
that is a string, a day that is no date, ``lines`` or ``window`` of the wrong kind, JSON nested
100,000 deep each ended in a traceback; GPU-seconds or requests below zero, a day twice or outside
the window, a window that ends before it starts or cannot be read (the order check then passed),
projection bands out of order, a composition naming a service ``services`` lacks, a total 200 %
off its composition each gave a bridge or a verdict without a word; a 200 MB audit.json took
4.3 GB. Now each is one error naming the file and the key, exit 1, nothing written.
"""
from __future__ import annotations

import copy
import importlib
import json
from datetime import date, timedelta

import pytest
from typer.testing import CliRunner

from audit.cli import app
from tests.audit.review.documents import audit, component

PART = "platform_overhead.capacity_above_demand"
review_load = importlib.import_module("audit.review.load")  # the module (audit.review re-exports its load())


def daily() -> list[dict]:
    return [{"day": (date(2026, 8, 10) + timedelta(days=i)).isoformat(), "requests": "1000",
             "parts": {PART: {"cost": "200", "gpu_seconds": "100"}}} for i in range(10)]


def pair() -> tuple[dict, dict]:
    chat = {"requests": 1000, "components": {"gpu_busy": component("100", "50"), "line:egress": component("20")}}
    earlier = audit("q2", {"chat": chat}, options=[{"id": "right_size_replicas", "acts_on": PART,
                                                    "monthly_saving": {"low": "1", "expected": "2", "high": "3"},
                                                    "by_service": {"chat": {"low": "1", "expected": "2",
                                                                            "high": "3"}}}])
    later = audit("q3", {"chat": {**chat, "daily": daily()}}, window=("2026-07-01", "2026-10-01"),
                  shipped=[{"option": "right_size_replicas", "service": "chat", "date": "2026-08-15"}])
    return earlier, later


def run(tmp_path, earlier: dict, later: dict):
    paths = []
    for name, document in (("q2.json", earlier), ("q3.json", later)):
        path = tmp_path / name
        path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
        paths.append(path)
    return CliRunner().invoke(app, ["review", *map(str, paths), "--out", str(tmp_path / "out"), "--quiet"])


def set_at(document: dict, keys: tuple, value) -> dict:
    out = copy.deepcopy(document)
    here = out
    for key in keys[:-1]:
        here = here[key]
    here[keys[-1]] = value
    return out


LATER = {  # (keys to change in the later audit, value, words the error names)
    "total 1e999": (("total",), "1e999", "total"),
    "total 1e30": (("total",), "1e30", "past 10^15"),
    "composition 1e999": (("composition", "services", "chat"), "1e999", "composition.services.chat"),
    "requests 10**400": (("services", "chat", "requests"), 10 ** 400, "services.chat.requests"),
    "daily a string": (("services", "chat", "daily"), "x", "services.chat.daily is str"),
    "a day a string": (("services", "chat", "daily", 3), "x", "services.chat.daily[3] is str"),
    "parts a string": (("services", "chat", "daily", 6, "parts"), "x", "daily[6].parts"),
    "parts a list": (("services", "chat", "daily", 6, "parts"), [1, 2], "daily[6].parts"),
    "a part a string": (("services", "chat", "daily", 6, "parts", PART), "x", f"daily[6].parts.{PART}"),
    "a day no date": (("services", "chat", "daily", 3, "day"), "2026-13-45", "daily[3].day"),
    "a day outside the window": (("services", "chat", "daily", 3, "day"), "2030-01-01", "outside the window"),
    "a day twice": (("services", "chat", "daily", 3, "day"), "2026-08-12", "not after 2026-08-12"),
    "negative GPU-seconds": (("services", "chat", "daily", 6, "parts", PART, "gpu_seconds"), "-1e12", "negative"),
    "negative day requests": (("services", "chat", "daily", 6, "requests"), "-1000000", "negative"),
    "negative GPU quantity": (("services", "chat", "components", "gpu_busy", "quantity"), "-5", "negative"),
    "lines a string": (("lines",), "x", "lines is str"),
    "window a string": (("window",), "x", "window is str"),
    "window unreadable": (("window", "start"), "garbage", "window.start"),
    "window backwards": (("window", "end"), "2026-06-01T00:00:00Z", "window runs from"),
    "a service a string": (("services", "chat"), "x", "services.chat is str"),
    "buckets a string": (("buckets",), "x", "buckets is str"),
    "composition names no service": (("composition", "services", "chat2"), "0.00", "'chat2'"),
    "total off its composition": (("total",), "999999.99", "off its composition"),
}


@pytest.mark.parametrize("name", list(LATER))
def test_a_later_audit_no_audit_writes_is_refused_by_key(tmp_path, name):
    keys, value, words = LATER[name]
    earlier, later = pair()
    result = run(tmp_path, earlier, set_at(later, keys, value))
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("costaudit: error:")]
    assert len(errors) == 1 and str(tmp_path / "q3.json") in errors[0] and words in errors[0], result.output
    assert not (tmp_path / "out").exists()


def test_projection_bands_out_of_order_are_refused(tmp_path):
    earlier, later = pair()
    bad = set_at(earlier, ("options", 0, "by_service", "chat"), {"low": "90000", "expected": "40000", "high": "100"})
    result = run(tmp_path, bad, later)
    assert result.exit_code == 1 and "options[0].by_service.chat" in result.output and "low ≤ expected ≤ high" in result.output


def test_deep_nesting_and_size_are_refused_before_a_review(tmp_path, monkeypatch):
    earlier, later = pair()
    result = run(tmp_path, earlier, "[" * 100_000 + "]" * 100_000)
    assert result.exit_code == 1 and "Traceback" not in result.output and "nest" in result.output
    monkeypatch.setattr(review_load, "MAX_BYTES", 1000)
    result = run(tmp_path, earlier, later)
    assert result.exit_code == 1 and "at most 1,000 bytes" in result.output


def realised_of(tmp_path, earlier: dict, later: dict) -> dict:
    tmp_path.mkdir()
    result = run(tmp_path, earlier, later)
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / "out" / "review.json").read_text())["pairs"][0]["realised"][0]


def test_the_pair_itself_is_reviewed(tmp_path):
    """The well-formed pair: flat GPU-seconds per request around the ship date realise nothing, behind
    a projection of 1-3 a month; 100 -> 80 GPU-seconds a day after it realise 0.02 s a request x
    1,000 requests a day x 30.4375 days x 2.00 a GPU-second = 1,217.50 a month, ahead of it."""
    earlier, later = pair()
    flat = realised_of(tmp_path / "flat", earlier, later)
    assert (flat["realised"], flat["verdict"]) == ("0.00", "behind")
    assert (flat["evidence"]["days_before"], flat["evidence"]["days_after"]) == (5, 5)
    for day in later["services"]["chat"]["daily"]:
        if day["day"] >= "2026-08-15":
            day["parts"][PART] = {"cost": "160", "gpu_seconds": "80"}
    cut = realised_of(tmp_path / "cut", earlier, later)
    assert (cut["realised"], cut["verdict"]) == ("1217.50", "ahead")
    assert cut["evidence"]["per_request_after"] == "0.080000000000"
    assert cut["evidence"]["monthly_requests_after"] == "30437.50"
