"""EKS: GPU nodes billed per instance (EC2 p5 / g6e instance-hours with their instance ids).

The AWS FOCUS 1.2 export (Data Exports, "FOCUS 1.2 with AWS columns"): hourly lines, ResourceId the
instance id for EC2, x_UsageType / x_Operation / x_ServiceCode, timestamps as ISO 8601 with
milliseconds and Z, nulls as empty cells. kube-state-metrics gives provider_id
``aws:///<zone>/<instance id>``. Prices are us-east-1 on-demand list prices (illustrative).
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import numpy as np

from benchmarks.cloudgen.cloud import CloudCase, NativeBilling, at, daily, gigabytes, hex_id, hourly, sku_id
from benchmarks.cloudgen.focus import FOCUS_12, tags
from benchmarks.cloudgen.native import cur2_export
from benchmarks.cloudgen.world import Node, World, draw_activity, layout

PAYER, ACCOUNT, OTHER = "999999999999", "111111111111", "222222222222"
CLUSTER, REGION, REGION_NAME = "inference-prod", "us-east-1", "US East (N. Virginia)"
COLUMNS = FOCUS_12 + ["AvailabilityZone", "x_CostCategories", "x_Discounts", "x_Operation", "x_ServiceCode",
                      "x_UsageType"]
TYPES = {  # instance type: (GPUs, DCGM modelName, on-demand $/h)
    "p5.48xlarge": (8, "NVIDIA H100 80GB HBM3", Decimal("55.04")),
    "g6e.12xlarge": (4, "NVIDIA L40S", Decimal("10.493")),
    "c7i.2xlarge": (0, "", Decimal("0.357")),
}
PLAN = [  # (instance type, zone, node group, holders per GPU)
    ("p5.48xlarge", "us-east-1a", "p5-chat", ["chat"] * 8),
    ("p5.48xlarge", "us-east-1a", "p5-chat", ["chat"] * 5 + ["undeclared", "free", "free"]),
    ("g6e.12xlarge", "us-east-1b", "g6e-embed", ["embed"] * 3 + ["free"]),
    ("c7i.2xlarge", "us-east-1a", "cpu-gateway", []),
    ("c7i.2xlarge", "us-east-1b", "cpu-gateway", []),
]


def stamp(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def base(account: str = ACCOUNT) -> dict:
    return {
        "BillingAccountId": PAYER, "BillingAccountName": "Example Corp", "BillingAccountType": "Billing Account",
        "BillingCurrency": "USD", "PricingCurrency": "USD", "ChargeCategory": "Usage",
        "ChargeFrequency": "Usage-Based", "PricingCategory": "Standard", "InvoiceIssuerName": "Amazon Web Services, Inc.",
        "ProviderName": "AWS", "PublisherName": "AWS", "RegionId": REGION, "RegionName": REGION_NAME,
        "SubAccountId": account, "SubAccountName": "inference-prod" if account == ACCOUNT else "data-analytics",
        "SubAccountType": "Linked Account", "InvoiceId": "EUINUS26-2071852394",
    }


def usage(service: str, category: str, code: str, usage_type: str, operation: str, description: str,
          unit: str, **extra) -> dict:
    row = base(extra.pop("account", ACCOUNT))
    row.update({"ServiceName": service, "ServiceCategory": category, "x_ServiceCode": code,
                "x_UsageType": usage_type, "x_Operation": operation, "ChargeDescription": description,
                "PricingUnit": unit, "ConsumedUnit": unit, "SkuId": sku_id(service, usage_type)})
    row["SkuPriceId"] = row["SkuId"] + ".JRTCKXETXF"
    row.update(extra)
    return row


def build(seed: int, rng: np.random.Generator, services: dict) -> CloudCase:
    nodes, plan = [], []
    for i, (itype, zone, group, holders) in enumerate(PLAN):
        gpus, model, _price = TYPES[itype]
        iid = "i-0" + hex_id(rng, 16)
        ip = f"10.0.{1 + i}.{int(rng.integers(10, 250))}"
        node = Node(f"ip-{ip.replace('.', '-')}.ec2.internal", f"aws:///{zone}/{iid}", itype, gpus, model, group,
                    zone, ip, (("label_eks_amazonaws_com_nodegroup", group),))
        nodes.append(node)
        plan.append((node, holders))
    world = World("eks", seed, tuple(nodes), layout(rng, plan, services), services,
                  missing_hours={1: frozenset({9, 10, 11})})
    draw_activity(world, rng)
    lines = []
    for n, node in enumerate(nodes):
        iid = node.provider_id.rsplit("/", 1)[-1]
        price = TYPES[node.instance_type][2]
        columns = usage("Amazon Elastic Compute Cloud", "Compute", "AmazonEC2", f"BoxUsage:{node.instance_type}",
                        "RunInstances", f"${price} per On Demand Linux {node.instance_type} Instance Hour", "Hours",
                        ResourceId=iid, ResourceType="Instance", AvailabilityZone=node.zone,
                        Tags=tags(**{"eks:cluster-name": CLUSTER, "eks:nodegroup-name": node.pool}))
        cls = "gpu_compute" if node.gpus else "serving_compute"
        lines += hourly(cls, Decimal(1), price, columns, (n,) if node.gpus else ())
    lines += hourly("orchestration", Decimal(1), Decimal("0.10"), usage(
        "Amazon Elastic Kubernetes Service", "Compute", "AmazonEKS", "AmazonEKS-Hours:perCluster", "CreateOperation",
        "Amazon EKS cluster usage in US East (N. Virginia)", "Hours",
        ResourceId=f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}", Tags=tags(**{"eks:cluster-name": CLUSTER})))
    for zone in ("us-east-1a", "us-east-1b"):
        arn = f"arn:aws:ec2:{REGION}:{ACCOUNT}:natgateway/nat-0{hex_id(rng, 16)}"
        kw = {"ResourceId": arn, "AvailabilityZone": zone}
        lines += hourly("serving_network", Decimal(1), Decimal("0.045"), usage(
            "Amazon Elastic Compute Cloud", "Networking", "AmazonEC2", "NatGateway-Hours", "NatGateway",
            "$0.045 per NAT Gateway Hour", "Hours", **kw))
        for h, gb in enumerate(gigabytes(rng, 6.0)):
            lines.append(at(h, "serving_network", gb, Decimal("0.045"), usage(
                "Amazon Elastic Compute Cloud", "Networking", "AmazonEC2", "NatGateway-Bytes", "NatGateway",
                "$0.045 per GB Data Processed by NAT Gateways", "GB", **kw)))
    for name in ("chat", "embed"):
        arn = (f"arn:aws:elasticloadbalancing:{REGION}:{ACCOUNT}:loadbalancer/app/k8s-{name}-{hex_id(rng, 10)}/"
               f"{hex_id(rng, 16)}")
        kw = {"ResourceId": arn, "Tags": tags(**{"elbv2.k8s.aws/cluster": CLUSTER})}
        lines += hourly("serving_network", Decimal(1), Decimal("0.0225"), usage(
            "Elastic Load Balancing", "Networking", "AWSELB", "LoadBalancerUsage", "LoadBalancing:Application",
            "$0.0225 per Application LoadBalancer-hour (or partial hour)", "Hours", **kw))
        for h, lcu in enumerate(gigabytes(rng, 3.0)):
            lines.append(at(h, "serving_network", lcu, Decimal("0.008"), usage(
                "Elastic Load Balancing", "Networking", "AWSELB", "LCUUsage", "LoadBalancing:Application",
                "$0.008 per used Application load balancer capacity unit-hour (or partial hour)", "LCU-Hours", **kw)))
    log_group = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/containerinsights/{CLUSTER}/application"
    lines += daily("observability", Decimal(f"{rng.gamma(8, 4.0):.6f}"), Decimal("0.50"), usage(
        "AmazonCloudWatch", "Management and Governance", "AmazonCloudWatch", "DataProcessing-Bytes", "PutLogEvents",
        "$0.50 per GB - data ingested for CloudWatch Logs", "GB", ResourceId=log_group))
    lines += daily("observability", Decimal("30"), Decimal("0.01"), usage(
        "AmazonCloudWatch", "Management and Governance", "AmazonCloudWatch", "CW:MetricMonitorUsage",
        "MetricStorage:AWS/ContainerInsights", "$0.30 per metric-month - first 10,000 metrics", "Metrics"))
    for node in nodes:
        if not node.gpus:
            lines += daily("egress", Decimal(f"{rng.gamma(8, 5.0):.6f}"), Decimal("0.09"), usage(
                "AWS Data Transfer", "Networking", "AWSDataTransfer", "DataTransfer-Out-Bytes", "RunInstances",
                "$0.09 per GB - first 10 TB / month data transfer out beyond the global free tier", "GB",
                ResourceId=node.provider_id.rsplit("/", 1)[-1]))
    other = "i-0" + hex_id(rng, 16)
    lines += hourly("outside", Decimal(1), Decimal("0.2016"), usage(
        "Amazon Elastic Compute Cloud", "Compute", "AmazonEC2", "BoxUsage:m7i.xlarge", "RunInstances",
        "$0.2016 per On Demand Linux m7i.xlarge Instance Hour", "Hours", account=OTHER, ResourceId=other,
        ResourceType="Instance", AvailabilityZone="us-east-1a", Tags=tags(team="analytics")))
    identities = [{"node": nd.name, "provider_id": nd.provider_id, "billing_resource_id": nd.provider_id.rsplit("/", 1)[-1],
                   "billing_resource_name": "", "instance_type": nd.instance_type, "gpus": nd.gpus} for nd in nodes]
    summary = (f'EKS cluster "{CLUSTER}" ({REGION}), account {ACCOUNT}: chat on 2 x p5.48xlarge (8 H100; the '
               "second runs 5 chat pods, 1 undeclared notebook pod, 2 free GPUs, and its exporter is silent "
               "09:00-12:00), embed on 1 x g6e.12xlarge (3 of 4 L40S), 2 x c7i.2xlarge CPU gateways; EKS "
               "control plane, 2 NAT gateways, 2 ALBs, CloudWatch, data transfer out; account "
               f"{OTHER} (one m7i.xlarge) outside the scope. EC2 billed per instance-hour.")
    export = "billing/cur2/inference-prod/data/BILLING_PERIOD=2026-09/inference-prod-00001.csv.gz"
    native = NativeBilling(export, "cur", cur2_export, read="billing/cur2/inference-prod/")
    return CloudCase(world, lines, COLUMNS, stamp, "billing/focus_aws.csv", "USD", [ACCOUNT], summary, identities,
                     native)

