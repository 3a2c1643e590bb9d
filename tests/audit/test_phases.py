"""Prefill vs decode per service (METHOD §4) and the prefix-cache and generation-cap options (§7) on a
vLLM case: one g5.xlarge billed for an hour, its vLLM pod's /metrics (tests/connectors/telemetry/
vllm_phases.py, with the truth) and a kernel profile (a generated trace with both phases, the real
prefill-only qwen trace, or one that tells no phase).
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from audit.audit_json import to_dict
from audit.case import Case, Service
from audit.collected import Collected
from audit.pipeline import audit_collected
from connectors.base import ReadContext, SourceSpec
from connectors.profiles.kineto import KinetoConnector
from connectors.telemetry.openmetrics import OpenMetricsConnector
from tests.builders import frame, line, lines_frame
from tests.connectors.profiles.phase_trace import generate
from tests.connectors.telemetry.vllm_phases import INSTANCE, write
from tests.paths import DATA

START = datetime(2025, 3, 1, tzinfo=UTC)
END = START + timedelta(hours=1)
QWEN = DATA / "traces" / "tracelens" / "h100_qwen1.5-0.5b-chat.json.gz"
ALEXNET = DATA / "traces" / "hta" / "alexnet_a100_cuda_sync.json.gz"
PER_MONTH = Decimal("30.4375") * 24  # the window is one hour


def case() -> Case:
    return Case(path=Path("/nonexistent/case.toml"), name="phases", start=START, end=END, currency="USD",
                cost_basis="effective", tolerance=Decimal("0.02"), step_seconds=300,
                target_utilisation=Decimal("0.8"), loaded_rate=Decimal(100), sources=(),
                services={"chat": Service("chat", {"namespace": "serve", "pod": "re:^vllm-qwen-"})},
                scope={"accounts": ["111"], "services": [], "tags": {}}, rules=(), nodes={}, option_overrides={})


@pytest.fixture(scope="module")
def metrics(tmp_path_factory):
    path = tmp_path_factory.mktemp("vllm") / "vllm.om"
    truth = write(path, int(START.timestamp()))
    read = OpenMetricsConnector(SourceSpec("vllm", "telemetry", "openmetrics", path),
                                ReadContext(START, END, "USD", 300)).read()
    return read, truth


def audit(metrics, trace: Path):
    read, _ = metrics
    return audited({"vllm": dict(read.tables)}, trace)


def audited(telemetry: dict[str, dict], trace: Path = QWEN):
    """The case audited on an hour of one g5.xlarge, telemetry sources (name -> tables) and chat's trace."""
    gpu = line(1, resource_id=INSTANCE, charge_description="On Demand Linux g5.xlarge Instance Hour",
               pricing_unit="Hours", pricing_quantity=Decimal(1), contracted_unit_price=Decimal("1.006"),
               billed_cost=Decimal("1.006"), effective_cost=Decimal("1.006"),
               start=pd.Timestamp(START), end=pd.Timestamp(END))
    profile = KinetoConnector(SourceSpec("chat-profile", "profiles", "kineto", trace, {"service": "chat"}),
                              ReadContext(START, END, "USD", 300)).read()
    sources = [frame("telemetry", "openmetrics", tables, name=name) for name, tables in telemetry.items()]
    return audit_collected(case(), Collected((frame("billing", "focus", {"lines": lines_frame([gpu])}),
                                              *sources, profile)))


