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


KINDS = {"billing": "connectors.billing.", "telemetry": "connectors.telemetry.", "profiles": "connectors.profiles."}


def names(kind: str | None = None) -> list[str]:
    """The registered format names (of one kind of source: billing, telemetry, profiles)."""
    return sorted(n for n, target in CONNECTORS.items() if kind is None or target.startswith(KINDS[kind]))


def unknown(name: str, kind: str | None = None) -> str | None:
    """Why ``name`` is no format (of ``kind``), with the nearest one; None where it is one."""
    if name in names(kind):
        return None
    import difflib

    near = difflib.get_close_matches(name.lower(), names(kind), n=1, cutoff=0.6)
    other = f"; {name!r} reads {next(k for k, p in KINDS.items() if CONNECTORS[name].startswith(p))} sources" \
        if name in CONNECTORS else ""
    return (f"unknown {kind + ' ' if kind else ''}format {name!r}{other}"
            f"{f'; did you mean {near[0]!r}?' if near and not other else ''} (expected one of {', '.join(names(kind))})")


def resolve(name: str, *, where: str = "case.toml"):
    """Import and return the connector class registered as ``name``."""
    target = CONNECTORS.get(name)
    if target is None:
        raise InputError(where, str(unknown(name)), column="format")
    module_name, class_name = target.split(":")
    return getattr(importlib.import_module(module_name), class_name)
