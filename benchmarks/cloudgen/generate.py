"""Write one case folder: billing, telemetry, profile, case.toml, truth.json, PROVENANCE.md."""
from __future__ import annotations

import decimal
import gzip
import io
import json
from pathlib import Path

import numpy as np

from benchmarks.cloudgen import aks, eks, gateway, gke
from benchmarks.cloudgen import profile as prof
from benchmarks.cloudgen.adjustments import with_adjustments
from benchmarks.cloudgen.case import PROFILE_FILE, TELEMETRY_FILE, case_toml, provenance
from benchmarks.cloudgen.commitments import with_commitments
from benchmarks.cloudgen.focus import write_csv
from benchmarks.cloudgen.telemetry import write_telemetry
from benchmarks.cloudgen.truth import CpuService, compute_truth
from benchmarks.cloudgen.world import services

BUILDERS = {"eks": eks.build, "gke": gke.build, "aks": aks.build}
SALT = {"eks": 1, "gke": 2, "aks": 3}


def gzip_bytes(data: bytes) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=6, mtime=0) as handle:
        handle.write(data)
    return buf.getvalue()


def generate(cloud: str, seed: int, out: Path, trace: Path | None = None, with_profile: bool = True,
             billing: str = "focus", adjustments: bool = False, commitments: bool = False) -> dict:
    """Write the case of ``cloud`` and ``seed`` into ``out``; return its truth. ``billing`` is
    ``"focus"`` (the provider's FOCUS CSV) or ``"native"`` (its own export format, native.py);
    ``adjustments`` adds credits and tax (adjustments.py; GKE and EKS), ``commitments`` an AKS
    reservation, an EKS Savings Plan or GKE committed use discounts (resource- and spend-based), each partly
    unused (commitments.py). It computes at 60 digits in a context of its own: the caller's is left
    as it was (set to 60 in place, the audit's shared context was, and a later audit ran at 60)."""
    if adjustments and commitments:
        raise ValueError("one variant at a time: --adjustments or --commitments (a commitment replaces the "
                         "charges the credits ride on)")
    with decimal.localcontext() as context:
        context.prec = 60
        return _generate(cloud, seed, out, trace, with_profile, billing, adjustments, commitments)


def _generate(cloud: str, seed: int, out: Path, trace: Path | None, with_profile: bool, billing: str,
              adjustments: bool, commitments: bool) -> dict:
    profile = prof.read_profile(prof.find_trace(trace)) if with_profile else None
    kps = profile.kernel_seconds_per_request if profile else 0.0028395
    rng = np.random.default_rng([seed, SALT[cloud]])
    cc = BUILDERS[cloud](seed, rng, services(kps))
    if adjustments:
        cc.lines = with_adjustments(cloud, cc.lines)
    if commitments:
        cc.lines = with_commitments(cloud, cc.lines)
    if billing == "native":
        if cc.native is None:
            raise ValueError(f"{cloud}: no native billing format")
        billing_file, billing_bytes = cc.native.path, cc.native.write(cc.lines)
    else:
        billing_file = cc.billing_file
        billing_bytes = write_csv(cc.lines, cc.columns, cc.stamp,
                                  {"BillingPeriodStart": "start", "BillingPeriodEnd": "end"})
    log, successful = gateway.access_log(seed)
    cpu = CpuService(gateway.NAME, lambda line: gateway.claimed(line.columns.get("Tags"), cloud), successful)
    truth = compute_truth(cc.world, cc.lines, profile, {
        "cloud": cloud, "case": f"cloudgen-{cloud}-seed{seed}", "currency": cc.currency,
        "window": {"start": "2026-09-01T00:00:00Z", "end": "2026-09-02T00:00:00Z"}, "cost_basis": "effective",
        "scope_accounts": cc.accounts, "identities": cc.identities}, cpu)
    files = {
        "case.toml": case_toml(cc, with_profile, billing == "native").encode(),
        billing_file: billing_bytes,
        TELEMETRY_FILE: gzip_bytes(write_telemetry(cc.world)),
        gateway.LOG_FILE: log,
        "truth.json": (json.dumps(truth, indent=2, sort_keys=True) + "\n").encode(),
        "PROVENANCE.md": provenance(cc, with_profile, billing == "native").encode(),
    }
    if profile:
        files[PROFILE_FILE] = profile.path.read_bytes()
    for rel, data in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return truth
