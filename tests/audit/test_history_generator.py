"""fixtures/make_history.py: deterministic bytes, committed files that match it, and a truth whose
identities hold (METHOD §10: effects add up to each service's change, the steps run from the earlier
total to the later one, compositions and months foot)."""
from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from tests.paths import FIXTURES, ROOT

GENERATOR = FIXTURES / "make_history.py"
COMMITTED = FIXTURES / "history"
BUCKETS = {"model_compute", "serving_path", "platform_overhead", "unattributed"}


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def truth() -> dict:
    return json.loads((COMMITTED / "truth.json").read_text())


@pytest.mark.slow
def test_regenerating_gives_the_committed_bytes(tmp_path):
    proc = subprocess.run([sys.executable, str(GENERATOR), "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    fresh, committed = files_of(tmp_path), files_of(COMMITTED)
    assert sorted(fresh) == sorted(committed) == [
        "PROVENANCE.md", "q2/billing/focus_2026-04_2026-06.csv.gz", "q2/case.toml", "q2/telemetry/metrics.om.gz",
        "q3/billing/focus_2026-07_2026-09.csv.gz", "q3/case.toml", "q3/telemetry/metrics.om.gz", "truth.json",
    ]
    for name in fresh:
        assert fresh[name] == committed[name], f"{name} differs from the committed file (regenerate it)"
    assert sum(len(b) for b in fresh.values()) < 6_000_000


@pytest.mark.parametrize("quarter", ["q2", "q3"])
def test_quarter_foots(truth, quarter):
    q = truth[quarter]
    total = Decimal(q["total"])
    assert set(q["buckets"]) == BUCKETS
    assert sum(Decimal(b["amount"]) for b in q["buckets"].values()) == total
    assert sum(Decimal(m["total"]) for m in q["months"]) == total  # the quarter is the sum of its rounded months
    for b in BUCKETS:
        assert sum(Decimal(m["buckets"][b]["amount"]) for m in q["months"]) == Decimal(q["buckets"][b]["amount"])
    for m in q["months"]:
        assert sum(Decimal(m["buckets"][b]["amount"]) for b in BUCKETS) == Decimal(m["total"])
    comp = q["composition"]
    members = list(comp["services"].values()) + [comp["unattributed"], comp["unallocated"]]
    assert sum(Decimal(v) for v in members) == Decimal(comp["total"]) == total
    for name, s in q["services"].items():
        own_shared = Decimal(s["own"]) + Decimal(s["shared"])
        assert abs(sum(Decimal(c["cost"]) for c in s["components"].values()) - own_shared) < Decimal("1e-9"), name
        assert abs(Decimal(s["total_cost"]) - Decimal(comp["services"][name])) <= Decimal("0.01")
        assert s["requests"] == sum(d["requests"] for d in s["daily"]) > 0


def test_bridge_runs_from_total_to_total(truth):
    bridge = truth["bridge"]
    assert bridge["from_total"] == truth["q2"]["total"] and bridge["to_total"] == truth["q3"]["total"]
    steps = sum(Decimal(s["amount"]) for s in bridge["steps"])
    assert steps == Decimal(bridge["to_total"]) - Decimal(bridge["from_total"])
    assert {s["id"] for s in bridge["steps"] if s["kind"] == "service"} == {"rerank/service"}
    for name, s in bridge["services"].items():
        rounded = sum(Decimal(v) for v in s["effects"].values())
        change = Decimal(truth["q3"]["composition"]["services"][name]) - Decimal(truth["q2"]["composition"]["services"][name])
        assert rounded == Decimal(s["change"]) == change, name
        assert abs(sum(Decimal(v) for v in s["effects_exact"].values()) - Decimal(s["exact_change"])) < Decimal("1e-9")


def effects(q0: int, c0: dict, q1: int, c1: dict) -> dict[str, Fraction]:
    """METHOD §10 written out again, independently of the generator's code."""
    out = dict.fromkeys(("volume", "price", "efficiency", "overhead"), Fraction(0))
    u0 = sum(Fraction(c["cost"]) for c in c0.values()) / q0
    out["volume"] = (q1 - q0) * u0
    for k in set(c0) | set(c1):
        a, b = c0.get(k), c1.get(k)
        n0, n1 = (Fraction(a["quantity"]) if a else Fraction(0)), (Fraction(b["quantity"]) if b else Fraction(0))
        p1 = Fraction(b["cost"]) / n1 if n1 else Fraction(a["cost"]) / n0
        p0 = Fraction(a["cost"]) / n0 if n0 else p1
        out["price"] += q1 * (p1 - p0) * n0 / q0
        out["efficiency" if k == "gpu_busy" else "overhead"] += q1 * p1 * (n1 / q1 - n0 / q0)
    return out


@pytest.mark.parametrize("service", ["chat", "embed"])
def test_effects_follow_method_10(truth, service):
    s0, s1 = truth["q2"]["services"][service], truth["q3"]["services"][service]
    got = effects(s0["requests"], s0["components"], s1["requests"], s1["components"])
    want = truth["bridge"]["services"][service]["effects_exact"]
    for k, v in got.items():
        assert abs(Decimal(v.numerator) / Decimal(v.denominator) - Decimal(want[k])) < Decimal("1e-6"), k
    if service == "embed":  # no price planted on the g6e nodes: its price effect is nil
        assert Decimal(truth["bridge"]["services"]["embed"]["effects"]["price"]) == 0


def test_realised_saving_from_the_later_days(truth):
    (real,) = truth["realised"]
    assert (real["option"], real["service"], real["shipped"]) == ("right_size_replicas", "chat", "2026-08-15")
    days = truth["q3"]["services"]["chat"]["daily"]
    before = [d for d in days if d["day"] < real["shipped"]]
    after = [d for d in days if d["day"] >= real["shipped"]]

    def seconds(ds):
        return sum(Fraction(d["parts"][real["part"]]["gpu_seconds"]) for d in ds)
    x_b = seconds(before) / sum(d["requests"] for d in before)
    x_a = seconds(after) / sum(d["requests"] for d in after)
    p_a = sum(Fraction(d["parts"][real["part"]]["cost"]) for d in after) / seconds(after)
    q_m = Fraction(sum(d["requests"] for d in after)) * Fraction("30.4375") / len(after)
    saving = (x_b - x_a) * p_a * q_m
    assert abs(Decimal(saving.numerator) / Decimal(saving.denominator) - Decimal(real["realised_monthly"])) < Decimal("0.01")
    assert real["inputs"]["days_before"] == len(before) == 45 and real["inputs"]["days_after"] == len(after) == 47
    assert truth["planted"]["shipped"]["gpus_released"] == 8


def test_cases_name_what_shipped_and_the_new_service():
    q2, q3 = ((COMMITTED / q / "case.toml").read_text() for q in ("q2", "q3"))
    assert "[[shipped]]" not in q2 and "[services.rerank]" not in q2
    assert 'option = "right_size_replicas"' in q3 and 'date = "2026-08-15"' in q3 and "[services.rerank]" in q3
    for text in (q2, q3):
        profile = text.split('path = "', 3)[3].split('"')[0]
        assert (COMMITTED / "q2" / profile).resolve().is_file(), profile
