"""case.toml and PROVENANCE.md of a generated case (the keys of docs/case.md)."""
from __future__ import annotations

from benchmarks.cloudgen import gateway
from benchmarks.cloudgen import profile as prof
from benchmarks.cloudgen.cloud import CloudCase

TELEMETRY_FILE = "telemetry/metrics.om.gz"
PROFILE_FILE = f"profiles/{prof.NAME}"


def billing_block(cc: CloudCase, native: bool) -> list[str]:
    if not native:
        return ["[[billing]]", 'name = "focus"', 'format = "focus"', f'path = "{cc.billing_file}"', ""]
    assert cc.native is not None
    return ["[[billing]]", f'name = "{cc.native.format}"', f'format = "{cc.native.format}"',
            f'path = "{cc.native.read or cc.native.path}"', *(f"{k} = {v}" for k, v in cc.native.options), ""]


def case_toml(cc: CloudCase, with_profile: bool, native: bool = False) -> str:
    w = cc.world
    accounts = ", ".join(f'"{a}"' for a in cc.accounts)
    out = [
        f"# cloudgen case: {w.cloud.upper()}, seed {w.seed} (python -m benchmarks.cloudgen; do not edit by hand).",
        "#",
        *(f"# {line}" for line in _wrap(cc.summary)),
        "# The expected result is truth.json next to this file.",
        "",
        "[case]",
        f'name = "cloudgen-{w.cloud}-seed{w.seed}"',
        'window = ["2026-09-01", "2026-09-02"]',
        f'currency = "{cc.currency}"',
        'cost_basis = "effective"',
        "tolerance = 0.02",
        "# dcgm-exporter and kube-state-metrics are sampled every 15 minutes; the audit works in hours.",
        'step = "1h"',
        "target_utilisation = 0.8",
        "loaded_rate = 150",
        "",
        "[scope]",
        f"accounts = [{accounts}]",
        "",
        *billing_block(cc, native),
        "[[telemetry]]",
        'name = "prometheus-export"',
        'format = "openmetrics"',
        f'path = "{TELEMETRY_FILE}"',
        "",
        "[[telemetry]]",
        'name = "gateway-access"',
        'format = "access_log"',
        f'path = "{gateway.LOG_FILE}"',
        f'service = "{gateway.NAME}"',
        f'health_path = "{gateway.HEALTH_PATH}"',
        "",
    ]
    if with_profile:
        out += [
            "[[profiles]]",
            'name = "chat-profile"',
            'format = "kineto"',
            "# torch.profiler trace of Qwen1.5-0.5B-Chat on one H100 (TraceLens, MIT, sanitised copy).",
            f'path = "{PROFILE_FILE}"',
            'service = "chat"',
            f"requests = {prof.REQUESTS}",
            f"prompt_tokens = {prof.PROMPT_TOKENS}",
            f"generated_tokens = {prof.GENERATED_TOKENS}",
            "",
        ]
    for name, svc in w.services.items():
        out += [f"[services.{name}]", f'namespace = "{svc.namespace}"', f'pod = "re:^{svc.deployment}-"',
                "gpus_per_replica = 1", "min_replicas = 1", 'scale_reaction = "1h"', ""]
    key, pool = gateway.POOL_TAGS[w.cloud]
    out += [f"# a CPU tier with no pods: it owns its nodes' lines (by their {key} tag), counted by its access log",
            f"[services.{gateway.NAME}]", f'tags = {{ "{key}" = "{pool}" }}', ""]
    return "\n".join(out)


def provenance(cc: CloudCase, with_profile: bool, native: bool = False) -> str:
    w = cc.world
    lines = [
        f"# Provenance of this case ({w.cloud.upper()}, seed {w.seed})",
        "",
        "Every file except the profile is synthetic, written by `python -m benchmarks.cloudgen` (stdlib + numpy; it "
        "imports nothing of costaudit). Same cloud and seed, same bytes.",
        "",
        (f"- `{cc.native.path}`: the provider's own export format (`benchmarks/cloudgen/native.py`), the same "
         "lines the FOCUS CSV of this seed holds: real service, SKU and meter names; illustrative list prices."
         if native and cc.native else
         f"- `{cc.billing_file}`: the provider's FOCUS CSV dialect (see the module docstring of "
         f"`benchmarks/cloudgen/{w.cloud}.py`): real service, SKU and meter names; illustrative list prices."),
        f"- `{TELEMETRY_FILE}`: OpenMetrics text: dcgm-exporter `DCGM_FI_PROF_GR_ENGINE_ACTIVE`, kube-state-metrics "
        "`kube_node_info` / `kube_node_labels` / `kube_pod_info` / `kube_pod_container_resource_requests`, vLLM "
        "counters; 15-minute samples; gzip with mtime 0.",
    ]
    lines.append(f"- `{gateway.LOG_FILE}`: nginx combined log of the CPU-only `{gateway.NAME}` service "
                 "(requests, failures, load-balancer health checks, one TLS probe).")
    if with_profile:
        lines.append(f"- `{PROFILE_FILE}`: byte copy of the project's sanitised TraceLens trace "
                     f"(AMD-AGI/TraceLens, MIT; sha256 {prof.SHA256}).")
    lines += ["- `truth.json`: computed by the generator from its hidden states (METHOD sections 2-3).", "",
              "## Identifiers each side carries", "",
              "| node | provider_id (kube_node_info) | billing ResourceId | billing ResourceName | type | GPUs |",
              "|---|---|---|---|---|---|"]
    for i in cc.identities:
        lines.append(f"| {i['node']} | `{i['provider_id']}` | `{i['billing_resource_id']}` | "
                     f"{i['billing_resource_name'] or '—'} | {i['instance_type']} | {i['gpus']} |")
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int = 100) -> list[str]:
    out, cur = [], ""
    for word in text.split():
        if len(cur) + len(word) + 1 > width:
            out.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}".strip()
    return out + ([cur] if cur else [])
