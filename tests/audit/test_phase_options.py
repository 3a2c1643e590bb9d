"""The prefix-cache and generation-cap models' arithmetic (METHOD §7): prefill × (h1 − h0) / (1 − h0),
and the share of generated tokens above a cap, exactly from a traffic file (the shared Azure LLM
inference traces, CC-BY-4.0) and as a low / high from histogram bucket edges of the same requests."""
from __future__ import annotations

import csv
import math
from decimal import Decimal

import numpy as np
import pytest

from audit.pricing.generation_cap import bucket_share, exact_share
from audit.pricing.prefix_cache import saving, stated
from tests.paths import DATA

TRAFFIC = DATA / "traffic"
EDGES = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]  # vLLM's 1-2-5 buckets


def generated(name: str) -> list[int]:
    with open(TRAFFIC / name, newline="", encoding="utf-8") as handle:
        return [int(row["GeneratedTokens"]) for row in csv.DictReader(handle)]


def histogram(values: list[int], edges: list[int]) -> tuple[np.ndarray, np.ndarray]:
    counts = [0] * (len(edges) + 1)
    for n in values:
        counts[next((i for i, e in enumerate(edges) if n <= e), len(edges))] += 1
    return np.array([*map(float, edges), math.inf]), np.array(counts, dtype=float)


def test_prefix_cache_formula():
    assert saving(Decimal(100), Decimal("0.2"), Decimal("0.6")) == Decimal(50)   # 100 × 0.4 / 0.8
    assert saving(Decimal(100), Decimal("0.6"), Decimal("0.5")) == 0            # h1 below h0: nothing
    assert saving(Decimal(100), Decimal(1), Decimal(1)) == 0
    assert stated({"hit_rate": 0.4}, "hit_rate", {})["high"] == Decimal("0.4")


@pytest.mark.parametrize("name", ["AzureLLMInferenceTrace_code.csv", "AzureLLMInferenceTrace_conv.csv"])
@pytest.mark.parametrize("cap", [50, 256, 700])
def test_histogram_brackets_the_exact_share(name, cap):
    values = generated(name)
    exact = exact_share(values, cap)
    edges, counts = histogram(values, EDGES)
    shares = bucket_share(edges, counts, Decimal(sum(values)), cap)
    assert shares["low"] <= exact <= shares["high"]
    assert shares["low"] <= shares["expected"] <= shares["high"]


def test_exact_share_by_hand():
    assert exact_share([10, 300, 2000], 256) == Decimal(44 + 1744) / Decimal(2310)
    assert exact_share([], 10) == 0
    edges, counts = histogram([3, 4, 100], [5, 10])   # the open bucket holds 100
    shares = bucket_share(edges, counts, Decimal(107), 50)
    assert shares["low"] == 0 and shares["high"] == Decimal(107 - 0 - 50) / 107
    assert bucket_share(edges, counts, Decimal(0), 50) == "the generated-token counter counts no token"


@pytest.mark.parametrize("entry,problem", [
    ({"hit_rate": 1.5}, "hit_rate (option None): expected a number from 0 to 1"),
    ({"hit_rate": {"low": 0.2}}, "hit_rate (option None): expected"),
    ({"cap_tokens": 0}, "cap_tokens: expected a whole number of tokens >= 1"), ({"cap_tokens": "many"}, "cap_tokens")])
def test_the_case_checks_h1_and_the_cap(entry, problem):
    from audit.case import _duration
    from audit.case_options import _model_inputs
    problems: list[str] = []
    _model_inputs(entry, "[[options]] 1", problems, _duration)
    assert len(problems) == 1 and problem in problems[0]
    ok: list[str] = []
    _model_inputs({"hit_rate": {"low": 0.2, "expected": 0.4, "high": 0.6}, "cap_tokens": 512}, "[[options]] 1", ok, _duration)
    assert ok == []
