"""The batching model (audit/pricing/batching.py, METHOD §7): a generated sweep with a known answer,
the bundle reader's sweep table, the demo run end to end with a bundle, and the missing pieces."""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from audit.normalised import SWEEP_COLUMNS
from audit.pricing import Modelled
from audit.pricing.assumed import MISSING
from audit.pricing.batching import ServiceBatch, batching
from connectors.base import ReadContext, SourceSpec
from connectors.profiles.bundle import ProfileBundleConnector
from tests.builders import profile_bundle

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "fixtures" / "demo"
DEMO_TRACE = DEMO / "profiles" / "h100_qwen1.5-0.5b-chat.prefill_decode.derived.json.gz"
#: throughput doubles from batch 4 to 16 within 100 ms at p95; batch 32 is faster but breaks the bound
THROUGHPUT = {1: 30.0, 2: 55.0, 4: 100.0, 8: 150.0, 16: 200.0, 32: 260.0}
P95 = {1: 10.0, 2: 12.0, 4: 20.0, 8: 40.0, 16: 80.0, 32: 150.0}


def sweep_points(slo_ms: float | None = 100.0) -> list[dict]:
    """profile.json sweep points as collector.profile.sweep_point writes them (concurrency 1 and 2)."""
    points = []
    for batch, rate in THROUGHPUT.items():
        for concurrency, share in ((1, 0.9), (2, 1.0)):
            points.append({"concurrency": concurrency, "batch_size": batch, "requests": 64, "succeeded": 64,
                           "error_rate": 0.0, "inferences_per_s": rate * share, "requests_per_s": rate * share / batch,
                           "latency_ms": {"p50": P95[batch] / 2, "p95": P95[batch], "p99": P95[batch] * 1.1,
                                          "max": P95[batch] * 1.2, "mean": P95[batch] / 2}})
    return points


def sweep_frame(slo_ms: float | None = 100.0) -> pd.DataFrame:
    rows = [{"batch_size": p["batch_size"], "concurrency": p["concurrency"], "requests": p["requests"],
             "error_rate": p["error_rate"], "inferences_per_s": p["inferences_per_s"],
             "latency_p50_ms": p["latency_ms"]["p50"], "latency_p95_ms": p["latency_ms"]["p95"],
             "latency_p99_ms": p["latency_ms"]["p99"], "slo_ms": slo_ms, "max_error_rate": 0.01}
            for p in sweep_points(slo_ms)]
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def given(running: float | None = 4.0, cap=Decimal(900), bound: float | None = 100.0) -> ServiceBatch:
    return ServiceBatch("chat", sweep_frame(bound), "chat-bundle", running, "vllm:num_requests_running (test)",
                        Decimal(1000), Decimal(100), cap, bound, "collector bundle slo_ms (chat-bundle)")


def test_known_answer_half_the_gpus_at_the_best_batch_within_the_bound():
    found = batching([given(cap=Decimal(900))])
    assert isinstance(found, Modelled)
    # servers run 4 (100/s); best within 100 ms is 16 (200/s): GPUs needed 0.5 of now, saving 1000 × 0.5
    assert found.saving["expected"] == Decimal(500)
    # low: the best replaced by its within-bound neighbour, batch 8 (150/s): 1000 × (1 − 100/150)
    assert found.saving["low"] == Decimal(1000) * (1 - Decimal(100) / Decimal(150))
    # high: running batch 4 is a sweep point, so the floor gives the same throughput now
    assert found.saving["high"] == Decimal(500)
    inputs = {name: value for name, value, _ in found.inputs}
    assert inputs["chat: best batch within the bound"] == "16 (batch size)"
    assert inputs["chat: GPUs needed at the best batch ÷ now"] == "0.5000"
    assert inputs["chat: GPU-hours needed at the best batch"] == "50.00"
    assert all(source for _, _, source in found.inputs)


def test_saving_is_capped_by_the_in_flight_idle_and_interpolates_the_running_batch():
    capped = batching([given(cap=Decimal(300))])
    assert isinstance(capped, Modelled) and capped.saving["expected"] == Decimal(300)
    between = batching([given(running=6.0)])  # halfway 4 → 8: 125/s now; floor (batch 4) 100/s
    assert isinstance(between, Modelled)
    assert between.saving["expected"] == Decimal(1000) * (1 - Decimal(125) / Decimal(200))
    assert between.saving["high"] == Decimal(500)


