"""GKE: GPU nodes billed in parts (vCPU, RAM and GPU SKUs of the same machine).

GCP's FOCUS export (FOCUS 1.0 columns, exported from BigQuery as CSV: timestamps
``YYYY-MM-DD HH:MM:SS UTC``, nulls as empty cells): hourly lines; ResourceId the global name with
the numeric instance id (``//compute.googleapis.com/projects/P/zones/Z/instances/7311289012345678901``),
ResourceName the instance name; a3 / g2 machines billed as "A3 Instance Core", "A3 Instance Ram" and
"Nvidia H100 80GB GPU" (quantity in GPU-hours), n2 CPU nodes as "N2 Instance Core" / "Ram"; the GKE
cluster management fee ("Regional Kubernetes Clusters"), Cloud NAT ("NAT Gateway: Uptime charge",
"Data Processing charge"), load balancing, internet data transfer out and Cloud Logging. PricingUnit
is the SKU's pricing unit (hour, gibibyte hour, gibibyte), ConsumedQuantity the usage in seconds /
byte-seconds / bytes. kube-state-metrics gives provider_id ``gce://PROJECT/ZONE/INSTANCE_NAME``.
Prices are us-central1 list prices (illustrative).
"""
from __future__ import annotations

import hashlib
from datetime import datetime
from decimal import Decimal

import numpy as np

from benchmarks.cloudgen.cloud import CloudCase, NativeBilling, at, daily, gigabytes, hourly
from benchmarks.cloudgen.focus import FOCUS_10, tags
from benchmarks.cloudgen.native import GcpIds, gcp_export
from benchmarks.cloudgen.world import HOURS, Node, World, draw_activity, layout

BILLING_ACCOUNT, PROJECT, OTHER = "01A2B3-C4D5E6-F7A8B9", "acme-inference-prod", "acme-analytics"
CLUSTER, REGION = "inference", "us-central1"
GIB = 1024 ** 3
MACHINES = {  # machine type: (family SKU prefix, vCPUs, GiB, GPUs, GPU SKU, DCGM modelName)
    "a3-highgpu-8g": ("A3", 208, 1872, 8, "Nvidia H100 80GB GPU", "NVIDIA H100 80GB HBM3"),
    "g2-standard-48": ("G2", 48, 192, 4, "Nvidia L4 GPU", "NVIDIA L4"),
    "n2-standard-8": ("N2", 8, 32, 0, "", ""),
}
PRICES = {  # SKU description (without " running in Americas") -> $ per pricing unit
    "A3 Instance Core": Decimal("0.025275"), "A3 Instance Ram": Decimal("0.003389"),
    "Nvidia H100 80GB GPU": Decimal("9.796551"),
    "G2 Instance Core": Decimal("0.024988"), "G2 Instance Ram": Decimal("0.002927"),
    "Nvidia L4 GPU": Decimal("0.560040"),
    "N2 Instance Core": Decimal("0.031611"), "N2 Instance Ram": Decimal("0.004237"),
}
PLAN = [  # (machine type, zone, node pool, holders per GPU)
    ("a3-highgpu-8g", "us-central1-a", "a3-pool", ["chat"] * 8),
    ("a3-highgpu-8g", "us-central1-a", "a3-pool", ["chat"] * 5 + ["undeclared", "free", "free"]),
    ("g2-standard-48", "us-central1-b", "g2-pool", ["embed"] * 3 + ["free"]),
    ("n2-standard-8", "us-central1-a", "default-pool", []),
    ("n2-standard-8", "us-central1-b", "default-pool", []),
]
PROJECT_NUMBERS = {PROJECT: "480216739054", OTHER: "733905128846"}
SERVICE_IDS = {"Compute Engine": "6F81-5844-456A", "Kubernetes Engine": "CCD8-9BF1-090E",
               "Networking": "E505-1604-58F8", "Cloud Logging": "5490-F7B7-8DF6"}


