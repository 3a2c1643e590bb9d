"""Build (once) the benchmark TSDB: 7 days × 128 GPUs at a 30 s scrape, backfilled with promtool.

    .venv/bin/python benchmarks/telemetry/build.py   # prints where the TSDB lies

16 p5.48xlarge nodes × 8 H100, one vLLM pod per GPU (96 chat, 32 embed), as dcgm-exporter,
kube-state-metrics and vLLM expose them behind a Prometheus scrape (target labels instance and
job): DCGM GR_ENGINE_ACTIVE, GPU_UTIL and POWER_USAGE (the last is not read by the audit); node
info and labels; pod info and GPU requests; vLLM request / token counters (a few pods restart, so
counters reset) and queue gauges. 1,440 series, 29 million samples, deterministic (seeded).

The OpenMetrics text is written in one file per 2-hour block (promtool re-reads a file once per
block it spans), imported two at a time, then deleted. The TSDB is cached outside the repository,
under ``$COSTAUDIT_BENCH_CACHE`` or ``~/.cache/costaudit/bench-tsdb/<version>``; CI never builds it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.servers.prometheus import binaries  # noqa: E402

VERSION = "v1"
START = 1_780_272_000          # 2026-06-01T00:00:00Z, a Monday
DAYS, SCRAPE, BLOCK = 7, 30, 7200
NODES, GPUS_PER_NODE = 16, 8
PARAMETERS = {"version": VERSION, "start": START, "days": DAYS, "scrape_seconds": SCRAPE,
              "nodes": NODES, "gpus": NODES * GPUS_PER_NODE}


def cache_dir() -> Path:
    """Where the TSDB is kept between runs."""
    base = os.environ.get("COSTAUDIT_BENCH_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "costaudit" / "bench-tsdb"
    return root / VERSION


def labels_text(labels: dict[str, str]) -> str:
    """``{a="x",...}``."""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


class Writer:
    """One OpenMetrics file per 2-hour block; a series is written block by block."""

    def __init__(self, folder: Path):
        self.times = START + SCRAPE * np.arange(DAYS * 86400 // SCRAPE)
        self.per_block = BLOCK // SCRAPE
        self.files = [open(folder / f"block-{i:03d}.om", "w", encoding="utf-8")
                      for i in range(len(self.times) // self.per_block)]
        self.samples = 0

    def series(self, name: str, labels: dict[str, str], values: np.ndarray, fmt: str) -> None:
        """All samples of one series, split over the block files."""
        head = name + labels_text(labels) + " "
        text = [f"{head}{v:{fmt}} {t}\n" for v, t in zip(values.tolist(), self.times.tolist())]
        for i, handle in enumerate(self.files):
            handle.writelines(text[i * self.per_block:(i + 1) * self.per_block])
        self.samples += len(text)

    def close(self) -> list[Path]:
        """End every file with # EOF; their paths."""
        for handle in self.files:
            handle.write("# EOF\n")
            handle.close()
        return [Path(h.name) for h in self.files]


def walk(rng: np.random.Generator, n: int, lo: float, hi: float, scale: float) -> np.ndarray:
    """A bounded random walk (a utilisation-like gauge)."""
    steps = rng.normal(0, scale, n).cumsum() + rng.uniform(lo, hi)
    span = hi - lo
    folded = np.abs(((steps - lo) % (2 * span)) - span)  # reflect into [lo, hi]
    return hi - folded


def node_series(out: Writer, node: str, index: int) -> None:
    """kube_node_info and kube_node_labels of one node."""
    ones = np.ones(len(out.times))
    target = {"instance": "kube-state-metrics:8080", "job": "kube-state-metrics"}
    out.series("kube_node_info", {"node": node, "provider_id": f"aws:///us-east-1a/i-0{index:016x}",
                                  "kernel_version": "6.1.0", "os_image": "Bottlerocket OS 1.20",
                                  "container_runtime_version": "containerd://1.6.28",
                                  "internal_ip": f"10.0.{index}.10", **target}, ones, "g")
    out.series("kube_node_labels", {"node": node, "label_node_kubernetes_io_instance_type":
                                    "p5.48xlarge", "label_topology_kubernetes_io_zone": "us-east-1a",
                                    **target}, ones, "g")


