"""OpenCost's input / output split (inference cost tracking, 2026) against ours, on one data set.

OpenCost cannot run here, so its documented allocation (docs "AI Inference Cost Tracking", Cost
Calculation Methodology; pkg/inferencecost/calculator.go) is re-implemented below:

- ``compute_time``: InputCost = TotalCost × PrefillTime / (PrefillTime + DecodeTime), with
  PrefillTime = ``vllm:request_prefill_time_seconds_sum`` and DecodeTime =
  ``vllm:request_time_per_output_token_seconds_sum``; per 1 M prompt tokens and per 1 M generation
  tokens from ``vllm:prompt_tokens_total`` / ``vllm:generation_tokens_total``;
- ``multiplier`` (either timer missing or zero): a generated token costs 2.5 prompt tokens,
  InputCost = TotalCost × P / (P + 2.5 G).

Ours (audit/phases.py): the same prefill sum over prefill + ``vllm:request_decode_time_seconds_sum``,
and *not measured* where a timer is missing. ``vllm:request_time_per_output_token_seconds`` records one
value per request, that request's mean time per output token, so its sum is Σ decode_i / (n_i − 1):
smaller than the decode time by about the mean generated length, and OpenCost's input share comes out
far too high. The data set is the seeded vLLM hour of tests/connectors/telemetry/vllm_phases.py.
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from audit.case import Service
from audit.phases import service_split, timer_split
from connectors.base import ReadContext, SourceSpec
from connectors.telemetry.openmetrics import OpenMetricsConnector
from tests.connectors.telemetry.vllm_phases import write

START = datetime(2025, 3, 1, tzinfo=UTC)
END = START + timedelta(hours=1)
TOTAL = Decimal("1000.00")  # the model's cost over the window, on both sides
MULTIPLIER = Decimal("2.5")  # OpenCost's default output / input token cost ratio


def opencost_split(total: Decimal, prefill_s: Decimal, tpot_sum_s: Decimal, prompt: int, generated: int) -> dict:
    """OpenCost's documented input / output allocation (calculator.go): compute_time, else multiplier."""
    if prefill_s > 0 and tpot_sum_s > 0:
        fraction, method = prefill_s / (prefill_s + tpot_sum_s), "compute_time"
    else:
        fraction, method = Decimal(prompt) / (Decimal(prompt) + MULTIPLIER * generated), "multiplier"
    inputs = total * fraction
    return {"method": method, "input_share": fraction, "input_per_1m": inputs * 1_000_000 / prompt,
            "output_per_1m": (total - inputs) * 1_000_000 / generated}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("oc") / "vllm.om"
    truth = write(path, int(START.timestamp()))
    read = OpenMetricsConnector(SourceSpec("vllm", "telemetry", "openmetrics", path),
                                ReadContext(START, END, "USD", 300)).read()
    serving = read.tables["serving_stats"].assign(source="vllm (openmetrics)")
    return serving, truth


def sums(serving, column) -> Decimal:
    return Decimal(repr(float(serving[column].sum())))


def test_both_figures_on_one_data_set(data):
    serving, truth = data
    prompt, generated = truth["prompt"], truth["generated"]
    theirs = opencost_split(TOTAL, sums(serving, "prefill_seconds"), sums(serving, "request_tpot_seconds"),
                            prompt, generated)
    ours = timer_split(serving, "chat")
    assert theirs["method"] == "compute_time"
    # the same prefill timer on both sides; the decode side differs
    assert ours.prefill == sums(serving, "prefill_seconds")
    assert float(ours.decode) == pytest.approx(truth["decode_s"], rel=1e-12)
    ours_input = TOTAL * ours.share
    ours_prompt = ours_input * 1_000_000 / prompt
    ours_generated = (TOTAL - ours_input) * 1_000_000 / generated
    # OpenCost's "decode time" is Σ per-request mean TPOT: about decode time / mean generated length
    mean_length = Decimal(generated) / truth["requests"]
    ratio = ours.decode / sums(serving, "request_tpot_seconds")
    assert mean_length / 3 < ratio < mean_length * 3
    # on this hour: OpenCost puts ~58 % of the cost on input, ours 0.3 %
    assert theirs["input_share"] == pytest.approx(Decimal("0.5818"), abs=Decimal("0.001"))
    assert ours.share == pytest.approx(Decimal("0.00298"), abs=Decimal("0.00001"))
    assert theirs["input_per_1m"] > 190 * ours_prompt
    assert ours_generated > 2 * theirs["output_per_1m"]
    # every figure adds up to the same total on both sides
    assert theirs["input_per_1m"] * prompt / 1_000_000 + theirs["output_per_1m"] * generated / 1_000_000 == \
        pytest.approx(TOTAL, abs=Decimal("1e-18"))
    assert ours_prompt * prompt / 1_000_000 + ours_generated * generated / 1_000_000 == pytest.approx(TOTAL)


def test_without_decode_timers_opencost_falls_back_and_we_say_not_measured(data):
    serving, truth = data
    bare = serving.drop(columns=["decode_seconds", "request_tpot_seconds"])
    theirs = opencost_split(TOTAL, sums(bare, "prefill_seconds"), Decimal(0), truth["prompt"], truth["generated"])
    assert theirs["method"] == "multiplier"
    expected = Decimal(truth["prompt"]) / (Decimal(truth["prompt"]) + MULTIPLIER * truth["generated"])
    assert theirs["input_share"] == expected
    services = {"chat": Service("chat", {"namespace": "serve", "pod": "re:^vllm-qwen-"})}
    split = service_split("chat", bare, services, None)
    assert split.used is None
    assert "no decode time" in split.reason and "no kernel profile" in split.reason
