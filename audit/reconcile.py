"""Stage 4: conservation (the parts sum to the lines in scope), then top-down (lines) vs bottom-up
(measurements × unit prices), with drivers (METHOD §5)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Mapping, Sequence

import pandas as pd

from audit.errors import AuditError
from audit.gpu_unpaid import unpaid_busy, unpaid_drivers
from audit.ledger import UNMEASURED_HOLDERS, Group, Ledger, NodeCoverage, ServiceInterval, is_service
from audit.lines import basis_amount
from audit.money import ZERO, dsum
from audit.normalised import ProfileSummary
from audit.result import Conservation, Driver, Reconciliation, TrafficTotals

#: how far the ledger's total may differ from the lines in scope (Decimal rounding of 50 digits)
CONSERVATION_SLACK = Decimal("1e-20")


@dataclass(frozen=True)
class ReconcileInput:
    """What reconciliation compares: the charges (priced), the GPU split and attribution, the
    profiles and traffic behind the bottom-up estimate, and the lines in scope the ledger must sum to."""

    lines: pd.DataFrame                          # every billing line read
    scope_mask: pd.Series                        # the lines in scope
    cost_basis: str
    charges: pd.DataFrame                        # classified, adjusted and priced (audit.prices)
    ledger: Ledger
    groups: Mapping[tuple[str, datetime], Group]
    intervals: Sequence[ServiceInterval]
    coverage: Mapping[str, NodeCoverage]
    profiles: Mapping[str, ProfileSummary]
    traffic: Mapping[str, TrafficTotals]
    tolerance: Decimal
    #: on the billed or effective basis, what its total lacks where commitment purchases are not in the data
    #: (audit/bridge.py ``Unpurchased.lacks``); None: nothing
    unpurchased: str | None = None


def _gap(top: Decimal, bottom: Decimal) -> Decimal | None:
    return None if top == 0 else (top - bottom) / top


def reconcile(given: ReconcileInput) -> Reconciliation:
    """Check conservation, then compare both estimates over the covered GPU-intervals and the
    non-GPU classes."""
    conservation = conserved(given)
    charges, tolerance = given.charges, given.tolerance
    drivers: list[Driver] = []
    td_gpu, bu_gpu, net_gpu, covered, unestimated, priced_at = _gpu_sides(
        given.groups, given.intervals, given.profiles, given.traffic, drivers, unpaid_busy(given.coverage))
    non_gpu = charges.loc[charges["resource_class"] != "gpu_compute", ["pretax", "priced", "net"]]
    td_lines = sum(non_gpu["pretax"], ZERO)
    bu_lines = sum(non_gpu["priced"], ZERO)
    net_lines = sum(non_gpu["net"], ZERO)
    drivers.extend(_price_drivers(charges, given.cost_basis))
    drivers.extend(_coverage_drivers(given.coverage))
    drivers.extend(_denominator_drivers(given.traffic, tolerance))
    gap_drivers = _serving_gap_drivers(given.profiles, given.intervals, conservation.in_scope_total)
    drivers.extend(gap_drivers)
    sensitive = "".join(f"; {d.detail.split(': ', 1)[1]}, more than the tolerance" for d in gap_drivers
                        if d.gap is not None and abs(d.gap) > tolerance)
    if given.unpurchased:
        sensitive += (f"; {given.unpurchased}: their usage costs 0 on the {given.cost_basis} basis while the "
                      "bottom-up prices it (fit commitment_purchases_missing)")
    # tax and credits pass through both sides unchanged
    passthrough = (net_gpu - td_gpu) + (net_lines - td_lines)
    top = td_gpu + td_lines + passthrough
    drivers[:0] = unpaid_drivers(given.coverage, priced_at, top)
    if covered == 0:
        return Reconciliation(net_lines, None, None, tolerance, "not_measured",
                              "no GPU-interval is covered by kernel-activity telemetry" + sensitive, covered,
                              tuple(drivers), conservation)
    if unestimated:
        return Reconciliation(top, None, None, tolerance, "not_measured", unestimated + sensitive, covered,
                              tuple(drivers), conservation)
    bottom = bu_gpu + bu_lines + passthrough
    gap = _gap(top, bottom)
    verdict = "reconciles" if gap is not None and abs(gap) <= tolerance else "does_not_reconcile"
    reason = (f"|gap| {abs(gap):.4f} {'≤' if verdict == 'reconciles' else '>'} tolerance {tolerance}"
              if gap is not None else "top-down is zero") + sensitive
    return Reconciliation(top, bottom, gap, tolerance, verdict, reason, covered, tuple(drivers), conservation)


def conserved(given: ReconcileInput) -> Conservation:
    """Every amount in scope is in exactly one part: the ledger sums to the lines in scope.

    Raises AuditError when it does not (a fault of the audit, never of the input).
    """
    total = given.ledger.total()
    in_scope = dsum(basis_amount(given.lines, given.cost_basis)[given.scope_mask])
    if abs(total - in_scope) > CONSERVATION_SLACK:
        raise AuditError(f"conservation broken: parts sum to {total}, lines in scope to {in_scope}")
    return Conservation(total, in_scope)


def _gpu_sides(groups: Mapping[tuple[str, datetime], Group], intervals: Sequence[ServiceInterval],
               profiles: Mapping[str, ProfileSummary], traffic: Mapping[str, TrafficTotals],
               drivers: list[Driver], beyond: Mapping[tuple, Decimal]
               ) -> tuple[Decimal, Decimal, Decimal, Decimal, str, dict[tuple, Decimal]]:
    """Top-down and bottom-up of the covered GPU-intervals (pre tax and credits), why the bottom-up
    is not measured where no served GPU time is estimated from a profile ("" where it is), and the
    price per GPU-second of each (service, interval) whose kernel time is estimated from requests.

    The requests of an interval are all it served, those served in time telemetry saw a node beyond
    its lines (``beyond``: kernel-active GPU-seconds per (holder, interval)) included: the profile's
    estimate is checked against the kernel-active seconds of the same requests."""
    top = bottom = net = covered = ZERO
    kernel_est: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    kernel_seen: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    kernel_unpaid: defaultdict[str, Decimal] = defaultdict(lambda: ZERO)
    priced_at: dict[tuple, Decimal] = {}
    for iv in intervals:
        if iv.paid_seconds == 0:
            continue
        price = iv.priced / iv.paid_seconds
        profile = profiles.get(iv.service)
        kps = profile.kernel_seconds_per_request if profile else None
        t = traffic.get(iv.service)
        if kps is not None and t is not None and t.requests is not None:  # requests measured
            kernel = t.requests_of(iv.ts, iv.pods) * kps
            kernel_est[iv.service] += kernel
            kernel_unpaid[iv.service] += beyond.get((iv.service, iv.ts), ZERO)
            priced_at[(iv.service, iv.ts)] = price
        else:
            kernel = iv.busy_seconds  # no profile or no request count: telemetry's kernel-active seconds
        kernel_seen[iv.service] += iv.busy_seconds
        top += iv.gross
        net += iv.paid
        bottom += (kernel + iv.paid_seconds - iv.busy_seconds) * price
        covered += iv.paid_seconds
    for (holder, _), group in groups.items():
        if not is_service(holder) and holder not in UNMEASURED_HOLDERS and group.paid_seconds:
            top += group.gross
            net += group.paid
            bottom += group.priced  # measured whole-GPU time (idle or undeclared) × unit price
            covered += group.paid_seconds
    for service, estimate in sorted(kernel_est.items()):
        paid, unpaid = kernel_seen[service], kernel_unpaid[service]
        seen = paid + unpaid
        split = f" ({paid:.0f} s in paid time, {unpaid:.0f} s in time no line pays)" if unpaid else ""
        drivers.append(Driver("representativeness", service, _gap(seen, estimate) if seen else None,
                              f"profile kernel-seconds per request × requests = {estimate:.0f} s vs "
                              f"telemetry kernel-active {seen:.0f} s{split}"))
    for service in sorted(set(kernel_seen) - set(kernel_est)):
        drivers.append(Driver("representativeness", service, None, _no_estimate(profiles.get(service))))
    unestimated = ""
    if kernel_seen and not kernel_est:  # METHOD §5: without a profile's traffic, kernel-seconds per request is unmeasured
        unestimated = ("no service's kernel time is estimated from a kernel profile with its traffic (services "
                       f"{', '.join(sorted(kernel_seen))}): the bottom-up would take telemetry's kernel-active seconds, "
                       "as the top-down does, and their gap would say nothing")
    return top, bottom, net, covered, unestimated, priced_at


def _no_estimate(profile: ProfileSummary | None) -> str:
    """Why a service has no bottom-up kernel estimate (its telemetry's kernel-active seconds stand)."""
    if profile is not None and profile.requests == 0:
        return (f"profile {profile.name} served no request in its window (requests = 0): kernel-seconds "
                "per request unmeasured, telemetry kernel-active seconds used on both sides")
    if profile is not None and profile.requests is None:
        return (f"profile {profile.name} states no requests count: kernel-seconds per request unmeasured, "
                "telemetry kernel-active seconds used on both sides")
    if profile is not None:
        return (f"profile {profile.name} states its requests, but no request counter or log counts this "
                "service's requests: telemetry kernel-active seconds used on both sides")
    return "no profile with stated traffic: telemetry kernel-active seconds used on both sides"


def _serving_gap_drivers(profiles: Mapping[str, ProfileSummary], intervals: Sequence[ServiceInterval],
                         total: Decimal) -> list[Driver]:
    """g's sensitivity (METHOD §3), per profiled service: how much of the serving path
    (min(g × B, P − B) per interval) would move had g been taken over the trace's whole GPU window
    instead of the served traffic's, as a share of the cost in scope. Beyond the tolerance the
    verdict's reason says so by name."""
    out = []
    for service, p in sorted(profiles.items()):
        sens = p.gap_sensitivity
        if sens is None or sens.served_window is None or sens.full_window is None:
            continue
        full = sens.full_window
        moved = [min(full * iv.kernel, iv.paid - iv.kernel) - iv.serving
                 for iv in intervals if iv.service == service and iv.serving is not None]
        if not moved:
            continue
        shift = sum(moved, ZERO)
        share = shift / total if total else None
        left_out = (f"{sens.excluded_kernels} kernel(s), {sens.excluded_kernel_us / 1000:.3f} ms kernel-active, "
                    f"{sens.excluded_us / 1000:.3f} ms of GPU window outside it")
        where = "from platform overhead to serving path" if shift >= 0 else "from serving path to platform overhead"
        figure = f"{share:.2%} of the cost in scope" if share is not None else "no cost in scope"
        out.append(Driver("serving_gap", service, share,
                          f"g {sens.served_window:.4f} over {p.gap_basis.replace('_', ' ')} ({left_out}): "
                          f"serving gap g of {service} over the whole GPU window would be {sens.full_window:.4f}, "
                          f"moving {abs(shift):.2f} ({figure}) {where}"))
    return out


#: the price a line lacking its basis's unit price was priced at (audit/prices.py ``price_fallback``)
FALLBACK_WORDS = {"list": "ContractedUnitPrice (no list price)"}
#: how a commitment-covered line's rate is taken, per basis (audit/prices.py)
RATE_WORDS = {"effective": "their effective rate (EffectiveCost ÷ quantity",
              "billed": "their commitment rate (the commitment purchase spread onto them ÷ quantity"}


def _price_drivers(charges: pd.DataFrame, basis: str) -> list[Driver]:
    out = []
    read = charges[["resource_class", "pretax", "priced", "has_price", "price_fallback", "effective_rate",
                    "unpurchased", "spread_rate", "unused_spread", "zero_price"]]
    for klass, frame in sorted(read.groupby("resource_class"), key=lambda kv: kv[0]):
        top, priced = sum(frame["pretax"], ZERO), sum(frame["priced"], ZERO)
        unpriced = int((~frame["has_price"] & ~frame["zero_price"]).sum())
        detail = f"cost {top:.2f} vs quantity × unit price {priced:.2f}" + _zero_price_words(frame)
        if unpriced:
            detail += (f"; {unpriced} line(s) taken at cost (no quantity or unit price, a purchase, or unused "
                       "commitment that the list / contracted basis counts at 0)")
        fallback = int(frame["price_fallback"].sum())
        if fallback:
            detail += f"; {fallback} line(s) priced at {FALLBACK_WORDS.get(basis, 'ListUnitPrice (no contracted price)')}"
        covered = int(frame["effective_rate"].sum())
        if covered:
            detail += (f"; {covered} commitment-covered line(s) priced at {RATE_WORDS[basis]}: the contracted price "
                       "excludes the commitment discount)")
        blocks = int(frame["spread_rate"].sum())
        if blocks:
            detail += (f"; {blocks} line(s) of no commitment priced at the purchase spread onto them ÷ quantity "
                       "(an EC2 Capacity Block's instance-hours, billed 0: the block's fee)")
        unused = int(frame["unused_spread"].sum())
        if unused:
            detail += (f"; {unused} unused commitment line(s) priced at the commitment purchase spread onto them "
                       "(their quantity × unit price prices no purchase)")
        unpurchased = int(frame["unpurchased"].sum())
        if unpurchased:
            detail += (f"; {unpurchased} commitment-covered line(s) cost 0 for want of their commitment's purchase in "
                       "scope, priced at their contracted price (fit commitment_purchases_missing)")
        out.append(Driver("price", klass, _gap(top, priced), detail))
    return out


def _zero_price_words(frame: pd.DataFrame) -> str:
    """The lines of unit price 0 with a cost, taken at that cost (audit/prices.py ``zero_price``), named."""
    zero = frame.loc[frame["zero_price"].astype(bool), "pretax"]
    if zero.empty:
        return ""
    return (f"; {len(zero)} line(s) of unit price 0 with a cost taken at that cost, {sum(zero, ZERO):.2f} (a price "
            "of 0 is no measured unit price: an Azure Marketplace row's, whose ContractedCost is its cost too)")


def _coverage_drivers(coverage: Mapping[str, NodeCoverage]) -> list[Driver]:
    out = []
    for key, c in sorted(coverage.items()):
        if c.paid_seconds == 0:
            continue
        share = (c.paid_seconds - c.observed_seconds) / c.paid_seconds
        beyond = (f"; {c.seen_unpaid_seconds / 3600:.1f} GPU-h more seen in hours no line pays"
                  if c.seen_unpaid_seconds else "")
        out.append(Driver("coverage", c.node or c.resource_id or key, share,
                          f"paid {c.paid_seconds / 3600:.1f} GPU-h, seen in telemetry "
                          f"{c.observed_seconds / 3600:.1f} GPU-h (uncovered share is unattributed, outside the gap)"
                          f"{beyond}"))
    return out


def _denominator_drivers(traffic: Mapping[str, TrafficTotals], tolerance: Decimal) -> list[Driver]:
    """Requests counted two ways (server counters vs request logs): flagged beyond the tolerance."""
    out = []
    for name, t in sorted(traffic.items()):
        counts = sorted(t.by_source.items())
        if len(counts) < 2:
            out.append(Driver("denominator", name, None, f"requests from one source only ({counts[0][0] if counts else 'none'}): "
                              "no second count to compare"))
            continue
        primary = " + ".join(sorted(t.sources))  # the denominator's sources (audit/unit_costs.py)
        (first, a) = (primary, t.by_source[primary])
        (second, b) = next((k, v) for k, v in counts if k != primary)
        gap = _gap(a, b) if a else None
        flag = " — differs by more than the tolerance" if gap is not None and abs(gap) > tolerance else ""
        out.append(Driver("denominator", name, gap, f"{first}: {a:.0f} requests vs {second}: {b:.0f}{flag}"))
    return out
