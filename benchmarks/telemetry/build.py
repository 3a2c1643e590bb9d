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

``build_fleet`` (benchmarks/fleet) writes the same series for any number of p5.48xlarge nodes, any
span and scrape interval, one 2-hour block at a time (each block file is imported by promtool and
deleted while the next is written, so the text never lies on disk whole); each series carries its
state from block to block (the walk goes on, counters keep counting, a tenth of the pods restart
once). Its node ``n`` has the instance id ``i-%017x`` of ``first_instance + n``, as the billing
generator's ``--fleet`` option bills it. The default build above is unchanged by it.
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
from dataclasses import dataclass
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


def walk(rng: np.random.Generator, n: int, lo: float, hi: float, scale: float,
         start: float | None = None) -> np.ndarray:
    """A bounded random walk (a utilisation-like gauge), from ``start`` when given."""
    steps = rng.normal(0, scale, n).cumsum() + (rng.uniform(lo, hi) if start is None else start)
    span = hi - lo
    folded = np.abs(((steps - lo) % (2 * span)) - span)  # reflect into [lo, hi]
    return hi - folded


def node_series(out: Writer, node: str, index: int, instance: int | None = None) -> None:
    """kube_node_info and kube_node_labels of one node (its instance id from ``instance``, else ``index``)."""
    ones = np.ones(len(out.times))
    target = {"instance": "kube-state-metrics:8080", "job": "kube-state-metrics"}
    instance = index if instance is None else instance
    out.series("kube_node_info", {"node": node, "provider_id": f"aws:///us-east-1a/i-0{instance:016x}",
                                  "kernel_version": "6.1.0", "os_image": "Bottlerocket OS 1.20",
                                  "container_runtime_version": "containerd://1.6.28",
                                  "internal_ip": f"10.0.{index}.10", **target}, ones, "g")
    out.series("kube_node_labels", {"node": node, "label_node_kubernetes_io_instance_type":
                                    "p5.48xlarge", "label_topology_kubernetes_io_zone": "us-east-1a",
                                    **target}, ones, "g")


def gpu_series(out: Writer, rng, node: str, gpu: int, pod: str, namespace: str,
               carry: dict | None = None) -> np.ndarray:
    """DCGM gauges of one GPU; returns its busy fraction (drives the serving counters).
    ``carry`` (a block of a longer build) holds the walk's last value between calls."""
    n = len(out.times)
    busy = walk(rng, n, 0.05, 0.95, 0.02, None if carry is None else carry.get("busy"))
    if carry is not None:
        carry["busy"] = float(busy[-1])
    labels = {"gpu": str(gpu), "UUID": f"GPU-{zlib.crc32(f'{node}/{gpu}'.encode()):010d}-bench",
              "device": f"nvidia{gpu}", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": node,
              "DCGM_FI_DRIVER_VERSION": "550.90.07", "container": "vllm", "namespace": namespace,
              "pod": pod, "instance": f"{node}:9400", "job": "dcgm-exporter"}
    out.series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, busy.round(6), "g")
    out.series("DCGM_FI_DEV_GPU_UTIL", labels, np.minimum(100, busy * 105).round(), ".0f")
    out.series("DCGM_FI_DEV_POWER_USAGE", labels, (120 + 580 * busy).round(3), "g")
    return busy


def pod_series(out: Writer, rng, node: str, pod: str, namespace: str, busy: np.ndarray,
               carry: dict | None = None) -> None:
    """kube-state-metrics pod series and the vLLM counters and gauges of one pod. ``carry`` (a
    block of a longer build) holds the counters' totals, the samples so far and the one restart."""
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
    if carry is None:
        restart = rng.integers(n) if rng.random() < 0.1 else n  # a few pods restart: counters reset
        totals: dict = {}
    else:
        local = carry["restart"] - carry.get("offset", 0)
        restart = local if 0 <= local < n else n
        totals = carry.setdefault("totals", {})
        carry["offset"] = carry.get("offset", 0) + n

    def counter(key: str, increments: np.ndarray) -> np.ndarray:
        """The counter's values in this call, from the total the last call left."""
        values = _counter(increments, restart, totals.get(key, 0.0))
        totals[key] = float(values[-1])
        return values

    model = "Qwen/Qwen2.5-7B-Instruct" if namespace == "llm" else "BAAI/bge-large-en-v1.5"
    vllm = {"model_name": model, "engine": "0", "namespace": namespace, "pod": pod,
            "instance": f"{pod}:8000", "job": "vllm"}
    for reason, share in (("stop", 0.9), ("length", 0.1)):
        out.series("vllm:request_success_total", {"finished_reason": reason, **vllm},
                   counter(reason, rate * share), ".0f")
    out.series("vllm:prompt_tokens_total", vllm, counter("prompt", rate * 900.0), ".0f")
    out.series("vllm:generation_tokens_total", vllm, counter("generation", rate * 180.0), ".0f")
    out.series("vllm:num_requests_running", vllm, np.minimum(rate, 64).astype(float), ".0f")
    out.series("vllm:num_requests_waiting", vllm, np.maximum(rate - 64, 0).astype(float), ".0f")


