"""A window starting and ending between a request counter's samples (cloudgen eks 8201, scraped every
15 minutes, audited 06:10-18:10): the counters are differenced between their samples, never
extrapolated (METHOD §4), so the requests are those of 06:15-18:00 while the cost is the whole 12 h.
Before, nothing beside the unit cost said so (only sources[].covered); chat's and embed's cost per
request came out about 2 % high without a word. The reason now names the span counted and its share;
the access log, which counts by line time, and a window on the samples say nothing of the kind."""
from __future__ import annotations

import decimal
from pathlib import Path

import pytest

from benchmarks.cloudgen.generate import generate
from benchmarks.cloudgen_check import audit_document

SPAN = ("its requests are counted by prometheus-export between its samples from 2026-09-01 06:15 to "
        "2026-09-01 18:00 UTC, 97.9 % of the window (counters are never extrapolated): its unit costs divide the "
        "whole window's cost by the requests of that part")


@pytest.fixture(scope="module")
def eks(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("eks8201") / "case"
    with decimal.localcontext():  # cloudgen sets its own precision
        generate("eks", 8201, folder)
    return folder


def windowed(eks: Path, window: str) -> dict:
    case = eks / "case.toml"
    text = case.read_text(encoding="utf-8")
    case.write_text(text.replace('window = ["2026-09-01", "2026-09-02"]', window), encoding="utf-8")
    try:
        return audit_document(eks)
    finally:
        case.write_text(text, encoding="utf-8")


def test_a_window_between_samples_says_what_part_the_counters_count(eks):
    services = windowed(eks, 'window = ["2026-09-01T06:10:00", "2026-09-01T18:10:00"]')["services"]
    assert services["chat"]["requests"] == 73846964
    assert services["chat"]["reason"].startswith(SPAN + "; ")
    assert services["embed"]["reason"].startswith(SPAN + "; ")
    assert "counted by" not in services["gateway"]["reason"]


def test_a_window_on_the_samples_says_nothing_of_it(eks):
    services = windowed(eks, 'window = ["2026-09-01T06:00:00", "2026-09-01T18:00:00"]')["services"]
    assert not any("between its samples" in (s["reason"] or "") for s in services.values())


def test_the_span_counted_keeps_the_seconds_of_its_samples():
    """Counters sampled at 00:14:50 (a verifier's find): before, the reason printed 00:14; now 00:14:50
    (a time on the minute keeps its short form)."""
    from datetime import datetime, timezone
    from types import SimpleNamespace

    from audit.audit_json_units import uncounted_span

    def utc(*hms):
        return datetime(2026, 9, 1, *hms, tzinfo=timezone.utc)

    frame = SimpleNamespace(covered=(utc(0, 14, 50), utc(23, 0)), spec=SimpleNamespace(name="prom"))
    result = SimpleNamespace(collected=SimpleNamespace(frames=[frame]),
                             case=SimpleNamespace(start=utc(0), end=datetime(2026, 9, 2, tzinfo=timezone.utc)))
    t = SimpleNamespace(requests=1, counted_by_logs=False, sources=frozenset({"prom"}))
    assert uncounted_span(result, t) == [
        "its requests are counted by prom between its samples from 2026-09-01 00:14:50 to 2026-09-01 23:00 UTC, "
        "94.8 % of the window (counters are never extrapolated): its unit costs divide the whole window's cost by "
        "the requests of that part"]
