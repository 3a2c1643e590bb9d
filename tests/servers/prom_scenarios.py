"""Seeded synthetic telemetry that exercises every rule the Prometheus connector must reproduce.

Each scenario lives on its own UTC day of 2024 and is written as its own OpenMetrics file, so
that the file connector reads exactly what the one shared Prometheus holds for that window.
Irregular scrapes, dropped samples, samples on interval boundaries and at the window end, pods
changing mid-interval (ties broken by sample time), exported_* labels, GPU_UTIL-only GPUs beside
GR_ENGINE_ACTIVE ones, node metadata that changes, requests without a node label, several vLLM
engines, counter resets inside an interval and between intervals, lone samples, the bare counter
name beside ``_total``, and label values holding quotes and backslashes.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

DAY0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
STEPS = [60, 300, 420, 600, 900, 3600]


@dataclass(frozen=True)
class Scenario:
    """One window of synthetic telemetry and the file holding it."""

    seed: int
    start: datetime
    end: datetime
    step: int
    path: Path


def _text(name: str, labels: dict[str, str], value, t: float) -> str:
    """One sample line (label values escaped)."""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return f"{name}{{{body}}} {value} {t:.3f}"


def _escape(value: str) -> str:
    """OpenMetrics label value escaping."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _times(rng: random.Random, lo: float, hi: float, grid: tuple[float, int]) -> list[float]:
    """Scrape times in [lo, hi]: a jittered grid with drops, plus some interval boundaries.

    ``grid`` is (window start, step): boundaries are start + i·step.
    """
    every = rng.choice([15, 30, 60, 90, 150])
    t, out = lo + rng.choice([0, 0, rng.randrange(every)]), []
    while t <= hi:
        if rng.random() > 0.08:
            out.append(t + (rng.choice([0.0, 0.25, 0.5]) if rng.random() < 0.2 else 0.0))
        t += every
    origin, step = grid
    first = -int((origin - lo) // step)
    out += [origin + step * i for i in range(first, int((hi - origin) // step) + 1)
            if rng.random() < 0.3 and lo <= origin + step * i <= hi]
    return sorted(set(out))


def _segments(rng: random.Random, times: list[float], choices: list) -> list:
    """A value per time that changes at a few random moments."""
    if not times:
        return []
    cuts = sorted(rng.sample(times, min(len(times), rng.randrange(0, 4))))
    value, out = rng.choice(choices), []
    for t in times:
        if cuts and t >= cuts[0]:
            cuts.pop(0)
            value = rng.choice(choices)
        out.append(value)
    return out


def _dcgm(rng, lines, host, lo, hi, grid) -> None:
    """GR_ENGINE_ACTIVE and/or GPU_UTIL of two GPUs, pods changing, exported_* sometimes."""
    pods = [("", "", ""), ("chat-1", "llm", "vllm"), ("chat-2", "llm", "vllm"),
            ("embed-1", "emb", "server")]
    for gpu in range(2):
        kinds = rng.choice([("GR",), ("UTIL",), ("GR", "UTIL")])
        for kind in kinds:
            times = _times(rng, lo, hi, grid)
            if kind == "GR" and "UTIL" in kinds and rng.random() < 0.5:
                times = [t for t in times if t > (lo + hi) / 2]  # GR only late: still preferred
            owners = _segments(rng, times, pods)
            models = _segments(rng, times, ["NVIDIA H100", 'NVIDIA "H100" \\ SXM'])
            exported = rng.random() < 0.4
            for t, (pod, ns, container), model in zip(times, owners, models):
                labels = {"gpu": str(gpu), "UUID": f"GPU-{host}-{gpu}", "device": f"nvidia{gpu}",
                          "modelName": model, "Hostname": host}
                if exported:
                    labels.update(exported_pod=pod, exported_namespace=ns, exported_container=container,
                                  pod="dcgm-exporter-x", namespace="gpu-operator")
                elif pod:
                    labels.update(pod=pod, namespace=ns, container=container)
                if kind == "GR":
                    lines.append(_text("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, round(rng.random(), 6), t))
                else:
                    lines.append(_text("DCGM_FI_DEV_GPU_UTIL", labels, rng.randrange(101), t))


def _nodes(rng, lines, host, lo, hi, grid) -> None:
    """kube_node_info with a provider id that may change; kube_node_labels with a type."""
    times = _times(rng, lo, hi, grid)
    ids = _segments(rng, times, [f"aws:///us-east-1a/i-{host}", f"aws:///us-east-1b/i-{host}-b", ""])
    exported = rng.random() < 0.3
    for t, provider in zip(times, ids):
        labels = {"exported_node": host, "node": "ksm"} if exported else {"node": host}
        labels["provider_id"] = provider
        if rng.random() < 0.5:
            labels["label_node_kubernetes_io_instance_type"] = "p5.48xlarge"
        lines.append(_text("kube_node_info", labels, 1, t))
    for t in _times(rng, lo, hi, grid)[::3]:
        lines.append(_text("kube_node_labels", {"node": host, "label_beta_kubernetes_io_instance_type":
                                                "p5.48xlarge-beta"}, 1, t))


def _scheduler(rng, lines, hosts, lo, hi, grid) -> None:
    """GPU requests (one pod without a node label, a CPU series to ignore) and kube_pod_info."""
    for pod, with_node in (("chat-1", True), ("chat-2", False), ("embed-1", False)):
        times = _times(rng, lo, hi, grid)
        amounts = _segments(rng, times, [1, 2, 4])
        for t, gpus in zip(times, amounts):
            labels = {"namespace": "llm", "pod": pod, "container": "vllm", "resource": "nvidia_com_gpu",
                      "unit": "integer"}
            if with_node:
                labels["node"] = hosts[0]
            lines.append(_text("kube_pod_container_resource_requests", labels, gpus, t))
            lines.append(_text("kube_pod_container_resource_requests",
                               {**labels, "resource": "cpu", "unit": "core"}, 3, t))
        placement = _times(rng, lo, hi, grid)
        for t, host in zip(placement, _segments(rng, placement, hosts)):
            lines.append(_text("kube_pod_info", {"namespace": "llm", "pod": pod, "node": host,
                                                 "uid": f"u-{pod}"}, 1, t))


def _serving(rng, lines, lo, hi, grid, end) -> None:
    """vLLM counters (resets, lone samples, the bare name, a sample at the window end) and queue."""
    for pod in ("chat-1", "chat-2"):
        for reason in ("stop", "length"):
            for name in ("vllm:request_success_total", "vllm:prompt_tokens_total",
                         "vllm:generation_tokens" if pod == "chat-2" else "vllm:generation_tokens_total"):
                times = _times(rng, lo, hi, grid)
                if rng.random() < 0.3:
                    times = sorted(set(rng.sample(times, min(len(times), 3))))  # sparse: lone samples
                if rng.random() < 0.5:
                    times = sorted(set(times + [end]))
                value = rng.randrange(1000)
                for t in times:
                    value = rng.randrange(5) if rng.random() < 0.05 else value + rng.randrange(50)
                    labels = {"model_name": 'Qwen/"chat" \\ 0.5B', "namespace": "llm", "pod": pod}
                    if name.startswith("vllm:request_success"):
                        labels["finished_reason"] = reason
                    elif reason == "length":
                        continue
                    lines.append(_text(name, labels, value, t))
        for engine in ("0", "1") if pod == "chat-1" else ("0",):
            for name in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
                for t in _times(rng, lo, hi, grid):
                    labels = {"model_name": "Qwen", "namespace": "llm", "pod": pod, "engine": engine}
                    lines.append(_text(name, labels, rng.randrange(12), t))


def scenario(seed: int, folder: Path) -> Scenario:
    """Scenario ``seed``: its window, step and OpenMetrics file (written into ``folder``)."""
    rng = random.Random(seed)
    day = DAY0 + timedelta(days=seed)
    start = day + timedelta(hours=rng.randrange(2), minutes=rng.choice([0, 7, 30]))
    step = rng.choice(STEPS)
    end = start + timedelta(seconds=rng.randrange(2, 5) * 3600 + rng.choice([0, 0, 123]))
    lo, hi = start.timestamp() - 600, end.timestamp() + 600
    grid = (start.timestamp(), step)
    metadata = start.timestamp(), end.timestamp() - 1  # the file connector reads these unwindowed
    hosts = [f"s{seed}-node-a", f"s{seed}-node-b"]
    lines: list[str] = []
    for host in hosts:
        _dcgm(rng, lines, host, lo, hi, grid)
        _nodes(rng, lines, host, *metadata, grid)
    _scheduler(rng, lines, hosts, *metadata, grid)
    _serving(rng, lines, lo, hi, grid, end.timestamp())
    path = folder / f"scenario-{seed}.om"
    path.write_text("\n".join(lines) + "\n# EOF\n", encoding="utf-8")
    return Scenario(seed, start, end, step, path)
