"""fixtures/make_demo.py: deterministic bytes, a conserved truth, and committed files that match it."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from tests.paths import DEMO, FIXTURES, ROOT

GENERATOR = FIXTURES / "make_demo.py"
COMMITTED = DEMO


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[Path, Path]:
    outs = [tmp_path_factory.mktemp(f"demo{i}") for i in (1, 2)]
    procs = [subprocess.Popen([sys.executable, str(GENERATOR), "--out", str(out)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for out in outs]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    return outs[0], outs[1]


@pytest.mark.slow
def test_generator_is_deterministic(two_runs):
    first, second = (files_of(p) for p in two_runs)
    assert sorted(first) == [
        "PROVENANCE.md", "billing/focus_2026-09.csv.gz", "case.toml", "profiles/h100_qwen1.5-0.5b-chat.json.gz",
        "profiles/h100_qwen1.5-0.5b-chat.prefill_decode.derived.json.gz", "telemetry/metrics.om.gz", "truth.json",
    ]
    for name in first:
        assert first[name] == second[name], f"{name} differs between two runs"
    assert sum(len(b) for b in first.values()) < 6_000_000


@pytest.mark.slow
def test_truth_buckets_sum_to_total(two_runs):
    truth = json.loads((two_runs[0] / "truth.json").read_text())
    total = Decimal(truth["total"])
    buckets = truth["buckets"]
    assert set(buckets) == {"model_compute", "serving_path", "platform_overhead", "unattributed"}
    assert sum(Decimal(b["amount"]) for b in buckets.values()) == total
    for name, bucket in buckets.items():
        assert sum(Decimal(v) for v in bucket["parts"].values()) == Decimal(bucket["amount"]), name
        assert Decimal(bucket["amount"]) == Decimal(bucket["amount"]).quantize(Decimal("0.01"))
    assert truth["reconciliation"]["verdict"] == "reconciles"


@pytest.mark.slow
def test_committed_demo_matches_generator(two_runs):
    """The committed fixtures/demo is what the generator writes (gzip members compared decompressed,
    since another zlib may compress the same text to other bytes)."""
    fresh, committed = files_of(two_runs[0]), files_of(COMMITTED)
    assert sorted(committed) == sorted(fresh)
    for name, data in fresh.items():
        if name.endswith(".gz") and not name.startswith("profiles/"):
            assert gzip.decompress(committed[name]) == gzip.decompress(data), name
        else:
            assert committed[name] == data, name