@pytest.fixture(scope="module")
def both_phases(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "both.json.gz"
    return path, generate(path, seed=11)


def test_split_from_the_profile_with_the_timers_beside(metrics, both_phases):
    path, truth = both_phases
    result = audit(metrics, path)
    document = to_dict(result)
    phases = document["services"]["chat"]["phases"]
    share = Decimal(repr(truth["prefill"])) / Decimal(repr(truth["prefill"] + truth["decode"]))
    assert phases["prefill"]["share"] == f"{share:.6f}"
    assert phases["prefill"]["source"].startswith("kernel profile chat-profile: kernel time of prefill and decode")
    assert "attention operators with input shapes" in phases["prefill"]["source"]
    [part] = [p["amount"] for p in document["buckets"]["model_compute"]["parts"] if p["service"] == "chat"]
    service = document["services"]["chat"]
    assert Decimal(phases["prefill"]["cost"]) + Decimal(phases["decode"]["cost"]) == Decimal(part)
    assert service["by_bucket"]["model_compute"] == part
    whole = Decimal(service["total_cost"])
    assert Decimal(phases["prefill"]["service_cost"]) + Decimal(phases["decode"]["service_cost"]) == whole
    [also] = phases["also"]
    _, timers = metrics
    server = Decimal(repr(timers["prefill_s"])) / Decimal(repr(timers["prefill_s"] + timers["decode_s"]))
    assert "vllm:request_prefill_time_seconds_sum and vllm:request_decode_time_seconds_sum" in also["source"]
    assert Decimal(also["prefill_share"]) == pytest.approx(server, abs=Decimal("1e-6"))
    assert phases["reason"] is None


def test_split_from_the_vllm_timers_when_the_profile_is_prefill_only(metrics):
    result = audit(metrics, QWEN)
    document = to_dict(result)
    service = document["services"]["chat"]
    phases = service["phases"]
    _, truth = metrics
    prefill_s, decode_s = Decimal(repr(truth["prefill_s"])), Decimal(repr(truth["decode_s"]))
    assert phases["prefill"]["source"].startswith(
        "vllm:request_prefill_time_seconds_sum and vllm:request_decode_time_seconds_sum over the window")
    assert Decimal(phases["prefill"]["share"]) == pytest.approx(prefill_s / (prefill_s + decode_s), abs=Decimal("1e-6"))
    # the whole cost split by measured phase time, per 1 M prompt / generated tokens (METHOD §4)
    uc = result.unit_costs["chat"]
    whole = uc.own + uc.shared
    split_share = (Decimal(repr(float(result.telemetry.serving["prefill_seconds"].sum())))
                   / Decimal(repr(float(result.telemetry.serving[["prefill_seconds", "decode_seconds"]].sum().sum()))))
    assert service["prompt_tokens"] == truth["prompt"] and service["generated_tokens"] == truth["generated"]
    assert Decimal(phases["cost_per_1m_prompt_tokens"]) == pytest.approx(
        whole * split_share * 1_000_000 / truth["prompt"], abs=Decimal("1e-6"))
    assert Decimal(phases["cost_per_1m_generated_tokens"]) == pytest.approx(
        whole * (1 - split_share) * 1_000_000 / truth["generated"], abs=Decimal("1e-6"))
    assert phases["also"] == []


def test_not_measured_says_why(metrics):
    read, _ = metrics
    bare = {k: v.drop(columns=[c for c in ("prefill_seconds", "decode_seconds") if c in v]) if k == "serving_stats" else v
            for k, v in read.tables.items()}
    gpu = line(1, resource_id=INSTANCE, charge_description="On Demand Linux g5.xlarge Instance Hour",
               pricing_unit="Hours", pricing_quantity=Decimal(1), contracted_unit_price=Decimal("1.006"),
               billed_cost=Decimal("1.006"), effective_cost=Decimal("1.006"),
               start=pd.Timestamp(START), end=pd.Timestamp(END))
    profile = KinetoConnector(SourceSpec("chat-profile", "profiles", "kineto", ALEXNET, {"service": "chat"}),
                              ReadContext(START, END, "USD", 300)).read()
    result = audit_collected(case(), Collected((frame("billing", "focus", {"lines": lines_frame([gpu])}),
                                                frame("telemetry", "openmetrics", bare, name="vllm"), profile)))
    document = to_dict(result)
    phases = document["services"]["chat"]["phases"]
    assert phases["prefill"] == {"cost": None, "service_cost": None, "share": None, "source": None}
    assert phases["cost_per_1m_prompt_tokens"] is None and phases["cost_per_1m_generated_tokens"] is None
    assert "profile chat-profile: no phase annotation" in phases["reason"]
    assert "no phase timers for its pods" in phases["reason"]
    options = {o["id"]: o for o in document["options"]}
    assert options["prefix_kv_cache"]["status"] == "not_measured"
    assert options["generation_cap"]["status"] == "not_measured"


def test_the_two_options_are_modelled_from_these_figures(metrics):
    result = audit(metrics, QWEN)
    _, truth = metrics
    options = {o.id: o for o in result.options}
    prefix, cap = options["prefix_kv_cache"], options["generation_cap"]
    assert prefix.basis == "modelled" and cap.basis == "modelled"
    part = result.ledger.parts[("model_compute", "kernel_active", "chat")].amount
    serving = result.telemetry.serving
    share = (Decimal(repr(float(serving["prefill_seconds"].sum())))
             / Decimal(repr(float(serving[["prefill_seconds", "decode_seconds"]].sum().sum()))))
    h0 = Decimal(truth["hits"]) / Decimal(truth["queries"])
    expected = part * share * (Decimal("0.5") - h0) / (1 - h0) * PER_MONTH
    assert prefix.saving["expected"] == pytest.approx(expected, abs=Decimal("1e-9"))
    names = {name for name, _, _ in prefix.inputs}
    assert {"chat: measured hit rate h0", "chat: prefill share", "stated hit rate h1"} <= names
    # generation cap: the decode cost × the share of generated tokens above 1024, bracketed by bucket edges
    exact = Decimal(sum(max(0, n - 1024) for n in truth["generated_per_request"])) / Decimal(truth["generated"])
    decode = (part - part * share) * PER_MONTH
    assert cap.saving["low"] <= decode * exact <= cap.saving["high"]
    assert cap.saving["low"] > 0


def test_the_case_states_h1_and_the_cap(metrics):
    from dataclasses import replace

    from audit.rank import merged_catalogue
    overrides = {"prefix_kv_cache": {"id": "prefix_kv_cache", "hit_rate": 0.9},
                 "generation_cap": {"id": "generation_cap", "cap_tokens": 4000}}
    specs = {spec["id"]: spec for spec, _ in merged_catalogue(overrides, Path("/nonexistent/case.toml"))}
    assert specs["prefix_kv_cache"]["hit_rate"] == 0.9 and specs["generation_cap"]["cap_tokens"] == 4000
    result = audit(metrics, QWEN)
    given = result.case
    from audit.pipeline import audit_collected as run
    again = run(replace(given, option_overrides=overrides), result.collected)
    options = {o.id: o for o in again.options}
    assert {i[1] for i in options["prefix_kv_cache"].inputs if i[0] == "stated hit rate h1"} == {"0.9 / 0.9 / 0.9"}
    assert {i[1] for i in options["generation_cap"].inputs if i[0] == "cap"} == {"4000 tokens"}
    # only requests above 4000 tokens: fewer than above 1024
    low = {o.id: o for o in result.options}["generation_cap"].saving["expected"]
    assert options["generation_cap"].saving["expected"] < low


def test_each_figure_names_only_the_source_whose_rows_measured_it(metrics):
    """The pod's phase timers in one file and everything else (DCGM, its other vLLM series) in another
    (the case of /tmp/hB/demo): the split names the timers' file alone, and the model-compute part the
    exporter alone, though both hold serving rows for the pod."""
    read, _ = metrics
    timers = ["prefill_seconds", "prefill_requests", "decode_seconds", "decode_requests", "tpot_seconds",
              "itl_seconds", "request_tpot_seconds"]
    serving = read.tables["serving_stats"]
    exporter = {**read.tables, "serving_stats": serving.assign(**{c: float("nan") for c in timers})}
    phase_file = {"serving_stats": serving[["ts", "family", "model_name", "namespace", "pod", *timers]]}
    document = to_dict(audited({"prometheus-export": exporter, "phase-timers": phase_file}))
    assert document["services"]["chat"]["phases"]["prefill"]["source"] == (
        "vllm:request_prefill_time_seconds_sum and vllm:request_decode_time_seconds_sum over the window "
        "(phase-timers (openmetrics))")
    [part] = [p for p in document["buckets"]["model_compute"]["parts"] if p["service"] == "chat"]
    assert part["source"] == ("DCGM_FI_PROF_GR_ENGINE_ACTIVE (prometheus-export) × GPU-interval cost of "
                              "FOCUS lines (billing-inline)")


def test_per_token_costs_of_tokens_not_measured_and_counted_zero_say_which(metrics):
    """No prompt-token series (NaN) and a generated-token series that counted 0: both per-token
    costs null, where both were said to have "no ... counter", and the prompt tokens were 0."""
    read, _ = metrics
    traffic = read.tables["traffic"].assign(prompt_tokens=float("nan"), generated_tokens=0.0)
    service = to_dict(audited({"vllm": {**read.tables, "traffic": traffic}}))["services"]["chat"]
    assert service["prompt_tokens"] is None and service["generated_tokens"] == 0
    phases = service["phases"]
    assert phases["prefill"]["source"] is not None
    assert phases["cost_per_1m_prompt_tokens"] is None and phases["cost_per_1m_generated_tokens"] is None
    assert phases["reason"] == (
        "cost per 1 M prompt tokens not measured: no vllm:prompt_tokens_total series beside "
        "vllm (openmetrics): vllm:request_success_total; cost per 1 M generated tokens not measured: "
        "vllm (openmetrics): vllm:request_success_total counted no generated tokens in the window")


def with_traffic_file(metrics, trace: Path, per_request: list[int]):
    """(the traffic file written with ``per_request`` generated tokens, the audit whose generation cap
    reads it for chat)."""
    from dataclasses import replace

    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2025-03-01 00:{i // 60 % 60:02d}:{i % 60:02d}.0000000,100,{n}\n" for i, n in enumerate(per_request)),
        encoding="utf-8")
    result = audit(metrics, QWEN)
    overrides = {"generation_cap": {"id": "generation_cap", "traffic": {"chat": str(trace)}}}
    return trace, audit_collected(replace(result.case, option_overrides=overrides), result.collected)


def test_a_traffic_file_gives_the_generation_cap_its_share_exactly(metrics, tmp_path):
    """METHOD §7: a traffic file gives the share of generated tokens above the cap exactly (before:
    docs/telemetry.md said so, but no case key read one and the model always bracketed it by the
    histogram's bucket edges). The case's ``traffic = { chat = "…" }`` names an Azure LLM inference
    trace; the saving is decode cost × Σ max(0, n − 1024) ÷ Σ n in all three bands."""
    _, truth = metrics
    per_request = truth["generated_per_request"]
    trace, again = with_traffic_file(metrics, tmp_path / "chat_requests.csv", per_request)
    cap = {o.id: o for o in again.options}["generation_cap"]
    part = again.ledger.parts[("model_compute", "kernel_active", "chat")].amount
    serving = again.telemetry.serving
    share = (Decimal(repr(float(serving["prefill_seconds"].sum())))
             / Decimal(repr(float(serving[["prefill_seconds", "decode_seconds"]].sum().sum()))))
    exact = Decimal(sum(max(0, n - 1024) for n in per_request)) / Decimal(sum(per_request))
    expected = (part - part * share) * exact * PER_MONTH
    assert cap.basis == "modelled"
    assert cap.saving["low"] == cap.saving["expected"] == cap.saving["high"]
    assert cap.saving["expected"] == pytest.approx(expected, abs=Decimal("1e-9"))
    above = sum(1 for n in per_request if n > 1024)
    assert ("chat: share of generated tokens above the cap", f"{exact:.6f}",
            f"traffic file {trace}: {len(per_request):,} requests, {sum(per_request):,} generated tokens, "
            f"{above:,} requests above the cap (exact: Σ max(0, n − cap) ÷ Σ n)") in cap.inputs
    assert not [m for m in again.fit.misfits if m.kind == "traffic_unlike_service"]  # the file is the service's


def test_a_traffic_file_unlike_its_service_is_named(metrics, tmp_path):
    """Rule 5: a traffic file whose requests generate three times what the service's own counters
    measure (another service's, model's or period's traffic) is named with both means; before, the
    option was priced on it with no word. The saving stays the file's."""
    _, truth = metrics
    per_request = [3 * n for n in truth["generated_per_request"]]
    trace, again = with_traffic_file(metrics, tmp_path / "other_requests.csv", per_request)
    [found] = [m for m in again.fit.misfits if m.kind == "traffic_unlike_service"]
    serving = again.telemetry.serving
    ours = Decimal(repr(float(serving["generated_tokens"].sum()))) / Decimal(repr(float(serving["requests"].sum())))
    theirs = Decimal(sum(per_request)) / len(per_request)
    assert found.message == (
        f"[[options]] generation_cap traffic chat: the file {trace} averages {theirs:,.1f} generated tokens per "
        f"request over {len(per_request):,} requests; service chat's own counters measure {ours:,.1f} over "
        f"{float(serving['requests'].sum()):,.0f} requests in the window. The generation cap's share of tokens above "
        "the cap is the file's, not the service's: check that the file is this service's traffic")
    assert found.nearest == (f"{ours:,.1f} generated tokens per request, measured",)
    assert {o.id: o for o in again.options}["generation_cap"].basis == "modelled"


def test_a_traffic_file_the_case_cannot_use_is_named(tmp_path):
    from audit.case import _duration
    from audit.case_options import parse_options

    services = {"chat": object()}  # only the names are read
    problems: list[str] = []
    parse_options([(1, {"id": "generation_cap", "traffic": {"chta": "t.csv"}}),
                   (2, {"id": "prefix_kv_cache", "traffic": {"chat": "t.csv"}}),
                   (3, {"id": "quantise", "traffic": "t.csv"})], services, tmp_path, _duration, problems)
    assert problems == [
        "[[options]] #1.traffic: 'chta' is no [services] entry (declared: 'chat')",
        "[[options]] #2.traffic: only the generation_cap option reads a traffic file, not 'prefix_kv_cache'",
        "[[options]] #3.traffic: only the generation_cap option reads a traffic file, not 'quantise'"]
    missing: list[str] = []
    parse_options([(1, {"id": "generation_cap", "traffic": {"chat": "t.csv"}})], services, tmp_path, _duration, missing)
    assert missing == [f"[[options]] #1.traffic.chat: {(tmp_path / 't.csv').resolve()}: file not found (expected an "
                       "Azure LLM inference trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens))"]
    (tmp_path / "t.csv").write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n", encoding="utf-8")
    fine: list[str] = []
    found = parse_options([(1, {"id": "generation_cap", "traffic": {"chat": "t.csv"}})], services, tmp_path,
                          _duration, fine)
    assert fine == [] and found["generation_cap"]["traffic"] == {"chat": str((tmp_path / "t.csv").resolve())}


def test_a_traffic_file_with_a_bad_row_is_one_input_error(metrics, tmp_path):
    from dataclasses import replace

    from collector.trace_file import TraceFileError

    trace = tmp_path / "bad.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2025-03-01 00:00:00,10,many\n", encoding="utf-8")
    result = audit(metrics, QWEN)
    overrides = {"generation_cap": {"id": "generation_cap", "traffic": {"chat": str(trace)}}}
    with pytest.raises(TraceFileError) as raised:
        audit_collected(replace(result.case, option_overrides=overrides), result.collected)
    assert str(raised.value).startswith(f"{trace}: row 2, column GeneratedTokens: ")


