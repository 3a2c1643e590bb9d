"""The hidden states every file of a case is made from: nodes, who holds each GPU, how busy it is.

The window is one UTC day, audited at a 1 h step; DCGM and kube-state-metrics are sampled every
15 minutes, so an hour's kernel-active fraction is the mean of its four samples. Busy fractions are
held in integer millionths (what the OpenMetrics file writes), so that the truth computed from them
is exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np

START = datetime(2026, 9, 1, tzinfo=timezone.utc)
END = START + timedelta(days=1)
HOURS = 24
SLOT_S = 900
SLOTS_PER_HOUR = 3600 // SLOT_S
SLOTS = HOURS * SLOTS_PER_HOUR
T0 = int(START.timestamp())


@dataclass(frozen=True)
class Service:
    """A declared service of the case: how its pods are named and what one request costs the GPU."""

    name: str
    namespace: str
    deployment: str
    model_name: str
    kernel_s_per_request: float
    prompt_tokens: int
    generated_tokens: int
    profiled: bool


@dataclass(frozen=True)
class Holder:
    """Who holds one GPU for the whole window: a service's pod, an undeclared pod, or nobody."""

    kind: str  # "service" | "undeclared" | "free"
    service: str = ""
    namespace: str = ""
    pod: str = ""


@dataclass(frozen=True)
class Node:
    """A Kubernetes node as the scheduler and dcgm-exporter name it."""

    name: str
    provider_id: str
    instance_type: str
    gpus: int
    gpu_model: str
    pool: str
    zone: str
    ip: str
    #: node labels kube-state-metrics exports beside the instance type (cloud specific)
    labels: tuple[tuple[str, str], ...] = ()


@dataclass
class World:
    """Everything drawn for one case."""

    cloud: str
    seed: int
    nodes: tuple[Node, ...]
    holders: dict[tuple[int, int], Holder]
    services: dict[str, Service]
    #: per GPU: kernel-active fraction per 15-minute slot, in millionths
    micro: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    #: per pod of a service: requests served per slot
    requests: dict[str, np.ndarray] = field(default_factory=dict)
    #: node index -> hours (0..23) in which its dcgm-exporter sent nothing
    missing_hours: dict[int, frozenset[int]] = field(default_factory=dict)
    uuids: dict[tuple[int, int], str] = field(default_factory=dict)

    def gpu_nodes(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.gpus]

    def hour_busy_micro(self, node: int, gpu: int, hour: int) -> int:
        """Sum of the hour's four samples (millionths): the hour's fraction is this / 4e6."""
        k = hour * SLOTS_PER_HOUR
        return int(self.micro[(node, gpu)][k:k + SLOTS_PER_HOUR].sum())


def pod_name(rng: np.random.Generator, deployment: str, replica_set: str, taken: set[str]) -> str:
    """``<deployment>-<replica-set hash>-<5 characters>``, as a Deployment names its pods."""
    alphabet = np.array(list("bcdfghjklmnpqrstvwxz2456789"))
    while True:
        name = f"{deployment}-{replica_set}-" + "".join(rng.choice(alphabet, 5))
        if name not in taken:
            taken.add(name)
            return name


def replica_set_hash(rng: np.random.Generator) -> str:
    alphabet = np.array(list("bcdfghjklmnpqrstvwxz2456789"))
    return "".join(rng.choice(alphabet, 10))


def diurnal(rng: np.random.Generator, low: float, high: float, peak_hour: float) -> np.ndarray:
    """Target busy fraction per slot: a daily cosine between low and high with AR(1) noise."""
    hour = np.arange(SLOTS) * SLOT_S / 3600.0
    shape = (np.cos(2 * np.pi * (hour - peak_hour) / 24.0) + 1.0) / 2.0
    ar = np.zeros(SLOTS)
    shocks = rng.normal(0.0, 0.01, SLOTS)
    for i in range(1, SLOTS):
        ar[i] = 0.9 * ar[i - 1] + shocks[i]
    return (low + (high - low) * shape) * (1.0 + ar)


SERVICE_LEVELS = {"chat": (0.18, 0.78, 20.0), "embed": (0.30, 0.62, 16.0)}


def draw_activity(world: World, rng: np.random.Generator) -> None:
    """Busy fractions and request counts for every GPU, from its holder."""
    curves = {name: diurnal(rng, *SERVICE_LEVELS[name]) for name in world.services}
    for (n, g), holder in sorted(world.holders.items()):
        if holder.kind == "free":
            frac = np.zeros(SLOTS)
        elif holder.kind == "undeclared":
            frac = np.clip(0.5 + rng.normal(0.0, 0.05, SLOTS), 0.0, 1.0)
        else:
            svc = world.services[holder.service]
            target = curves[svc.name] * (1.0 + rng.normal(0.0, 0.02))
            lam = np.clip(target, 0.0, 1.0) * SLOT_S / svc.kernel_s_per_request
            served = rng.poisson(lam).astype(np.int64)
            world.requests[holder.pod] = served
            frac = served * svc.kernel_s_per_request / SLOT_S * (1.0 + rng.normal(0.0, 0.005, SLOTS))
        world.micro[(n, g)] = np.rint(np.clip(frac, 0.0, 1.0) * 1e6).astype(np.int64)
        world.uuids[(n, g)] = "GPU-" + "-".join(rng.bytes(k).hex() for k in (4, 2, 2, 2, 6))


def layout(rng: np.random.Generator, plan: list[tuple[Node, list[str]]],
           services: dict[str, Service]) -> dict[tuple[int, int], Holder]:
    """Holders per GPU from a plan: per node, one entry per GPU ("chat", "embed", "undeclared", "free")."""
    taken: set[str] = set()
    sets = {name: replica_set_hash(rng) for name in list(services) + ["undeclared"]}
    holders = {}
    for n, (_node, gpus) in enumerate(plan):
        for g, who in enumerate(gpus):
            if who == "free":
                holders[(n, g)] = Holder("free")
            elif who == "undeclared":
                holders[(n, g)] = Holder("undeclared", "", "research",
                                         pod_name(rng, "notebook", sets["undeclared"], taken))
            else:
                svc = services[who]
                holders[(n, g)] = Holder("service", who, svc.namespace,
                                         pod_name(rng, svc.deployment, sets[who], taken))
    return holders


def services(chat_kps: float) -> dict[str, Service]:
    """The two declared services: chat (profiled; its kernel-seconds per request from the profile) and
    embed (no profile)."""
    return {
        "chat": Service("chat", "llm", "chat", "Qwen/Qwen1.5-0.5B-Chat", chat_kps, 2048, 1, True),
        "embed": Service("embed", "embed", "embed", "BAAI/bge-large-en-v1.5", 0.004, 512, 0, False),
    }
