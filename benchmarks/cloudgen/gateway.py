"""The CPU-only service of a case: an API gateway on the CPU nodes, with no pod and no GPU.

It is declared by the nodes' pool tag (``[services.gateway] tags = {POOL_TAG = POOL}``: it owns the
lines of its CPU nodes, METHOD §4) and counted by an nginx access log of its own (combined format,
``telemetry/gateway-access.log``): per hour a few hundred requests (201 / 200 / 302 successful, 404
and 503 failed), a health check from the load balancer every minute, and one TLS probe that is no
HTTP request. Its unit cost is the cost of its lines (a share of the shared cost by GPU cost is 0:
it holds none) over its successful requests.
"""
from __future__ import annotations

import json
from datetime import timedelta

import numpy as np

from benchmarks.cloudgen.world import HOURS, START

NAME = "gateway"
LOG_FILE = "telemetry/gateway-access.log"
HEALTH_PATH = "/healthz"
#: per cloud: the tag its CPU nodes carry and the pool (node group) they form
POOL_TAGS = {"eks": ("eks:nodegroup-name", "cpu-gateway"), "gke": ("goog-k8s-node-pool-name", "default-pool"),
             "aks": ("aks-managed-poolName", "system")}
STATUSES = (201, 200, 302, 404, 503)
STATUS_P = (0.55, 0.30, 0.07, 0.05, 0.03)
PATHS = {201: "/v1/chat/completions", 200: "/v1/embeddings", 302: "/v1/models", 404: "/v1/unknown",
         503: "/v1/chat/completions"}
AGENT = "python-httpx/0.27.2"


def access_log(seed: int) -> tuple[bytes, int]:
    """The gateway's nginx log for the day, and how many of its lines are successful requests."""
    rng = np.random.default_rng([seed, 7])
    lines: list[tuple[float, str]] = []
    successful = 0
    for h in range(HOURS):
        for _ in range(int(rng.poisson(300))):
            status = int(rng.choice(STATUSES, p=STATUS_P))
            at = h * 3600 + float(rng.uniform(0, 3600))
            successful += status < 400
            lines.append((at, _line(at, "POST" if status != 302 else "GET", PATHS[status], status, AGENT)))
    for minute in range(HOURS * 60):
        at = minute * 60.0 + 0.5
        lines.append((at, _line(at, "GET", HEALTH_PATH, 200, "ELB-HealthChecker/2.0")))
    probe = "\\x16\\x03\\x01\\x00\\xa5\\x01\\x00\\x00\\xa1\\x03\\x03"  # a TLS hello on the HTTP port, as nginx logs it
    stamp = (START + timedelta(seconds=4321)).strftime("%d/%b/%Y:%H:%M:%S +0000")
    lines.append((4321.0, f'10.0.9.9 - - [{stamp}] "{probe}" 400 157 "-" "-"'))
    lines.sort(key=lambda item: item[0])
    return "".join(text + "\n" for _, text in lines).encode(), successful


def _line(at: float, method: str, path: str, status: int, agent: str) -> str:
    stamp = (START + timedelta(seconds=int(at))).strftime("%d/%b/%Y:%H:%M:%S +0000")
    size = 0 if status == 302 else 512 + int(at) % 4096
    return f'10.0.{int(at) % 250}.{int(at * 7) % 250} - - [{stamp}] "{method} {path} HTTP/1.1" {status} {size} "-" "{agent}"'


def claimed(tags_json: str | None, cloud: str) -> bool:
    """Whether a line with these Tags is the gateway's (its CPU nodes' pool tag)."""
    key, pool = POOL_TAGS[cloud]
    return bool(tags_json) and json.loads(tags_json).get(key) == pool
