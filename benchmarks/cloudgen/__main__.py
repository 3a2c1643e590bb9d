"""``python -m benchmarks.cloudgen --cloud gke|aks|eks --seed N --out DIR [--billing native]``: write one case
folder."""
from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.cloudgen import CLOUDS, add_variant_options


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cloudgen",
                                     description="Write a seeded GKE / AKS / EKS case folder with its truth.json.")
    parser.add_argument("--cloud", choices=CLOUDS, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the case folder to write")
    parser.add_argument("--trace", type=Path, default=None, help="the chat profile trace (default: found)")
    parser.add_argument("--no-profile", action="store_true",
                        help="write no [[profiles]]: every service's kernel-active cost is unattributed")
    add_variant_options(parser)
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