def gpu_series(out: Writer, rng, node: str, gpu: int, pod: str, namespace: str) -> np.ndarray:
    """DCGM gauges of one GPU; returns its busy fraction (drives the serving counters)."""
    n = len(out.times)
    busy = walk(rng, n, 0.05, 0.95, 0.02)
    labels = {"gpu": str(gpu), "UUID": f"GPU-{zlib.crc32(f'{node}/{gpu}'.encode()):010d}-bench",
              "device": f"nvidia{gpu}", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": node,
              "DCGM_FI_DRIVER_VERSION": "550.90.07", "container": "vllm", "namespace": namespace,
              "pod": pod, "instance": f"{node}:9400", "job": "dcgm-exporter"}
    out.series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, busy.round(6), "g")
    out.series("DCGM_FI_DEV_GPU_UTIL", labels, np.minimum(100, busy * 105).round(), ".0f")
    out.series("DCGM_FI_DEV_POWER_USAGE", labels, (120 + 580 * busy).round(3), "g")
    return busy


def pod_series(out: Writer, rng, node: str, pod: str, namespace: str, busy: np.ndarray) -> None:
    """kube-state-metrics pod series and the vLLM counters and gauges of one pod."""
    n = len(out.times)
    ksm = {"instance": "kube-state-metrics:8080", "job": "kube-state-metrics"}
    uid = f"{zlib.crc32(pod.encode()):010d}"
    out.series("kube_pod_info", {"namespace": namespace, "pod": pod, "uid": uid, "node": node,
                                 "created_by_kind": "ReplicaSet", "priority_class": "inference",
                                 **ksm}, np.ones(n), "g")
    out.series("kube_pod_container_resource_requests", {
        "namespace": namespace, "pod": pod, "uid": uid, "container": "vllm", "node": node,
        "resource": "nvidia_com_gpu", "unit": "integer", **ksm}, np.ones(n), "g")
    rate = rng.poisson(busy * 40)
    restart = rng.integers(n) if rng.random() < 0.1 else n  # a few pods restart: counters reset
    model = "Qwen/Qwen2.5-7B-Instruct" if namespace == "llm" else "BAAI/bge-large-en-v1.5"
    vllm = {"model_name": model, "engine": "0", "namespace": namespace, "pod": pod,
            "instance": f"{pod}:8000", "job": "vllm"}
    for reason, share in (("stop", 0.9), ("length", 0.1)):
        out.series("vllm:request_success_total", {"finished_reason": reason, **vllm},
                   _counter(rate * share, restart), ".0f")
    out.series("vllm:prompt_tokens_total", vllm, _counter(rate * 900.0, restart), ".0f")
    out.series("vllm:generation_tokens_total", vllm, _counter(rate * 180.0, restart), ".0f")
    out.series("vllm:num_requests_running", vllm, np.minimum(rate, 64).astype(float), ".0f")
    out.series("vllm:num_requests_waiting", vllm, np.maximum(rate - 64, 0).astype(float), ".0f")


def _counter(increments: np.ndarray, restart: int) -> np.ndarray:
    """A cumulative counter that restarts from 0 at index ``restart``."""
    total = np.floor(increments).cumsum()
    if restart < len(total):
        total[restart:] -= total[restart - 1] if restart else 0
    return total


def write_text(folder: Path) -> tuple[list[Path], int]:
    """Every series of the cluster into block files; (files, samples)."""
    rng = np.random.default_rng(20260601)
    out = Writer(folder)
    for index in range(NODES):
        node = f"ip-10-0-{index}-10.ec2.internal"
        node_series(out, node, index)
        for gpu in range(GPUS_PER_NODE):
            number = index * GPUS_PER_NODE + gpu
            namespace, service = ("llm", "chat") if number < 96 else ("embed", "embed")
            pod = f"{service}-7c9d5f8b6d-{number:05d}"
            busy = gpu_series(out, rng, node, gpu, pod, namespace)
            pod_series(out, rng, node, pod, namespace, busy)
    return out.close(), out.samples


def backfill(files: list[Path], tsdb: Path) -> None:
    """promtool each block file into the TSDB, two at a time, deleting each when done."""
    _, promtool = binaries()

    def run(path: Path) -> None:
        """One import."""
        subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(path),
                        str(tsdb)], check=True, capture_output=True, timeout=1800)
        path.unlink()

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(run, files))


def build(force: bool = False) -> Path:
    """The cached TSDB folder, built first when missing (or when ``force``)."""
    folder = cache_dir()
    ready = folder / "READY.json"
    if ready.exists() and not force:
        return folder / "tsdb"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "text").mkdir(parents=True)
    began = time.monotonic()
    files, samples = write_text(folder / "text")
    written = time.monotonic()
    backfill(files, folder / "tsdb")
    shutil.rmtree(folder / "text")
    stats = {**PARAMETERS, "samples": samples, "text_seconds": round(written - began, 1),
             "backfill_seconds": round(time.monotonic() - written, 1)}
    ready.write_text(json.dumps(stats, indent=2))
    return folder / "tsdb"


if __name__ == "__main__":
    path = build(force="--force" in sys.argv)
    print(path)
    print((path.parent / "READY.json").read_text())
