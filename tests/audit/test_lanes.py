"""Sources read side by side (audit/lanes.py): billing in one lane, the others in another; outcomes in
the case's order, the Decimal context carried over, exceptions raised in the calling thread."""
from __future__ import annotations

import decimal
import threading
import time
from pathlib import Path

import pytest

from audit.lanes import read_in_lanes
from audit.money import use_context
from connectors.base import SourceSpec


def spec(name: str, kind: str) -> SourceSpec:
    return SourceSpec(name=name, kind=kind, format="x", path=Path(name))


SPECS = [spec("cur", "billing"), spec("prom", "telemetry"), spec("focus", "billing"), spec("trace", "profiles")]


def test_lanes_overlap_and_outcomes_keep_the_case_order():
    """A slow billing lane and a fast other lane: the reads overlap, the results come in spec order."""
    started, finished = {}, {}
    delay = {"cur": 0.4, "prom": 0.1, "focus": 0.1, "trace": 0.1}

    def read(s):
        started[s.name] = time.monotonic()
        time.sleep(delay[s.name])
        finished[s.name] = time.monotonic()
        return s.name

    began = time.monotonic()
    assert read_in_lanes(SPECS, read) == ["cur", "prom", "focus", "trace"]
    assert time.monotonic() - began < 0.55 + 0.3       # serially 0.7 s; side by side 0.5 s
    assert started["prom"] < finished["cur"]           # telemetry read while the CUR was
    assert started["focus"] >= finished["cur"]         # one billing reader at a time
    assert started["trace"] >= finished["prom"]


def test_one_lane_reads_in_the_calling_thread():
    names = read_in_lanes([spec("a", "billing"), spec("b", "billing")],
                          lambda s: threading.current_thread() is threading.main_thread())
    assert names == [True, True]


def test_the_decimal_context_of_the_caller_is_the_lanes():
    use_context()
    precisions = read_in_lanes(SPECS, lambda s: decimal.getcontext().prec)
    assert precisions == [decimal.getcontext().prec] * 4 == [50] * 4


def test_an_exception_is_raised_in_the_case_order():
    def read(s):
        if s.name in ("focus", "prom"):
            raise ValueError(s.name)
        return s.name

    with pytest.raises(ValueError, match="prom"):
        read_in_lanes(SPECS, read)


def test_a_lane_stops_at_its_exception():
    seen = []

    def read(s):
        seen.append(s.name)
        if s.name == "cur":
            raise KeyError("cur")
        return s.name

    with pytest.raises(KeyError):
        read_in_lanes(SPECS, read)
    assert "focus" not in seen and {"prom", "trace"} <= set(seen)
