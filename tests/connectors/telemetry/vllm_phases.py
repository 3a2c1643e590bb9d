"""A seeded hour of one vLLM pod's /metrics as OpenMetrics text, with its truth (stdlib only).

Names, types and labels as vLLM V1 exposes them (``model_name``, ``engine``; see
shared/data/metrics/datadog-integrations-core/vllm_metrics_excerpt.prom): request, prompt and
generation token counters, the per-request prefill / decode time histograms, the per-request
mean time per output token, the prompt / generation token histograms on vLLM's 1-2-5 buckets and
the prefix-cache counters, plus DCGM activity for the pod's GPU and kube_node_info for its node.
Scrapes every 60 s; the truth (totals, each request's generated tokens) is kept here, never
computed by the code under test.
"""
from __future__ import annotations

import random
from pathlib import Path

POD, NAMESPACE, MODEL = "vllm-qwen-7d9f8-abcde", "serve", "Qwen/Qwen2.5-7B-Instruct"
INSTANCE = "i-0aaa1111"
EDGES = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
TIME_EDGES = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0]
PREFILL_TOKENS_PER_S = 20_000.0   # the pod's prefill rate per request
DECODE_S_PER_TOKEN = 0.025        # the pod's time per output token per request


def requests_of(rng: random.Random, n: int) -> list[tuple[int, int]]:
    """(prompt tokens, generated tokens) per request: chat-like prompts, a long tail of generations."""
    out = []
    for _ in range(n):
        prompt = int(rng.lognormvariate(6.5, 0.8)) + 8
        generated = int(rng.lognormvariate(5.0, 1.0)) + 1 if rng.random() < 0.9 else rng.randint(1500, 4000)
        out.append((prompt, generated))
    return out


def write(path: Path, t0: int, seed: int = 3, minutes: int = 60, per_minute: int = 30, busy: float = 0.6,
          hit_rate: float = 0.25) -> dict:
    """Write the file; return the truth: totals and each request's generated tokens."""
    rng = random.Random(seed)
    labels = f'engine="0",model_name="{MODEL}",namespace="{NAMESPACE}",pod="{POD}"'
    dcgm = f'gpu="0",UUID="GPU-1",Hostname="node-a",modelName="NVIDIA H100 80GB HBM3",pod="{POD}",namespace="{NAMESPACE}"'
    totals = {"requests": 0, "prompt": 0, "generated": 0, "prefill_s": 0.0, "decode_s": 0.0, "tpot_s": 0.0,
              "hits": 0, "queries": 0}
    prompt_buckets = [0] * (len(EDGES) + 1)
    gen_buckets = [0] * (len(EDGES) + 1)
    prefill_buckets = [0] * (len(TIME_EDGES) + 1)
    generated: list[int] = []
    lines: list[str] = []

    def bucket(counts: list[int], edges: list[float], value: float) -> None:
        for i, edge in enumerate(edges):
            if value <= edge:
                counts[i] += 1
        counts[-1] += 1

    def scrape(t: int) -> None:
        at = t0 + t
        lines.extend([
            f'kube_node_info{{node="node-a",provider_id="aws:///us-east-1a/{INSTANCE}"}} 1 {at}',
            f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{dcgm}}} {busy} {at}",
            f"vllm:request_success_total{{{labels}}} {totals['requests']} {at}",
            f"vllm:prompt_tokens_total{{{labels}}} {totals['prompt']} {at}",
            f"vllm:generation_tokens_total{{{labels}}} {totals['generated']} {at}",
            f"vllm:prefix_cache_queries_total{{{labels}}} {totals['queries']} {at}",
            f"vllm:prefix_cache_hits_total{{{labels}}} {totals['hits']} {at}",
            f"vllm:request_prefill_time_seconds_sum{{{labels}}} {totals['prefill_s']!r} {at}",
            f"vllm:request_prefill_time_seconds_count{{{labels}}} {totals['requests']} {at}",
            f"vllm:request_decode_time_seconds_sum{{{labels}}} {totals['decode_s']!r} {at}",
            f"vllm:request_decode_time_seconds_count{{{labels}}} {totals['requests']} {at}",
            f"vllm:request_time_per_output_token_seconds_sum{{{labels}}} {totals['tpot_s']!r} {at}",
            f"vllm:request_time_per_output_token_seconds_count{{{labels}}} {totals['requests']} {at}",
        ])
        for name, counts, edges in (("vllm:request_prompt_tokens", prompt_buckets, EDGES),
                                    ("vllm:request_generation_tokens", gen_buckets, EDGES),
                                    ("vllm:request_prefill_time_seconds", prefill_buckets, TIME_EDGES)):
            for edge, count in zip([*map(str, map(float, edges)), "+Inf"], counts):
                lines.append(f'{name}_bucket{{{labels},le="{edge}"}} {count} {at}')

    scrape(0)
    for minute in range(1, minutes + 1):
        for prompt, gen in requests_of(rng, per_minute):
            hits = int(prompt * hit_rate) // 16 * 16   # whole 16-token blocks served from cache
            prefill = (prompt - hits) / PREFILL_TOKENS_PER_S
            decode = gen * DECODE_S_PER_TOKEN * rng.uniform(0.8, 1.2)
            totals["requests"] += 1
            totals["prompt"] += prompt
            totals["generated"] += gen
            totals["queries"] += prompt
            totals["hits"] += hits
            totals["prefill_s"] += prefill
            totals["decode_s"] += decode
            totals["tpot_s"] += decode / max(gen - 1, 1)
            bucket(prompt_buckets, EDGES, prompt)
            bucket(gen_buckets, EDGES, gen)
            bucket(prefill_buckets, TIME_EDGES, prefill)
            generated.append(gen)
        scrape(minute * 60)
    path.write_text("\n".join(lines) + "\n# EOF\n", encoding="utf-8")
    return {**totals, "generated_per_request": generated}
