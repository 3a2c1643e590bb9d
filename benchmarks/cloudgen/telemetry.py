"""The OpenMetrics file: dcgm-exporter, kube-state-metrics and vLLM series as a Prometheus export.

Label sets follow what the exporters write: dcgm-exporter (gpu, UUID, pci_bus_id, device, modelName,
Hostname, DCGM_FI_DRIVER_VERSION, and container / namespace / pod when its Kubernetes mapping finds a
pod on the GPU: a GPU no pod holds carries none of the three), kube-state-metrics v2 (kube_node_info
with the cloud's provider_id, kube_node_labels with the allow-listed node labels, kube_pod_info,
kube_pod_container_resource_requests with resource="nvidia_com_gpu"), and vLLM's counters with the
namespace and pod labels Prometheus adds to the scrape target. Timestamps are in seconds.
"""
from __future__ import annotations

import numpy as np

from benchmarks.cloudgen.world import SLOT_S, SLOTS, SLOTS_PER_HOUR, T0, World

DRIVER = "550.127.05"
BUS_IDS = ("00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
           "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0")


def labels_text(labels: list[tuple[str, str]]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels)


def micro_text(value: int) -> str:
    return f"{value // 1_000_000}.{value % 1_000_000:06d}"


class Writer:
    """Families in order, each with its HELP and TYPE, samples in time order per series."""

    def __init__(self) -> None:
        self.out: list[str] = []

    def family(self, name: str, kind: str, help_text: str,
               series: list[tuple[str, list[str], list[int]]]) -> None:
        self.out.append(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n")
        sample = name + "_total" if kind == "counter" else name
        for labels, values, stamps in series:
            prefix = f"{sample}{{{labels}}} "
            self.out.append("".join(f"{prefix}{v} {t}\n" for v, t in zip(values, stamps)))

    def text(self) -> bytes:
        return ("".join(self.out) + "# EOF\n").encode()


def write_telemetry(world: World) -> bytes:
    gauge_ts = [T0 + SLOT_S * k for k in range(SLOTS)]
    counter_ts = [T0 + SLOT_S * k for k in range(SLOTS + 1)]
    ones = ["1"] * SLOTS
    w = Writer()
    w.family("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
             _dcgm_series(world, gauge_ts))
    w.family("kube_node_info", "gauge", "Information about a cluster node.", [
        (labels_text([("container_runtime_version", "containerd://1.7.22"), ("internal_ip", node.ip),
                      ("kernel_version", "6.1.112"), ("kubelet_version", "v1.31.4"),
                      ("node", node.name), ("os_image", "Ubuntu 22.04.5 LTS"),
                      ("provider_id", node.provider_id), ("system_uuid", _system_uuid(world, i))]),
         ones, gauge_ts)
        for i, node in enumerate(world.nodes)])
    w.family("kube_node_labels", "gauge", "Kubernetes labels converted to Prometheus labels.", [
        (labels_text(sorted([("label_node_kubernetes_io_instance_type", node.instance_type),
                             ("label_topology_kubernetes_io_zone", node.zone), ("node", node.name),
                             *node.labels])), ones, gauge_ts)
        for node in world.nodes])
    pods = sorted(((h.namespace, h.pod, n) for (n, _g), h in world.holders.items() if h.pod))
    w.family("kube_pod_info", "gauge", "Information about pod.", [
        (labels_text([("created_by_kind", "ReplicaSet"), ("created_by_name", pod.rsplit("-", 1)[0]),
                      ("host_ip", world.nodes[n].ip), ("namespace", ns), ("node", world.nodes[n].name),
                      ("pod", pod)]), ones, gauge_ts)
        for ns, pod, n in pods])
    w.family("kube_pod_container_resource_requests", "gauge",
             "The number of requested request resource by a container.", [
        (labels_text([("container", _container(pod)), ("namespace", ns), ("node", world.nodes[n].name),
                      ("pod", pod), ("resource", "nvidia_com_gpu"), ("unit", "integer")]), ones, gauge_ts)
        for ns, pod, n in pods])
    _vllm(w, world, counter_ts)
    return w.text()


def _container(pod: str) -> str:
    return "notebook" if pod.startswith("notebook-") else "vllm"


def _system_uuid(world: World, i: int) -> str:
    rng = np.random.default_rng(world.seed * 1000 + i)
    return "-".join(rng.bytes(k).hex() for k in (4, 2, 2, 2, 6))


def _dcgm_series(world: World, gauge_ts: list[int]) -> list:
    series = []
    for n in world.gpu_nodes():
        node = world.nodes[n]
        missing = world.missing_hours.get(n, frozenset())
        keep = [k for k in range(SLOTS) if k // SLOTS_PER_HOUR not in missing]
        for g in range(node.gpus):
            holder = world.holders[(n, g)]
            labels = [("gpu", str(g)), ("UUID", world.uuids[(n, g)]), ("pci_bus_id", BUS_IDS[g % 8]),
                      ("device", f"nvidia{g}"), ("modelName", node.gpu_model), ("Hostname", node.name),
                      ("DCGM_FI_DRIVER_VERSION", DRIVER)]
            if holder.pod:
                labels += [("container", _container(holder.pod)), ("namespace", holder.namespace),
                           ("pod", holder.pod)]
            micro = world.micro[(n, g)]
            series.append((labels_text(labels), [micro_text(int(micro[k])) for k in keep],
                           [gauge_ts[k] for k in keep]))
    return series


def _vllm(w: Writer, world: World, counter_ts: list[int]) -> None:
    served = sorted((h.service, h.namespace, h.pod) for h in world.holders.values() if h.kind == "service")
    rng = np.random.default_rng(world.seed + 7)
    offsets = {pod: int(rng.integers(1_000_000, 50_000_000)) for _s, _ns, pod in served}

    def counter(per_request) -> list:
        out = []
        for name, ns, pod in served:
            svc = world.services[name]
            per = per_request(svc)
            values = offsets[pod] * per + np.concatenate([[0], np.cumsum(world.requests[pod])]) * per
            labels = [("engine", "0"), ("model_name", svc.model_name), ("namespace", ns), ("pod", pod)]
            out.append((labels, [str(int(v)) for v in values], counter_ts))
        return out

    def with_reason(series: list) -> list:
        return [(labels_text(lb[:1] + [("finished_reason", "stop")] + lb[1:]), v, t) for lb, v, t in series]

    def plain(series: list) -> list:
        return [(labels_text(lb), v, t) for lb, v, t in series]

    w.family("vllm:generation_tokens", "counter", "Number of generation tokens processed.",
             plain(counter(lambda s: s.generated_tokens)))
    w.family("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.",
             plain(counter(lambda s: s.prompt_tokens)))
    w.family("vllm:request_success", "counter", "Count of successfully processed requests.",
             with_reason(counter(lambda s: 1)))