def test_pods_timing_prefill_alone_are_left_out_of_the_split_and_named(metrics):
    """A second pod whose scrape kept the prefill timer and no decode timer (the verifier's c9901q:
    decode over 6 of 13 pods): before, its prefill was summed against the first pod's decode alone
    (share 0.535950 there); now the split stands on the pod-intervals that time both, the same as the
    first pod's own, and the reason and a fit warning name the pod left out."""
    read, _ = metrics
    serving = read.tables["serving_stats"]
    alone = to_dict(audited({"vllm": dict(read.tables)}))["services"]["chat"]["phases"]["prefill"]["share"]
    other = serving.assign(pod="vllm-qwen-7d9f8-fghij", decode_seconds=float("nan"), tpot_seconds=float("nan"),
                           itl_seconds=float("nan"))
    document = to_dict(audited({"vllm": {**read.tables, "serving_stats": pd.concat([serving, other])}}))
    phases = document["services"]["chat"]["phases"]
    assert phases["prefill"]["share"] == alone
    left = float(other["prefill_seconds"].sum())
    words = (f"phase split over the pod-intervals that time both phases only; 12 pod-intervals of 1 pod(s) time "
             f"vllm:request_prefill_time_seconds_sum without vllm:request_decode_time_seconds_sum ({left:g} s left "
             "out): vllm-qwen-7d9f8-fghij (12); the split stands on 12 pod-intervals of 1 pod(s): vllm-qwen-7d9f8-abcde")
    assert phases["reason"] == words
    [warning] = [m for m in document["fit"] if m["kind"] == "phase_timers_one_phase"]
    assert warning["message"] == f"service chat: {words}" and warning["nearest"] == ["vllm-qwen-7d9f8-fghij"]


