"""AKS: GPU nodes billed as scale sets (one daily line per VM of the set, as cost details bill them).

Microsoft's FocusCost export (FOCUS 1.2-preview column set of its metadata, with the x_ columns
Cost Management fills here; ISO timestamps with Z; nulls as empty cells): daily lines, ResourceId the
lower-cased ARM id of the virtual machine scale set, one line per VM and day (PricingQuantity its 24
instance-hours, SkuPriceDetails the AdditionalInfo with its VMName ``<set>_<N>``; the rows of a set
in no particular order), x_SkuMeterCategory / x_SkuMeterSubcategory / x_SkuMeterName the meter
(``ND96isr H100 v5``, ``NC24ads A100 v4``), ChargeDescription the product (meter category,
subcategory, meter and region, as the EA "Product" column spells it). Beside the scale sets: the AKS
Standard tier ("Standard Uptime SLA"), NAT Gateway, Load Balancer, Log Analytics and Bandwidth.
kube-state-metrics gives provider_id ``azure:///subscriptions/…/virtualMachineScaleSets/NAME/
virtualMachines/N``. Prices are East US pay-as-you-go list prices (illustrative).
"""
from __future__ import annotations

import hashlib
from datetime import datetime
from decimal import Decimal

import numpy as np

from benchmarks.cloudgen.cloud import CloudCase, NativeBilling, daily
from benchmarks.cloudgen.focus import FOCUS_12, tags
from benchmarks.cloudgen.native import ea_export
from benchmarks.cloudgen.world import HOURS, Node, World, draw_activity, layout

CLUSTER, RG, REGION, REGION_NAME = "aks-inference", "rg-inference", "eastus", "East US"
NODE_RG = f"MC_{RG}_{CLUSTER}_{REGION}"
BILLING_ACCOUNT = "/providers/Microsoft.Billing/billingAccounts/8611537"
X_COLUMNS = ["x_BillingProfileId", "x_PricingBlockSize", "x_PricingUnitDescription", "x_ResourceGroupName",
             "x_ResourceType", "x_SkuDescription", "x_SkuMeterCategory", "x_SkuMeterId", "x_SkuMeterName",
             "x_SkuMeterSubcategory", "x_SkuRegion", "x_SkuServiceFamily"]
SIZES = {  # VM size: (GPUs, DCGM modelName, meter subcategory, meter name, $/h)
    "Standard_ND96isr_H100_v5": (8, "NVIDIA H100 80GB HBM3", "NDsr H100 v5 Series", "ND96isr H100 v5",
                                 Decimal("98.32")),
    "Standard_NC24ads_A100_v4": (1, "NVIDIA A100 80GB PCIe", "NCads A100 v4 Series", "NC24ads A100 v4",
                                 Decimal("3.673")),
    "Standard_D8ads_v5": (0, "", "Dadsv5 Series", "D8ads v5", Decimal("0.412")),
}
CONSUMED_SERVICES = {"microsoft.compute": "Microsoft.Compute", "microsoft.network": "Microsoft.Network",
                     "microsoft.containerservice": "Microsoft.ContainerService",
                     "microsoft.operationalinsights": "Microsoft.OperationalInsights",
                     "microsoft.storage": "Microsoft.Storage"}
POOLS: list[tuple[str, str, str, list[list[str]]]] = [  # (pool, VM size, zone, holders per GPU of each instance)
    ("h100pool", "Standard_ND96isr_H100_v5", "eastus-1",
     [["chat"] * 8, ["chat"] * 5 + ["undeclared", "free", "free"]]),
    ("a100pool", "Standard_NC24ads_A100_v4", "eastus-2", [["embed"], ["embed"], ["free"]]),
    ("system", "Standard_D8ads_v5", "eastus-1", [[], []]),
]


