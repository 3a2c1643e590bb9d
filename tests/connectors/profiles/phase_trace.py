"""A seeded generator of LLM-serving Kineto traces with prefill and decode steps, and their truth.

Standard library only, importing nothing of costaudit: the truth is computed here, from the
events written, never by the code under test. A trace is a run of forward passes on one GPU
stream: a prefill pass per arriving batch (attention query length = the prompt length), then
decode passes (query length 1). Each layer launches a QKV GEMM, the attention kernel
(``flash_fwd_kernel`` for prefill, ``flash_fwd_splitkv_kernel`` for decode), an output GEMM and
element-wise kernels, each from a CPU operator through ``cudaLaunchKernel`` (correlation ids),
with host gaps between launches. ``annotate`` wraps every pass in a ``record_function``-style
``user_annotation`` named ``prefill`` or ``decode``; ``shapes=False`` leaves the attention
operator's input shapes out (the kernel names alone then tell the phases).

Truth: the kernel time of each phase (kernels never overlap: one stream, launched in order).
"""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

LAYERS = 4
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_segment_k_off_kernel"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel>"
ATTENTION = {"prefill": "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>",
             "decode": "void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<64, 64, 256, 4>>"}


def generate(path: Path, seed: int = 7, batches: int = 6, decode_steps: int = 12, annotate: bool = False,
             shapes: bool = True) -> dict[str, float]:
    """Write the trace (gzipped JSON) and return the truth: kernel us per phase, and counts."""
    rng = random.Random(seed)
    events: list[dict] = []
    truth = {"prefill": 0.0, "decode": 0.0, "prefill_passes": 0, "decode_passes": 0}
    host, gpu, correlation = 1_000_000.0, 1_000_050.0, 1

    def launch(name: str, dur: float, phase: str, op: str, dims: list | None) -> None:
        nonlocal host, gpu, correlation
        args = {"External id": correlation}
        if dims is not None:
            args["Input Dims"] = dims
        events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": host, "dur": 9.0,
                       "args": args})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": host + 2.0, "dur": 5.0, "args": {"correlation": correlation}})
        start = max(gpu, host + 8.0)
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": start, "dur": dur,
                       "args": {"device": 0, "stream": 7, "correlation": correlation}})
        truth[phase] += dur
        gpu = start + dur + rng.uniform(0.5, 2.0)
        host += rng.uniform(10.0, 14.0)
        correlation += 1

    def forward(phase: str, batch: int, q_len: int) -> None:
        nonlocal host
        begin = host
        scale = q_len * batch / 64.0 if phase == "prefill" else batch / 16.0
        for _ in range(LAYERS):
            launch(GEMM, rng.uniform(30, 40) * max(scale, 1.0), phase, "aten::linear", [[batch, q_len, 1024], [3072, 1024]])
            dims = [[batch, 16, q_len, 64], [batch, 16, q_len + 100, 64], [batch, 16, q_len + 100, 64]]
            launch(ATTENTION[phase], rng.uniform(15, 25) * max(scale, 1.0), phase,
                   "aten::scaled_dot_product_attention", dims if shapes else None)
            launch(GEMM, rng.uniform(20, 30) * max(scale, 1.0), phase, "aten::linear", [[batch, q_len, 1024], [1024, 1024]])
            launch(ELEMENTWISE, rng.uniform(3, 6), phase, "aten::silu", [[batch, q_len, 1024]])
        if annotate:
            events.append({"ph": "X", "cat": "user_annotation", "name": phase, "pid": 1, "tid": 1, "ts": begin - 1.0,
                           "dur": host - begin + 1.0, "args": {}})
        truth[f"{phase}_passes"] += 1
        host += rng.uniform(200.0, 400.0)  # the scheduler between steps

    for _ in range(batches):
        batch = rng.randint(2, 8)
        forward("prefill", batch, rng.randint(64, 512))
        for _ in range(rng.randint(decode_steps // 2, decode_steps)):
            forward("decode", batch, 1)
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
             "traceEvents": sorted(events, key=lambda e: e["ts"])}
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump(trace, handle)
    return truth
