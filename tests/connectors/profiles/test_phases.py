"""Prefill and decode kernel time from a profile (connectors.profiles.phases): generated traces with both
phases against their truth (phase_trace.py, seeded, stdlib only), and the shared real traces: the
qwen chat trace (HF transformers, prefill only) and vLLM's decode replayed from a HIP graph (MI300X)."""
from __future__ import annotations

import pytest

from connectors.profiles.events import read_trace
from connectors.profiles.phases import annotation_phase, split_phases
from tests.connectors.profiles.phase_trace import generate
from tests.paths import DATA

TRACES = DATA / "traces"


@pytest.mark.parametrize("seed", [1, 5])
@pytest.mark.parametrize("annotate,shapes,basis", [(False, True, "shapes and kernels"),
                                                   (True, False, "annotations"),
                                                   (False, False, "shapes and kernels")])
def test_generated_trace_recovers_the_planted_split(tmp_path, seed, annotate, shapes, basis):
    path = tmp_path / "phases.json.gz"
    truth = generate(path, seed=seed, annotate=annotate, shapes=shapes)
    split = split_phases(read_trace(path))
    assert split.basis == basis
    assert split.prefill_us == pytest.approx(truth["prefill"], rel=1e-9)
    assert split.decode_us == pytest.approx(truth["decode"], rel=1e-9)
    assert split.mixed_us == 0 and split.unlabelled_us == 0
    assert split.separated and split.reason() is None


def test_qwen_chat_trace_is_prefill_only():
    split = split_phases(read_trace(TRACES / "tracelens" / "h100_qwen1.5-0.5b-chat.json.gz"))
    assert split.basis == "shapes and kernels"
    assert split.evidence == "72 attention operators with input shapes"   # 24 layers x 3 SDPA levels
    assert split.prefill_us > 0 and split.decode_us == 0
    # 436 kernels launched before the host events the trace kept (correlation ids below its first
    # runtime call's): no evidence reaches them
    assert split.unlabelled_us == pytest.approx(13812.16, abs=0.01)
    assert not split.separated
    assert split.reason().startswith("the profile holds prefill steps only")


def test_the_demo_profiles_decode_steps_without_host_events_stay_unlabelled():
    """fixtures/demo's derived profile: the qwen forward, then 16 decode steps of GPU events only
    (no host event, the same kernel names): nothing tells their phase, so they are not guessed."""
    from tests.paths import DEMO
    split = split_phases(read_trace(DEMO / "profiles" / "h100_qwen1.5-0.5b-chat.prefill_decode.derived.json.gz"))
    assert split.decode_us == 0 and split.unlabelled_us > 9 * split.prefill_us > 0
    assert "us of kernel time no evidence reaches" in split.reason()


def test_vllm_hip_graph_trace_is_decode_only():
    """vLLM's step annotation execute_32_context_0(…)_generation_32(…): 0 prefill and 32 decode requests;
    the 425 kernels replayed from the graph have no launch event of their own."""
    split = split_phases(read_trace(TRACES / "tracelens" / "mi300x_vllm_decode_cudagraph_graph_execution.json.gz"))
    assert split.basis == "annotations" and split.evidence == "1 phase annotation (1 decode)"
    assert split.decode_us > 0 and split.prefill_us == 0 and split.unlabelled_us == 0
    assert split.reason().startswith("the profile holds decode steps only")


def test_a_trace_without_phases_says_so():
    split = split_phases(read_trace(TRACES / "hta" / "alexnet_a100_cuda_sync.json.gz"))
    assert split.basis == "" and split.unlabelled_us > 0
    assert split.reason().startswith("no phase annotation")


@pytest.mark.parametrize("name,phase", [
    ("execute_8_context_8(sq2048sk2048sqsq2048sqsk2048)_generation_0(sq0sk0sqsq0sqsk0)", "prefill"),
    ("execute_40_context_8(sq2048sk2048)_generation_32(sq32sk55086)", "mixed"),
    ("prefill", "prefill"), ("model.decode_step", "decode"), ("ProfilerStep#6", "unlabelled"),
    ("precontextual", "unlabelled")])
def test_annotation_names(name, phase):
    from connectors.profiles.phases import PHASE_NAMES
    assert PHASE_NAMES[annotation_phase(name)] == phase