def stamp(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def usage(subscription: str, service: str, category: str, meter_category: str, meter_subcategory: str,
          meter: str, unit: str, unit_description: str, resource_id: str, resource_type: str,
          arm_type: str, resource_group: str, **extra) -> dict:
    product = " - ".join(p for p in (f"{meter_category} {meter_subcategory}".strip(), meter, REGION_NAME) if p)
    row = {
        "BillingAccountId": BILLING_ACCOUNT, "BillingAccountName": "Contoso", "BillingAccountType":
        "Billing Account", "BillingCurrency": "USD", "PricingCurrency": "USD", "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based", "PricingCategory": "Standard", "InvoiceIssuerName": "Microsoft",
        "ProviderName": "Microsoft", "PublisherName": "Microsoft", "RegionId": REGION, "RegionName": REGION_NAME,
        "SubAccountId": f"/subscriptions/{subscription}", "SubAccountName": "inference-prod", "SubAccountType":
        "Subscription", "ServiceName": service, "ServiceCategory": category, "ChargeDescription": product,
        "PricingUnit": unit, "ConsumedUnit": unit, "SkuMeter": meter, "ResourceId": resource_id.lower(),
        "ResourceName": resource_id.rsplit("/", 1)[-1], "ResourceType": resource_type,
        "x_ResourceType": arm_type, "x_ResourceGroupName": resource_group.lower(), "x_SkuDescription": product,
        "x_SkuMeterCategory": meter_category, "x_SkuMeterSubcategory": meter_subcategory or None,
        "x_SkuMeterName": meter, "x_PricingUnitDescription": unit_description, "x_PricingBlockSize": 1,
        "x_SkuRegion": "US East", "x_BillingProfileId": "8611537", "x_SkuServiceFamily": extra.pop("family", "Compute"),
    }
    # what the cost details export carries and FOCUS does not (not written to the FOCUS file)
    row.update({"_arm_id": resource_id, "_resource_group": resource_group,
                "_consumed_service": CONSUMED_SERVICES[arm_type.split("/")[0]]})
    digest = hashlib.sha256(f"{meter_category}|{meter}".encode()).hexdigest()
    row["x_SkuMeterId"] = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
    row["SkuId"] = row["SkuPriceId"] = f"DZH318Z0{digest[:4].upper()}"
    row.update(extra)
    return row


def build(seed: int, rng: np.random.Generator, services: dict) -> CloudCase:
    sub = "-".join(rng.bytes(k).hex() for k in (4, 2, 2, 2, 6))
    other = "-".join(rng.bytes(k).hex() for k in (4, 2, 2, 2, 6))
    nodes: list[Node] = []
    plan: list[tuple[Node, list[str]]] = []
    vmss_nodes: dict[tuple[str, str], list[int]] = {}
    identities: list[dict] = []
    for pool, size, zone, instances in POOLS:
        gpus, model, _sub, _meter, _price = SIZES[size]
        vmss = f"aks-{pool}-{int(rng.integers(10 ** 7, 10 ** 8))}-vmss"
        vmss_id = (f"/subscriptions/{sub}/resourceGroups/{NODE_RG}/providers/Microsoft.Compute/"
                   f"virtualMachineScaleSets/{vmss}")
        vmss_nodes[(pool, vmss_id)] = []
        for i, holders in enumerate(instances):
            name = f"{vmss}{i:06d}"
            node = Node(name, f"azure://{vmss_id}/virtualMachines/{i}", size, gpus, model, pool, zone,
                        f"10.224.{len(POOLS)}.{4 + len(nodes)}", (("label_kubernetes_azure_com_agentpool", pool),))
            vmss_nodes[(pool, vmss_id)].append(len(nodes))
            nodes.append(node)
            plan.append((node, holders))
            identities.append({"node": name, "provider_id": node.provider_id, "billing_resource_id": vmss_id.lower(),
                               "billing_resource_name": vmss, "instance_type": size, "gpus": gpus})
    world = World("aks", seed, tuple(nodes), layout(rng, plan, services), services,
                  missing_hours={1: frozenset({9, 10, 11})})
    draw_activity(world, rng)
    lines = []
    for (pool, vmss_id), members in vmss_nodes.items():
        size = nodes[members[0]].instance_type
        gpus, _model, subcategory, meter, price = SIZES[size]
        columns = usage(sub, "Virtual Machines", "Compute", "Virtual Machines", subcategory, meter, "Hours", "1 Hour",
                        vmss_id, "Virtual machine scale set", "microsoft.compute/virtualmachinescalesets", NODE_RG,
                        Tags=tags(**{"aks-managed-poolName": pool, "aks-managed-orchestrator": "Kubernetes:1.31.4",
                                     "aks-managed-createOperationID": rng.bytes(4).hex()}))
        cls = "gpu_compute" if gpus else "serving_compute"
        vmss = vmss_id.rsplit("/", 1)[-1]
        # one row per VM and day, its VMName in SkuPriceDetails (AdditionalInfo), the last VM first:
        # an export's rows come in no particular order
        for i, member in reversed(list(enumerate(members))):
            details = tags(ServiceType=size, VCPUs=str(96 if gpus == 8 else 24 if gpus else 8), VMName=f"{vmss}_{i}")
            lines += daily(cls, Decimal(HOURS), price, {**columns, "SkuPriceDetails": details},
                           (member,) if gpus else ())
    cluster_id = f"/subscriptions/{sub}/resourceGroups/{RG}/providers/Microsoft.ContainerService/managedClusters/{CLUSTER}"
    lines += daily("orchestration", Decimal(HOURS), Decimal("0.10"), usage(
        sub, "Azure Kubernetes Service", "Compute", "Azure Kubernetes Service", "Standard", "Standard Uptime SLA",
        "Hours", "1 Hour", cluster_id, "Kubernetes service", "microsoft.containerservice/managedclusters", RG,
        family="Compute"))
    nat = f"/subscriptions/{sub}/resourceGroups/{NODE_RG}/providers/Microsoft.Network/natGateways/{CLUSTER}-natgw"
    net = ("Networking", "NAT Gateway", "")
    lines += daily("serving_network", Decimal(HOURS), Decimal("0.045"), usage(
        sub, "NAT Gateway", *net, "Standard Gateway", "Hours", "1 Hour", nat, "NAT gateway",
        "microsoft.network/natgateways", NODE_RG, family="Networking"))
    lines += daily("serving_network", _gb(rng, 120.0), Decimal("0.045"), usage(
        sub, "NAT Gateway", *net, "Standard Data Processed", "GB", "1 GB", nat, "NAT gateway",
        "microsoft.network/natgateways", NODE_RG, family="Networking"))
    lb = f"/subscriptions/{sub}/resourceGroups/{NODE_RG}/providers/Microsoft.Network/loadBalancers/kubernetes"
    lb_meter = ("Networking", "Load Balancer", "Standard")
    lines += daily("serving_network", Decimal(HOURS), Decimal("0.025"), usage(
        sub, "Load Balancer", *lb_meter, "Standard Included LB Rules and Outbound Rules", "Hours", "1 Hour", lb,
        "Load balancer", "microsoft.network/loadbalancers", NODE_RG, family="Networking"))
    lines += daily("serving_network", _gb(rng, 400.0), Decimal("0.005"), usage(
        sub, "Load Balancer", *lb_meter, "Standard Data Processed", "GB", "1 GB", lb, "Load balancer",
        "microsoft.network/loadbalancers", NODE_RG, family="Networking"))
    workspace = (f"/subscriptions/{sub}/resourceGroups/{RG}/providers/Microsoft.OperationalInsights/workspaces/"
                 f"{CLUSTER}-logs")
    lines += daily("observability", _gb(rng, 12.0), Decimal("2.30"), usage(
        sub, "Log Analytics", "Management and Governance", "Log Analytics", "", "Pay-as-you-go Data Ingestion", "GB",
        "1 GB", workspace, "Log Analytics workspace", "microsoft.operationalinsights/workspaces", RG,
        family="Management and Governance"))
    system = next(vid for (pool, vid) in vmss_nodes if pool == "system")
    lines += daily("egress", _gb(rng, 40.0), Decimal("0.087"), usage(
        sub, "Bandwidth", "Networking", "Bandwidth", "", "Standard Data Transfer Out", "GB", "1 GB", system,
        "Virtual machine scale set", "microsoft.compute/virtualmachinescalesets", NODE_RG, family="Networking"))
    account = f"/subscriptions/{other}/resourceGroups/analytics/providers/Microsoft.Storage/storageAccounts/analyticslake"
    outside = usage(other, "Storage Accounts", "Storage", "Storage", "Tiered Block Blob", "Hot LRS Data Stored", "GB/Month",
                    "1 GB/Month", account, "Storage account", "microsoft.storage/storageaccounts", "analytics",
                    family="Storage")
    outside["SubAccountName"] = "analytics"
    lines += daily("outside", Decimal("1250.5"), Decimal("0.000613"), outside)
    summary = (f'AKS cluster "{CLUSTER}" ({REGION}), subscription {sub}: chat on one ND96isr_H100_v5 scale set of 2 '
               "instances (8 H100 each; the second runs 5 chat pods, 1 undeclared notebook pod, 2 free GPUs, "
               "and its exporter is silent 09:00-12:00), embed on an NC24ads_A100_v4 scale set of 3 instances "
               "(1 A100 each, one free), a D8ads_v5 system pool of 2; each scale set billed by one daily line; "
               "AKS Standard tier, NAT Gateway, Load Balancer, Log Analytics, Bandwidth; a storage account of "
               f"subscription {other} outside the scope.")
    native = NativeBilling("billing/ea_amortized_2026-09.csv", "azure", ea_export,
                           options=(("view", '"amortized"'),))
    return CloudCase(world, lines, FOCUS_12 + X_COLUMNS, stamp, "billing/focus_azure.csv", "USD",
                     [f"/subscriptions/{sub}"], summary, identities, native)


def _gb(rng: np.random.Generator, mean: float) -> Decimal:
    return Decimal(f"{rng.gamma(8.0, mean / 8.0):.6f}")
