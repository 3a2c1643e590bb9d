"""Format name -> connector class, imported only when a case uses it."""
from __future__ import annotations

import importlib

from connectors.errors import InputError

CONNECTORS: dict[str, str] = {
    "focus": "connectors.focus:FocusConnector",
    "openmetrics": "connectors.openmetrics:OpenMetricsConnector",
    "kineto": "connectors.kineto:KinetoConnector",
    "nsys": "connectors.nsys:NsysConnector",
    "profile_bundle": "connectors.collector_bundle:ProfileBundleConnector",
    "cur": "connectors.cur:CurConnector",
    "azure": "connectors.azure:AzureExportConnector",
    "access_log": "connectors.access_log:AccessLogConnector",
    "gcp_billing": "connectors.gcp_billing:GcpBillingConnector",
    "athena": "connectors.athena:AthenaConnector",
    "prometheus": "connectors.prometheus:PrometheusConnector",
    "prom_dump": "connectors.prom_dump:PromDumpConnector",
    "nvidia_smi": "connectors.nvidia_smi:NvidiaSmiConnector",
    "dcgmi": "connectors.dcgmi:DcgmiConnector",
    "sacct": "connectors.sacct:SacctConnector",
    "opencost": "connectors.opencost:OpenCostConnector",
}


def names() -> list[str]:
    """The registered format names."""
    return sorted(CONNECTORS)


def resolve(name: str, *, where: str = "case.toml"):
    """Import and return the connector class registered as ``name``."""
    target = CONNECTORS.get(name)
    if target is None:
        raise InputError(where, f"unknown format {name!r}", column="format",
                         expected="one of " + ", ".join(names()))
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)
