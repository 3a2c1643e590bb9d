"""Format name -> connector class, imported only when a case uses it."""
from __future__ import annotations

import importlib

from connectors.errors import InputError

CONNECTORS: dict[str, str] = {
    "focus": "connectors.billing.focus:FocusConnector",
    "openmetrics": "connectors.telemetry.openmetrics:OpenMetricsConnector",
    "kineto": "connectors.profiles.kineto:KinetoConnector",
    "nsys": "connectors.profiles.nsys:NsysConnector",
    "profile_bundle": "connectors.profiles.bundle:ProfileBundleConnector",
    "cur": "connectors.billing.cur:CurConnector",
    "azure": "connectors.billing.azure:AzureExportConnector",
    "access_log": "connectors.telemetry.access_log:AccessLogConnector",
    "gcp_billing": "connectors.billing.gcp_billing:GcpBillingConnector",
    "athena": "connectors.billing.athena:AthenaConnector",
    "prometheus": "connectors.telemetry.prometheus:PrometheusConnector",
    "prom_dump": "connectors.telemetry.prom_dump:PromDumpConnector",
    "nvidia_smi": "connectors.telemetry.nvidia_smi:NvidiaSmiConnector",
    "dcgmi": "connectors.telemetry.dcgmi:DcgmiConnector",
    "sacct": "connectors.telemetry.sacct:SacctConnector",
    "opencost": "connectors.telemetry.opencost:OpenCostConnector",
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