def test_pods_with_no_phase_timer_are_named_and_the_split_said_to_stand_for_them(metrics):
    """A rolling vLLM upgrade: a second pod of the service whose older server exports no phase timer
    (the verifier's c10701u: timers on 2 of 13 chat pods). Before: share 0.375000 applied to the
    whole service, reason null, no fit entry. The share is unchanged (it stands on the pods that time
    both phases); now the reason and a fit warning say how many of the service's pods carry no phase
    timer, on how many pod-intervals, and that the split is the timed pods' ratio applied to them."""
    read, _ = metrics
    serving = read.tables["serving_stats"]
    alone = to_dict(audited({"vllm": dict(read.tables)}))["services"]["chat"]["phases"]
    assert alone["reason"] is None and alone["prefill"]["source"].endswith("(vllm (openmetrics))")
    old = serving.assign(pod="vllm-qwen-7d9f8-old01", prefill_seconds=float("nan"), decode_seconds=float("nan"),
                         tpot_seconds=float("nan"), itl_seconds=float("nan"))
    document = to_dict(audited({"vllm": {**read.tables, "serving_stats": pd.concat([serving, old])}}))
    phases = document["services"]["chat"]["phases"]
    assert phases["prefill"]["share"] == alone["prefill"]["share"]
    words = ("1 of the service's 2 pods carry no phase timer (neither vllm:request_prefill_time_seconds_sum nor "
             "vllm:request_decode_time_seconds_sum) on 12 of its 24 pod-intervals: vllm-qwen-7d9f8-old01 (12); "
             "the split stands on 12 pod-intervals of 1 pod(s): vllm-qwen-7d9f8-abcde, and is their prefill / "
             "decode ratio applied to the whole service")
    assert phases["reason"] == words
    assert phases["prefill"]["source"] == alone["prefill"]["source"] + "; on 1 of the service's 2 pods, applied to all"
    [warning] = [m for m in document["fit"] if m["kind"] == "phase_timers_some_pods"]
    assert warning["message"] == f"service chat: {words}" and warning["nearest"] == ["vllm-qwen-7d9f8-old01"]
    assert not [m for m in document["fit"] if m["kind"] == "phase_timers_one_phase"]
