"""cloudgen: seeded GKE, AKS and EKS cases in the providers' own formats, each with its truth.

A standalone generator for measuring costaudit on clusters it has never seen. For one cloud and one
seed it writes a complete case folder: a FOCUS CSV as that provider exports it (or, with
``billing="native"``, the same lines in its own export format: native.py), an OpenMetrics file
as dcgm-exporter, kube-state-metrics and vLLM write it, a kernel profile (a copy of a public trace),
``case.toml`` and ``truth.json``: the bucket totals of METHOD sections 2-3, computed from the hidden
states the files were made from (every GPU-interval's busy fraction, holder and cost), never by
reading the files back.

It imports only the standard library and numpy: nothing of costaudit (``tests/benchmarks`` holds a
test that says so), so that its truth is independent of the engine it measures.

    python -m benchmarks.cloudgen --cloud gke|aks|eks --seed N --out DIR
"""
from __future__ import annotations

CLOUDS = ("eks", "gke", "aks")
BILLINGS = ("focus", "native")


def add_variant_options(parser, several_billings: bool = False) -> None:
    """The case variants, as ``python -m benchmarks.cloudgen`` and ``cloudgen_check.py`` take them:
    the billing format (one, or with ``several_billings`` any of them) and the optional adjustments."""
    parser.add_argument("--billing", choices=BILLINGS, nargs="+" if several_billings else None,
                        default=["focus"] if several_billings else "focus",
                        help="the provider's FOCUS CSV (default) or its own export format: GCP detailed export, "
                             "CUR 2.0, Azure EA cost details (same lines, same truth)"
                             + ("; both to write each case both ways" if several_billings else ""))
    one = parser.add_mutually_exclusive_group()  # a commitment replaces the charges the credits ride on
    one.add_argument("--adjustments", action="store_true",
                        help="credits riding on their charges and tax per service (GKE and EKS)")
    one.add_argument("--commitments", action="store_true",
                        help="commitments, partly unused: AKS reservations in an amortised export, an EKS Savings Plan, "
                             "GKE committed use discounts (resource-based on the H100s, spend-based on the CPU nodes)")