def test_missing_pieces_stay_assumed_with_the_precise_reason():
    assert batching([]) == MISSING["batching"]
    assert "batch the servers run is not measured" in str(batching([given(running=None)]))
    assert "names no latency bound" in str(batching([given(bound=None)]))
    assert "outside the swept batch sizes 1–32" in str(batching([given(running=64.0)]))
    assert "no sweep point lies within the latency bound of 5 ms" in str(batching([given(bound=5.0)]))


def bundle(folder: Path, points: list[dict] | None, slo_ms: float | None = 100.0) -> Path:
    """A tests.builders bundle around the demo's trace, with the collector's sweep and bound added."""
    out = profile_bundle(DEMO_TRACE, folder)
    doc = json.loads((out / "profile.json").read_text())
    if points is not None:
        doc.update(sweep=points, slo_ms=slo_ms, max_error_rate=0.01)
    (out / "profile.json").write_text(json.dumps(doc))
    return out


def read_bundle(folder: Path):
    ctx = ReadContext(datetime(2026, 9, 1, tzinfo=timezone.utc), datetime(2026, 10, 1, tzinfo=timezone.utc), "USD")
    return ProfileBundleConnector(SourceSpec("b", "profiles", "profile_bundle", folder), ctx).read()


def test_bundle_reader_hands_on_the_sweep(tmp_path):
    frame = read_bundle(bundle(tmp_path / "b", sweep_points()))
    sweep = frame.tables["sweep"]
    assert list(sweep.columns) == SWEEP_COLUMNS and len(sweep) == 12
    row = sweep.loc[(sweep["batch_size"] == 16) & (sweep["concurrency"] == 2)].iloc[0]
    assert row["inferences_per_s"] == 200.0 and row["latency_p95_ms"] == 80.0 and row["slo_ms"] == 100.0
    assert read_bundle(bundle(tmp_path / "none", None)).tables["sweep"].empty


def demo_with_bundle(folder: Path, points: list[dict] | None) -> Path:
    """The demo case with its chat profile given as a collector bundle."""
    case = folder / "case"
    shutil.copytree(DEMO, case)
    bundle(case / "bundles" / "chat", points)
    text = (case / "case.toml").read_text()
    fmt, path = 'format = "kineto"', 'path = "profiles/h100_qwen1.5-0.5b-chat.prefill_decode.derived.json.gz"'
    assert text.count(fmt) == 1 and text.count(path) == 1
    text = text.replace(fmt, 'format = "profile_bundle"').replace(path, 'path = "bundles/chat"')
    (case / "case.toml").write_text(text)
    return case


@pytest.fixture(scope="module")
def demo_bundle_run(tmp_path_factory):
    from audit.case import load_case
    from audit.pipeline import run_audit
    return run_audit(load_case(demo_with_bundle(tmp_path_factory.mktemp("batching"), sweep_points())))


def test_bundle_reaches_the_model_through_run_audit(demo_bundle_run):
    result = demo_bundle_run
    option = next(o for o in result.options if o.id == "batching_limits")
    assert option.basis == "modelled", option.basis_note
    inputs = {name: (value, source) for name, value, source in option.inputs}
    running = float(inputs["chat: batch the servers run"][0])
    assert "vllm:num_requests_running" in inputs["chat: batch the servers run"][1]
    # the known curve at the servers' running batch, against the best within the bound (batch 16, 200/s)
    sizes = sorted(THROUGHPUT)
    lo = max(s for s in sizes if s <= running)
    hi = min(s for s in sizes if s >= running)
    now = THROUGHPUT[lo] if lo == hi else THROUGHPUT[lo] + (THROUGHPUT[hi] - THROUGHPUT[lo]) * (running - lo) / (hi - lo)
    ratio = float(inputs["chat: GPUs needed at the best batch ÷ now"][0])
    assert ratio == pytest.approx(now / 200.0, abs=1e-4)
    cost = sum((iv.paid for iv in result.intervals if iv.service == "chat"), Decimal(0))
    cap = result.ledger.parts[("serving_path", "in_flight_idle", "chat")].amount
    expected = min(cap, cost * (1 - Decimal(repr(ratio))))
    per_month = Decimal("30.4375") / result.case.days
    assert option.saving is not None
    assert float(option.saving["expected"]) == pytest.approx(float(expected * per_month), rel=1e-3)


def test_a_profile_without_a_sweep_stays_assumed(tmp_path):
    from audit.case import load_case
    from audit.pipeline import run_audit
    result = run_audit(load_case(demo_with_bundle(tmp_path, None)))
    option = next(o for o in result.options if o.id == "batching_limits")
    assert option.basis == "assumed" and option.basis_note == MISSING["batching"]