def _counter(increments: np.ndarray, restart: int, base: float = 0.0) -> np.ndarray:
    """A cumulative counter from ``base`` that restarts from 0 at index ``restart``."""
    total = np.floor(increments).cumsum() + base
    if restart < len(total):
        total[restart:] -= total[restart - 1] if restart else base
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


# The families the audit's money and unit costs read (docs/telemetry.md): kernel activity, node
# and pod placement (the GPU requests carry the node, so kube_pod_info is not needed), finished
# requests. ``Fleet.families = "audit"`` writes only these, and only the "stop" requests.
AUDIT_FAMILIES = frozenset({"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "kube_node_info", "kube_node_labels",
                            "kube_pod_container_resource_requests", "vllm:request_success_total"})


class BlockWriter(Writer):
    """One OpenMetrics file with one time slice of every series (a block of ``build_fleet``);
    a family not in ``keep`` (when given) is left out."""

    def __init__(self, path: Path, times: np.ndarray, keep: frozenset | None = None):
        self.times = times
        self.per_block = len(times)
        self.files = [open(path, "w", encoding="utf-8")]
        self.samples = 0
        self.keep = keep

    def series(self, name: str, labels: dict[str, str], values: np.ndarray, fmt: str) -> None:
        """The series' samples in this block, unless its family (or finished reason) is left out."""
        if self.keep is None or (name in self.keep and labels.get("finished_reason", "stop") == "stop"):
            super().series(name, labels, values, fmt)


@dataclass(frozen=True)
class Fleet:
    """A cluster of p5.48xlarge nodes: 3 GPUs in 4 serve chat (namespace llm), 1 embed."""

    nodes: int
    start: int
    seconds: int
    scrape: int = 60
    first_instance: int = 2000  # the billing generator's --fleet ids: after its 2,000 resources
    seed: int = 20250101
    families: str = "all"  # or "audit": AUDIT_FAMILIES only

    def node_name(self, index: int) -> str:
        """The node's Kubernetes name (an EC2 private DNS name)."""
        return f"ip-10-{1 + index // 250}-{index % 250}-10.ec2.internal"


def write_fleet_block(fleet: Fleet, path: Path, times: np.ndarray, rng, carry: dict) -> int:
    """Every series of the fleet over ``times`` into ``path``; the samples written."""
    out = BlockWriter(path, times, AUDIT_FAMILIES if fleet.families == "audit" else None)
    for index in range(fleet.nodes):
        node = fleet.node_name(index)
        node_series(out, node, index, fleet.first_instance + index)
        for gpu in range(GPUS_PER_NODE):
            number = index * GPUS_PER_NODE + gpu
            namespace, service = ("embed", "embed") if number % 4 == 3 else ("llm", "chat")
            pod = f"{service}-7c9d5f8b6d-{number:05d}"
            state = carry[number]
            busy = gpu_series(out, rng, node, gpu, pod, namespace, state)
            pod_series(out, rng, node, pod, namespace, busy, state)
    out.close()
    return out.samples


def build_fleet(fleet: Fleet, tsdb: Path, scratch: Path, workers: int = 2) -> dict:
    """The fleet's TSDB under ``tsdb``, block by block; timings and counts."""
    _, promtool = binaries()
    scratch.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(fleet.seed)
    total = fleet.seconds // fleet.scrape
    carry = {number: {"restart": int(rng.integers(total)) if rng.random() < 0.1 else total}
             for number in range(fleet.nodes * GPUS_PER_NODE)}
    times = fleet.start + fleet.scrape * np.arange(total)
    per_block = BLOCK // fleet.scrape
    began, writing, samples = time.monotonic(), 0.0, 0

    def run(path: Path) -> None:
        """One import, then the file is deleted."""
        subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(path),
                        str(tsdb)], check=True, capture_output=True, timeout=1800)
        path.unlink()

    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending = []
        for block, first in enumerate(range(0, total, per_block)):
            path = scratch / f"block-{block:04d}.om"
            wrote = time.monotonic()
            samples += write_fleet_block(fleet, path, times[first:first + per_block], rng, carry)
            writing += time.monotonic() - wrote
            pending.append(pool.submit(run, path))
            while len(pending) > workers:  # at most this many files wait on disk
                pending.pop(0).result()
        for job in pending:
            job.result()
    return {"nodes": fleet.nodes, "gpus": fleet.nodes * GPUS_PER_NODE, "start": fleet.start,
            "seconds": fleet.seconds, "scrape_seconds": fleet.scrape, "families": fleet.families,
            "samples": samples,
            "series": samples // total if total else 0, "text_seconds": round(writing, 1),
            "build_seconds": round(time.monotonic() - began, 1)}


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
