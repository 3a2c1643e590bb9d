"""``python -m benchmarks.cloudgen --cloud gke|aks|eks --seed N --out DIR [--billing native]``: write one case
folder."""
from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.cloudgen import CLOUDS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cloudgen",
                                     description="Write a seeded GKE / AKS / EKS case folder with its truth.json.")
    parser.add_argument("--cloud", choices=CLOUDS, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the case folder to write")
    parser.add_argument("--trace", type=Path, default=None, help="the chat profile trace (default: found)")
    parser.add_argument("--no-profile", action="store_true",
                        help="write no [[profiles]]: every service's kernel-active cost is unattributed")
    parser.add_argument("--billing", choices=("focus", "native"), default="focus",
                        help="the provider's FOCUS CSV (default) or its own export format: GCP detailed export, "
                             "CUR 2.0, Azure EA cost details (same lines, same truth)")
    parser.add_argument("--adjustments", action="store_true",
                        help="add credits riding on their charges and tax per service (GKE and EKS)")
    parser.add_argument("--commitments", action="store_true",
                        help="commitments, partly unused: AKS reservations in an amortised export, an EKS Savings Plan")
    args = parser.parse_args(argv)
    from benchmarks.cloudgen.generate import generate

    truth = generate(args.cloud, args.seed, args.out, args.trace, not args.no_profile, args.billing,
                     args.adjustments, args.commitments)
    buckets = ", ".join(f"{k} {v['amount']}" for k, v in truth["buckets"].items())
    print(f"wrote {args.out}: total {truth['total']} {truth['currency']}; {buckets}; "
          f"outside scope {truth['outside_scope']['amount']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
