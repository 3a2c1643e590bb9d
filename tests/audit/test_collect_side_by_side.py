"""Sources are read side by side (audit.collect.side_by_side): the reads overlap, at most so many at
once, each in the audit's Decimal context, and what they return is gathered in the case's order, so
the collection is the one a read at a time gives. How many at once: $COSTAUDIT_READERS, else two
where the machine has more than two cores, else one (audit.collect.default_readers)."""
from __future__ import annotations

import decimal
import threading
import time

import pandas as pd
import pytest

from audit.case import load_case
from audit.collect import collect_sources, default_readers, side_by_side
from audit.money import use_context
from connectors.base import SourceSpec
from schemas.errors import UsageError
from tests.paths import ROOT


def specs(n: int) -> list[SourceSpec]:
    return [SourceSpec(f"s{i}", "billing", "focus", None, {}) for i in range(n)]


def test_reads_overlap_and_come_back_in_the_sources_order():
    """Two reads that each wait for the other can only end when they run at once; the later source
    ends first, and its result is still second."""
    meet = threading.Barrier(2, timeout=10)

    def read(spec):
        meet.wait()
        if spec.name == "s0":
            time.sleep(0.05)
        return spec.name

    assert side_by_side(specs(2), read, readers=2) == ["s0", "s1"]


def test_no_more_than_the_readers_at_once():
    running, peak, lock = [0], [0], threading.Lock()

    def read(spec):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return spec.name

    assert side_by_side(specs(7), read, readers=3) == [f"s{i}" for i in range(7)]
    assert peak[0] == 3
    peak[0] = 0
    assert side_by_side(specs(4), read, readers=1) == [f"s{i}" for i in range(4)] and peak[0] == 1


def test_each_read_has_the_audits_decimal_context():
    """A connector's Decimal arithmetic runs at the audit's 50 digits, not a new thread's default 28."""
    use_context()
    precisions = side_by_side(specs(3), lambda spec: decimal.getcontext().prec, readers=2)
    assert precisions == [50, 50, 50] and decimal.DefaultContext.prec == 28


def test_a_failed_read_is_raised_after_every_read_ends_the_first_sources_first():
    ended = []

    def read(spec):
        if spec.name in ("s1", "s3"):
            raise ValueError(spec.name)
        time.sleep(0.05)
        ended.append(spec.name)
        return spec.name

    with pytest.raises(ValueError, match="s1"):
        side_by_side(specs(4), read, readers=2)
    assert sorted(ended) == ["s0", "s2"]


def test_progress_names_each_source_as_it_starts_and_as_it_ends():
    heard = []
    side_by_side(specs(2), lambda spec: spec.name, heard.append, readers=2)
    starts = [h for h in heard if isinstance(h, SourceSpec)]
    ends = [h for h in heard if isinstance(h, str)]
    assert [s.name for s in starts] == ["s0", "s1"] or [s.name for s in starts] == ["s1", "s0"]
    assert sorted(e.split(" in ")[0] for e in ends) == ["read billing source s0", "read billing source s1"]
    assert all(e.endswith(" s") for e in ends)
    alone = []
    side_by_side(specs(1), lambda spec: spec.name, alone.append, readers=2)
    assert [type(h) for h in alone] == [SourceSpec]  # one source: its start says it all


def test_the_demo_reads_the_same_side_by_side_as_one_at_a_time(monkeypatch):
    """Billing, telemetry and profiles of the demo: the same frames, tables and order."""
    use_context()
    case = load_case(ROOT / "fixtures" / "demo")
    monkeypatch.setenv("COSTAUDIT_READERS", "3")
    together = collect_sources(case)
    monkeypatch.setenv("COSTAUDIT_READERS", "1")
    alone = collect_sources(case)
    assert [f.spec for f in together.frames] == [f.spec for f in alone.frames]
    assert len(together.frames) >= 3
    for a, b in zip(together.frames, alone.frames):
        assert a.sha256 == b.sha256 and a.rows == b.rows and a.covered == b.covered
        assert sorted(a.tables) == sorted(b.tables)
        for name in a.tables:
            pd.testing.assert_frame_equal(a.tables[name], b.tables[name])


def test_how_many_at_once(monkeypatch):
    """Two where cores are to spare; one on two cores, where both reads are bound by the CPU and
    overlapping them was measured slower; the variable above both."""
    monkeypatch.delenv("COSTAUDIT_READERS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert default_readers() == 2
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert default_readers() == 1
    monkeypatch.setattr("os.cpu_count", lambda: None)
    assert default_readers() == 1
    monkeypatch.setenv("COSTAUDIT_READERS", " 4 ")
    assert default_readers() == 4
    for bad in ("0", "two", "-1", "1.5"):
        monkeypatch.setenv("COSTAUDIT_READERS", bad)
        with pytest.raises(UsageError, match=r"COSTAUDIT_READERS=.*expected a whole number ≥ 1"):
            default_readers()