def stamp(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%d %H:%M:%S UTC")


def sku(rng_key: str) -> str:
    """A stable GCP-style SKU id (XXXX-XXXX-XXXX)."""
    digest = hashlib.sha256(rng_key.encode()).hexdigest().upper()
    return f"{digest[0:4]}-{digest[4:8]}-{digest[8:12]}"


def usage(service: str, category: str, description: str, unit: str, consumed_unit: str,
          project: str = PROJECT, **extra) -> dict:
    row = {
        "BillingAccountId": BILLING_ACCOUNT, "BillingAccountName": "Acme Corp", "BillingCurrency": "USD",
        "ChargeCategory": "Usage", "ChargeFrequency": "Usage-Based", "PricingCategory": "Standard",
        "InvoiceIssuerName": "Google Cloud", "ProviderName": "Google Cloud", "PublisherName": "Google Cloud",
        "RegionId": REGION, "RegionName": REGION, "SubAccountId": project, "SubAccountName": project,
        "ServiceName": service, "ServiceCategory": category, "ChargeDescription": description,
        "PricingUnit": unit, "ConsumedUnit": consumed_unit, "SkuId": sku(description),
    }
    row.update(extra)
    return row


def consumed(quantity: Decimal, unit: str) -> Decimal:
    """The usage in the export's usage unit: seconds for hours, byte-seconds for GiB-hours, bytes for GiB."""
    return quantity * {"hour": 3600, "gibibyte hour": GIB * 3600, "gibibyte": GIB}[unit]


def machine_lines(n: int, node: Node, resource_id: str, tag_text: str, project: str = PROJECT,
                  cls: str | None = None) -> list:
    family, vcpus, gib, gpus, gpu_sku, _model = MACHINES[node.instance_type]
    parts = [(f"{family} Instance Core", Decimal(vcpus), "hour", "seconds"),
             (f"{family} Instance Ram", Decimal(gib), "gibibyte hour", "byte-seconds")]
    if gpus:
        parts.append((gpu_sku, Decimal(gpus), "hour", "seconds"))
    cls = cls or ("gpu_compute" if gpus else "serving_compute")
    out = []
    for name, quantity, unit, consumed_unit in parts:
        columns = usage("Compute Engine", "Compute", f"{name} running in Americas", unit, consumed_unit, project,
                        ResourceId=resource_id, ResourceName=node.name, AvailabilityZone=node.zone,
                        Tags=tag_text, ConsumedQuantity=consumed(quantity, unit))
        out += hourly(cls, quantity, PRICES[name], columns, (n,) if gpus and cls == "gpu_compute" else ())
    return out


def build(seed: int, rng: np.random.Generator, services: dict) -> CloudCase:
    nodes: list[Node] = []
    plan: list[tuple[Node, list[str]]] = []
    ids: list[str] = []
    for itype, zone, pool, holders in PLAN:
        _family, _v, _g, gpus, _sku, model = MACHINES[itype]
        name = f"gke-{CLUSTER}-{pool}-{rng.bytes(4).hex()}-{''.join(rng.choice(list('bcdfghjklmnpqrstvwxz'), 4))}"
        numeric = str(int(rng.integers(10 ** 18, 9 * 10 ** 18)))
        ip = f"10.128.{len(nodes)}.{int(rng.integers(2, 250))}"
        labels: tuple[tuple[str, str], ...] = (("label_cloud_google_com_gke_nodepool", pool),)
        if gpus:
            accel = "nvidia-h100-80gb" if itype.startswith("a3") else "nvidia-l4"
            labels += (("label_cloud_google_com_gke_accelerator", accel),)
        node = Node(name, f"gce://{PROJECT}/{zone}/{name}", itype, gpus, model, pool, zone, ip, labels)
        nodes.append(node)
        plan.append((node, holders))
        ids.append(f"//compute.googleapis.com/projects/{PROJECT}/zones/{zone}/instances/{numeric}")
    world = World("gke", seed, tuple(nodes), layout(rng, plan, services), services,
                  missing_hours={1: frozenset({9, 10, 11})})
    draw_activity(world, rng)
    lines = []
    for n, node in enumerate(nodes):
        lines += machine_lines(n, node, ids[n], tags(**{"goog-k8s-cluster-name": CLUSTER,
                                                        "goog-k8s-node-pool-name": node.pool}))
    cluster = f"//container.googleapis.com/projects/{PROJECT}/locations/{REGION}/clusters/{CLUSTER}"
    lines += hourly("orchestration", Decimal(1), Decimal("0.10"), usage(
        "Kubernetes Engine", "Compute", "Regional Kubernetes Clusters", "hour", "seconds",
        ResourceId=cluster, ResourceName=CLUSTER, ConsumedQuantity=Decimal(3600)))
    router = f"//compute.googleapis.com/projects/{PROJECT}/regions/{REGION}/routers/{CLUSTER}-nat-router"
    lines += hourly("serving_network", Decimal(len(nodes)), Decimal("0.0014"), usage(
        "Networking", "Networking", "NAT Gateway: Uptime charge in Americas", "hour", "seconds",
        ResourceId=router, ResourceName=f"{CLUSTER}-nat-router", ConsumedQuantity=Decimal(3600 * len(nodes))))
    lines += _per_gib(rng, "serving_network", "NAT Gateway: Data Processing charge in Americas",
                      Decimal("0.045"), 5.0, ResourceId=router, ResourceName=f"{CLUSTER}-nat-router")
    rule = f"//compute.googleapis.com/projects/{PROJECT}/global/forwardingRules/k8s2-fs-{CLUSTER}-chat"
    lines += hourly("serving_network", Decimal(1), Decimal("0.025"), usage(
        "Networking", "Networking", "Network Load Balancing: Forwarding Rule Minimum Service Charge in Americas",
        "hour", "seconds", ResourceId=rule, ConsumedQuantity=Decimal(3600)))
    lines += _per_gib(rng, "serving_network", "Network Load Balancing: Data Processing Charge in Americas",
                      Decimal("0.008"), 20.0, ResourceId=rule)
    lines += _per_gib(rng, "egress", "Network Internet Data Transfer Out from Americas to Americas",
                      Decimal("0.12"), 2.0)
    gib = Decimal(f"{rng.gamma(8, 6.0):.6f}")
    lines += daily("observability", gib, Decimal("0.50"), usage(
        "Cloud Logging", "Management and Governance", "Log Storage cost", "gibibyte", "bytes",
        ResourceId=f"//logging.googleapis.com/projects/{PROJECT}", ConsumedQuantity=consumed(gib, "gibibyte")))
    other = Node(f"analytics-{rng.bytes(2).hex()}", "", "n2-standard-8", 0, "", "", "us-central1-a", "")
    lines += machine_lines(-1, other, f"//compute.googleapis.com/projects/{OTHER}/zones/us-central1-a/instances/"
                           f"{int(rng.integers(10 ** 18, 9 * 10 ** 18))}", tags(team="analytics"), OTHER, "outside")
    identities = [{"node": nd.name, "provider_id": nd.provider_id, "billing_resource_id": ids[i],
                   "billing_resource_name": nd.name, "instance_type": nd.instance_type, "gpus": nd.gpus}
                  for i, nd in enumerate(nodes)]
    summary = (f'GKE cluster "{CLUSTER}" ({REGION}), project {PROJECT}: chat on 2 x a3-highgpu-8g (8 H100; the '
               "second runs 5 chat pods, 1 undeclared notebook pod, 2 free GPUs, and its exporter is silent "
               "09:00-12:00), embed on 1 x g2-standard-48 (3 of 4 L4), 2 x n2-standard-8 CPU nodes; machines "
               "billed in parts (Core, Ram, GPU SKUs); GKE cluster fee, Cloud NAT, load balancing, internet "
               f"egress, Cloud Logging; project {OTHER} (one n2 VM) outside the scope.")
    machines = {nd.name: nd.instance_type for nd in (*nodes, other)}
    ids = GcpIds(SERVICE_IDS, PROJECT_NUMBERS, machines, {k: v[1] for k, v in MACHINES.items()})
    native = NativeBilling("billing/gcp_billing_export_resource_v1.jsonl", "gcp_billing",
                           lambda written: gcp_export(written, ids))
    return CloudCase(world, lines, FOCUS_10, stamp, "billing/focus_gcp.csv", "USD", [PROJECT], summary, identities,
                     native)


def _per_gib(rng: np.random.Generator, cls: str, description: str, price: Decimal, mean: float, **extra) -> list:
    out = []
    for h, gib in enumerate(gigabytes(rng, mean)[:HOURS]):
        out.append(at(h, cls, gib, price, usage("Networking", "Networking", description, "gibibyte", "bytes",
                                                ConsumedQuantity=consumed(gib, "gibibyte"), **extra)))
    return out
