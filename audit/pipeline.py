"""The only module that knows the order of the stages and what each hands to the next:

collect → normalise → scope, classify, adjust → prices → GPU split → attribute → unit costs →
reconcile → rank → evidence, gathered into an :class:`~audit.result.AuditResult`; then the
audit.json writer and render. No stage imports another; each takes what the previous ones
returned and returns a typed result.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from audit import (
    adjust,
    attribute,
    classify,
    evidence,
    fit,
    gpusplit,
    normalise,
    prices,
    rank,
    reconcile,
    split_remote,
    unit_costs,
)
from audit.bridge import unpurchased
from audit.case import Case
from audit.collect import collect_sources
from audit.collected import Collected
from audit.fit_commitments import window_purchases
from audit.fit_phases import phases_fit
from audit.fit_profiles import devices_of
from audit.fit_sources import charge_period_fit, currency_fit, path_filter_fit, split_money_fit
from audit.fit_traffic import traffic_fit
from audit.lines import basis_amount, lines_where
from audit.money import use_context
from audit.months import calendar_months, narrowed
from audit.overdrawn import overdrawn
from audit.result import AuditResult, commitments_of
from connectors.base import SourceSpec
from connectors.errors import InputError, InputErrors

#: called with each source's spec as it is read, with the words of each later step as it starts
#: ("splitting GPU time …", "writing report.pdf"), and with None when the audit is done
Progress = Callable[[SourceSpec | str | None], None]
#: where a fit error of a case lies, said in its stead of the case file (audit/whatif.py)
Blame = Callable[[fit.Misfit], str]


def run_case(case: Case, out_dir: Path, formats: Sequence[str],
             progress: Progress | None = None) -> tuple[dict, list[Path]]:
    """The whole job of ``costaudit run``: every stage, the audit.json document, then the reports.

    Returns the document and the paths written; nothing is written when a stage or a reporter fails.
    """
    from audit.audit_json import to_dict
    from audit.render import render

    result = run_audit(case, progress)
    _step(progress, "formatting audit.json")
    document = to_dict(result)
    if progress is not None:
        progress(None)
    return document, render(document, out_dir, formats, progress=progress)


def run_audit(case: Case, progress: Progress | None = None) -> AuditResult:
    """Run every stage on a case; a case that does not fit its data (audit/fit.py errors: a service
    that matches nothing) stops before any figure is made, as ``costaudit validate`` does."""
    use_context()
    result = audit_collected(case, collect_sources(case, progress), strict=True, progress=progress)
    return with_months(result, progress)


def with_months(result: AuditResult, progress: Progress | None = None) -> AuditResult:
    """The result with each calendar month audited as a sub-window on the same reading of the sources,
    when the window spans two or more (METHOD §10: the quarter's figures are the sums of the rounded
    months); unchanged otherwise. A month is not held to the case's fit (a service may start later)."""
    windows = calendar_months(result.case.start, result.case.end)
    if len(windows) < 2:
        return result
    months, empty = [], []
    for i, (start, end) in enumerate(windows):
        _step(progress, f"auditing month {start:%Y-%m}")
        month = replace(result.case, start=start, end=end)
        collected = narrowed(result.collected, start, end, i == 0, i == len(windows) - 1)
        if not any(len(frame.tables.get("lines", ())) for frame in collected.of("billing")):
            empty.append((start, end))
            continue
        months.append(audit_collected(month, collected))
    if empty:
        raise months_without_billing(result, empty)
    return replace(result, months=tuple(months))


def months_without_billing(result: AuditResult, empty: list) -> InputError:
    """The calendar months of the window no billing line falls in, with what the billing's lines in the
    window cover: a quarter audited from two months' invoices would be a quarter's figures short of a
    month. Moments off midnight (a window given with an offset) are shown with their UTC time."""
    case, frames = result.case, result.collected.of("billing")
    named = ", ".join(f"{s:%Y-%m} ({_span(s, e)})" for s, e in empty)
    starts = [f.covered[0] for f in frames if f.covered[0] is not None]
    ends = [f.covered[1] for f in frames if f.covered[1] is not None]
    covers = (f"; the billing's lines in the window cover {min(starts):%Y-%m-%d %H:%M} – {max(ends):%Y-%m-%d %H:%M} UTC"
              if starts and ends else "")
    paths = ", ".join(f.spec.where for f in frames) or str(case.path)
    return InputError(paths, f"no billing line falls in {named}, of the window {_span(case.start, case.end)}{covers}",
                      column="ChargePeriodStart", expected="billing lines in every calendar month of the window, or "
                                                           "a window inside what the billing covers")


def _span(start, end) -> str:
    """``start – end`` as dates, or as UTC times where either is off midnight."""
    start, end = (pd.Timestamp(m).tz_convert("UTC") if pd.Timestamp(m).tzinfo else pd.Timestamp(m) for m in (start, end))
    if all(m == m.normalize() for m in (start, end)):
        return f"{start:%Y-%m-%d} – {end:%Y-%m-%d}"
    return f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC"


def audit_on_one_reading(cases: Sequence[Case], progress: Progress | None = None,
                         blames: Sequence[Blame | None] = ()) -> list[AuditResult]:
    """Several cases audited on one reading of the sources of the first (``costaudit whatif``: the
    same sources under changed settings; the caller makes sure every case names the same sources).
    ``blames``: per case, where its fit errors are said to lie (:func:`misfit_errors`)."""
    use_context()
    collected = collect_sources(cases[0], progress)
    results = []
    for i, case in enumerate(cases, 1):
        _step(progress, f"auditing case {i} of {len(cases)}")
        blame = blames[i - 1] if i <= len(blames) else None
        results.append(audit_collected(case, collected, strict=True, progress=progress, blame=blame))
    return results


def fit_of(case: Case, collected: Collected) -> fit.Fit:
    """Whether the case fits its data (for ``costaudit validate``): the stages up to classification."""
    use_context()
    lines = normalise.billing_lines(case, collected)
    basis_amount(lines, case.cost_basis)  # a basis whose column the export lacks: the run's error, now
    tele = normalise.telemetry(case, collected)
    nodes = normalise.node_map(case, tele, lines)
    mask, _ = adjust.in_scope(lines, case.scope)
    classified = classify.classify(lines_where(lines, mask), case.rules, nodes.cluster, nodes.with_gpus, case.services)
    return fitted(case, collected, lines, mask, classified, tele, nodes)


def fitted(case: Case, collected: Collected, lines, mask, classified, tele, nodes) -> fit.Fit:
    """The case's fit against its data (audit/fit.py), what the billing readers set apart with
    money on it and a request log's path filter that matches nothing (audit/fit_sources.py), and the
    pods whose phase timers time one phase only (audit/fit_phases.py), and traffic files unlike their
    service's counters (audit/fit_traffic.py)."""
    found = fit.fit(case, lines, adjust.charges_in_scope(lines, mask), classified, tele, nodes, devices_of(collected),
                    window_purchases(collected))
    return replace(found, misfits=found.misfits + tuple(currency_fit(collected)) + tuple(charge_period_fit(collected))
                   + tuple(split_money_fit(collected)) + tuple(path_filter_fit(collected)) + tuple(phases_fit(case, tele))
                   + tuple(traffic_fit(case, tele)))


def billed_lacks(case: Case, scoped) -> str | None:
    """On the billed or effective basis, what its total lacks where commitment purchases are not in
    the data (the reconciliation's reason names it); None on another basis or where nothing is lacking."""
    found = unpurchased(scoped, case.cost_basis) if case.cost_basis in ("billed", "effective") else None
    return found.lacks() if found is not None else None


def lacking_commitments(case: Case, classified) -> tuple[str, ...]:
    """On the effective basis, the commitments whose covered usage costs 0 for want of their purchase
    (audit/prices.py prices it at its contracted price); () on another basis or where there is none."""
    found = unpurchased(classified, "effective") if case.cost_basis == "effective" else None
    return found.commitments if found is not None else ()


def misfit_errors(case: Case, found: fit.Fit, blame: Blame | None = None) -> InputErrors:
    """The errors of a fit as input errors naming the case file (exit 1), or what ``blame`` says of
    each (what-if: the --set that made the changed case's service match nothing)."""
    return InputErrors([InputError(blame(m) if blame else case.path, m.message) for m in found.errors])


def _step(progress: Progress | None, words: str) -> None:
    if progress is not None:
        progress(words)


def audit_collected(case: Case, collected: Collected, strict: bool = False,
                    progress: Progress | None = None, blame: Blame | None = None) -> AuditResult:
    """Every stage after collection (tests feed in-memory source frames here); ``strict``: raise the
    fit's errors (a service that matches nothing) before any figure is made; ``progress`` hears of
    each group of stages as it starts; ``blame``: where the fit's errors lie (:func:`misfit_errors`)."""
    use_context()
    _step(progress, "preparing invoice lines and telemetry")
    lines = normalise.billing_lines(case, collected)
    tele = normalise.telemetry(case, collected)
    profiles = normalise.profiles(collected)
    nodes = normalise.node_map(case, tele, lines)
    mask, reasons = adjust.in_scope(lines, case.scope)
    classified = classify.classify(lines_where(lines, mask), case.rules, nodes.cluster, nodes.with_gpus, case.services)
    checked = fitted(case, collected, lines, mask, classified, tele, nodes)
    if strict and checked.errors:
        raise misfit_errors(case, checked, blame)
    spread, leftovers = adjust.spread(classified, case.cost_basis)
    charges = prices.priced(spread, case.cost_basis, lacking_commitments(case, classified))
    checked = replace(checked, misfits=checked.misfits + overdrawn(charges, classified, case.cost_basis))
    in_place = split_remote.engine_for(case)
    _step(progress, "splitting GPU time per service and interval"
          + (f" (its sums in {in_place[1].engine}, beside {in_place[1].table})" if in_place else ""))
    split = gpusplit.split_gpus(case, charges, tele, nodes, in_place[0] if in_place else None)
    attributed = attribute.attribute(case, collected, charges, leftovers, split, profiles, checked.undeclared)
    ledger, intervals = attributed.ledger, attributed.intervals
    _step(progress, "unit costs, reconciliation and options")
    traffic = unit_costs.traffic_by_service(tele.traffic, case.services, tele.request_counts, tele.serving)
    costs, shared = unit_costs.unit_costs(ledger, intervals, case.services, traffic, case.allocation)
    recon = reconcile.reconcile(reconcile.ReconcileInput(
        lines, mask, case.cost_basis, charges, ledger, split.groups, intervals, split.coverage, profiles, traffic,
        case.tolerance, billed_lacks(case, classified)))
    options = rank.rank_options(rank.RankInput(case, ledger, intervals, tele.step, charges, profiles,
                                                 commitments_of(collected, case.end), split.groups,
                                                 split.coverage, tele.serving, tele.histograms))
    _step(progress, "gathering the evidence")
    found = evidence.gather(case, tele, profiles, ledger)
    return AuditResult(case, collected, lines, mask, tuple(reasons), charges, ledger, intervals, split.groups,
                       split.coverage, tele, profiles, traffic, costs, recon, tuple(options), split.extra_gpus, found,
                       fit.Fit(checked.misfits + split.misfits), shared, split_in_place=in_place[1] if in_place else None)
