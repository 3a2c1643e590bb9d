"""The plan over the priced options (METHOD §7): deferred payback, empty options never ranked,
options on one part combined (not added), sensitivity and break-even, and who acts.

Pure functions over :class:`~audit.result.Option` values that ranking has priced: nothing here reads
a source. :func:`plan` is called once, at the end of ``audit.rank.rank_options``; :func:`combined`
is what audit.json's ``plan`` section and the report's combined table show.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Callable, Iterable, Mapping, Sequence

from audit.money import ZERO, cents, largest_remainder
from audit.result import MONTH_DAYS, Bands, Option, Sensitivity

BANDS = ("low", "expected", "high")
ONE = Decimal(1)
#: parts whose saving lies wholly on committed capacity: it starts when the commitment ends
WHOLLY_COMMITTED = {"platform_overhead.commitment_unused"}
DEFAULT_HORIZON = Decimal(12)
DEFAULT_RATE_SPREAD = Decimal("0.25")     # loaded rate ± 25 %
DEFAULT_TARGET_SPREAD = Decimal("0.1")    # target utilisation ± 0.1
NO_SAVING = "no saving in this case"


@dataclass(frozen=True)
class Deferral:
    """Where a saving lies on committed capacity: the share that does, and t_c (None: end unknown)
    with the commitments it was taken from, in words; ``share_source``: what measured the share."""

    share: Decimal = ZERO
    months: Decimal | None = None
    source: str = ""
    share_source: str = ""


@dataclass(frozen=True)
class PlanInput:
    """What the plan needs besides the options, gathered by ranking from the case and the stages."""

    #: bucket.part -> its amount a month
    part_monthly: Mapping[str, Decimal]
    #: option id -> run cost a month, next step, dependencies (catalogue fields)
    run_costs: Mapping[str, Decimal] = field(default_factory=dict)
    next_steps: Mapping[str, str] = field(default_factory=dict)
    depends_on: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: bucket.part -> who can act on it
    owners: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: option id -> where its saving lies on committed capacity
    deferrals: Mapping[str, Deferral] = field(default_factory=dict)
    loaded_rate: Decimal = ZERO
    loaded_rate_range: tuple[Decimal, Decimal] | None = None
    target_utilisation: Decimal = Decimal("0.8")
    target_range: tuple[Decimal, Decimal] | None = None
    #: option id -> (gross saving scale at the target's low, at its high), for options whose base depends on it
    target_scale: Mapping[str, tuple[Decimal, Decimal]] = field(default_factory=dict)
    horizon_months: Decimal = DEFAULT_HORIZON
    #: the end of W: an option's own ``commitment_end`` (the billing's commitment dates) gives t_c from it
    window_end: datetime | None = None


@dataclass(frozen=True)
class PartPlan:
    """The combined saving of the ranked options on one part (or of the whole plan: part ``total``)."""

    part: str
    part_monthly: Decimal
    options: tuple[str, ...]
    gross: Bands
    run_cost: Decimal
    saving: Bands


def plan_part(acts_on: str) -> str:
    """The bucket.part an option counts towards: an option on a finding (bucket.part.finding) counts
    towards the finding's part."""
    return ".".join(acts_on.split(".")[:2])


def deferred_payback(cost: Decimal, now: Decimal, later: Decimal, months: Decimal | None) -> Decimal | None:
    """Months from the end of W until ``cost`` is paid back by ``now`` a month, plus ``later`` a month
    from ``months`` on (METHOD §7): C / s₀ if C ≤ s₀·t_c, else t_c + (C − s₀·t_c) / (s₀ + s₁).
    ``months`` None: s₁ is not measured and the payback is on s₀ alone. None: never paid back."""
    if cost <= 0:
        return ZERO
    if months is None or later == 0:
        return cost / now if now > 0 else None
    t = max(months, ZERO)
    if now > 0 and cost <= now * t:
        return cost / now
    total = now + later
    if total <= 0:
        return None
    return t + (cost - now * t) / total


def split_saving(gross: Decimal, run_cost: Decimal, deferral: Deferral) -> tuple[Decimal, Decimal]:
    """(s₀, s₁) of one band: the run cost counts from now; the committed share waits for t_c."""
    later = gross * deferral.share
    return gross - later - run_cost, later


def payback_of(cost: Decimal, gross: Decimal, run_cost: Decimal, deferral: Deferral) -> Decimal | None:
    """The payback of one band's cost and gross saving."""
    now, later = split_saving(gross, run_cost, deferral)
    return deferred_payback(cost, now, later, deferral.months)


def _gross(option: Option, run_cost: Decimal) -> dict[str, Decimal]:
    assert option.saving is not None
    return {b: option.saving[b] + run_cost for b in BANDS}


def _paybacks(option: Option, gross: Mapping[str, Decimal], run: Decimal, deferral: Deferral) -> dict:
    """payback.low = cost.low on the high saving; high = cost.high on the low saving (None if ≤ 0)."""
    pairs = {"low": ("low", "high"), "expected": ("expected", "expected"), "high": ("high", "low")}
    return {b: payback_of(option.cost[c], gross[s], run, deferral) for b, (c, s) in pairs.items()}


def _available(gross: Mapping[str, Decimal], run: Decimal, deferral: Deferral) -> dict[str, Decimal]:
    """The saving a month the option is priced on: s₀ + s₁, or s₀ alone where no end date is known."""
    out = {}
    for b in BANDS:
        now, later = split_saving(gross[b], run, deferral)
        out[b] = now + (later if deferral.months is not None else ZERO)
    return out


def is_empty(option: Option, available: Mapping[str, Decimal] | None) -> bool:
    """No expected saving: none priced, ≤ 0 to the cent, or a part of 0.00."""
    if available is None or option.part_monthly is None:
        return True
    return cents(available["expected"]) <= 0 or cents(option.part_monthly) == 0


def price(option: Option, given: PlanInput) -> Option:
    """One option with its deferred bands, its paybacks and its status (empty: ``no_saving``)."""
    extras = {**_who(option, given), **_break_even(option, given)}
    if option.saving is None or option.status == "not_measured":
        return replace(option, rank=None, **extras)
    run = given.run_costs.get(option.id, ZERO)
    deferral = _dated(given.deferrals.get(option.id, Deferral()), option, given)
    gross = _gross(option, run)
    now = {b: split_saving(gross[b], run, deferral)[0] for b in BANDS}
    later = {b: split_saving(gross[b], run, deferral)[1] for b in BANDS}
    notes = _deferral_notes(deferral)
    option = replace(option, run_cost=run, saving_now=now,
                     saving_deferred=later if deferral.share and deferral.months is not None else None,
                     deferred_months=deferral.months if deferral.share else None,
                     committed_share=deferral.share or None,
                     assumptions=option.assumptions + notes, **extras)
    if is_empty(option, _available(gross, run, deferral)):
        shown = on_now_alone(option, deferral) if deferral.share and deferral.months is None else option
        return replace(shown, status="no_saving", payback=None, rank=None,
                       reason=_empty_reason(option, shown, gross, deferral))
    paybacks = _paybacks(option, gross, run, deferral)
    option = replace(option, status="priced", reason=None, payback=paybacks)
    if deferral.share and deferral.months is None:
        option = on_now_alone(option, deferral)
    return replace(option, sensitivity=sensitivity(option, gross, run, deferral, given))


def on_now_alone(option: Option, deferral: Deferral) -> Option:
    """An option whose committed share has no known end: priced on s₀ alone (METHOD §7), so its
    saving, its per-service split and what it adds to the plan leave out s₁, which is not measured.
    (Its paybacks are taken on s₀ by :func:`payback_of`.)"""
    assert option.saving_now is not None
    keep = ONE - deferral.share
    by_service = None if option.by_service is None else {
        name: {b: v * keep for b, v in bands.items()} for name, bands in option.by_service.items()}
    return replace(option, saving=dict(option.saving_now), by_service=by_service)


def _break_even(option: Option, given: PlanInput) -> dict:
    """The monthly saving that would pay the expected cost back over the horizon: a figure of the
    cost alone, so every option has it, priced or not (METHOD §7)."""
    if option.cost is None:
        return {}
    return {"break_even": option.cost["expected"] / given.horizon_months, "horizon_months": given.horizon_months}


def _dated(deferral: Deferral, option: Option, given: PlanInput) -> Deferral:
    """t_c from the option's own commitment end (the billing's dates) where the dataset gave none."""
    if not deferral.share or deferral.months is not None or option.commitment_end is None or given.window_end is None:
        return deferral
    seconds = Decimal(int((option.commitment_end - given.window_end).total_seconds()))
    return replace(deferral, months=max(ZERO, seconds / (MONTH_DAYS * 86400)))


def _empty_reason(option: Option, shown: Option, gross: Mapping[str, Decimal], deferral: Deferral) -> str:
    """Why an empty option saves nothing, quoting the saving ``shown`` (s₀ alone where the committed
    share's end is not known: :func:`on_now_alone`), never the one before that share was left out."""
    if deferral.share and deferral.months is None and cents(gross["expected"]) > 0 and option.saving is not None:
        return (f"{NO_SAVING} yet: the saving ({cents(option.saving['expected']):,} a month, expected) lies on "
                "committed capacity whose end date is not known (s₁ not measured), and nothing of it is "
                "available now")
    if option.status == "no_saving" and option.reason:
        if shown is option or shown.saving is None or option.saving is None:
            return f"{NO_SAVING}: {option.reason}"
        return (f"{NO_SAVING}: " + no_saving_reason(shown.saving, option.basis == "modelled", shown.run_cost,
                                                    (option.basis_note or "") if option.basis == "modelled" else "")
                + f" (the saving available now, s₀; before the {deferral.share:.0%} on committed capacity whose "
                f"end is not known was left out: {_slashed(option.saving)} a month, low / expected / high)")
    return f"{NO_SAVING}: the expected saving is 0.00 or less"


def no_saving_reason(saving: Mapping[str, Decimal], modelled: bool, run_cost: Decimal, bands: str = "") -> str:
    """Why an option saves nothing: a negative modelled saving says the change would cost more than
    what is paid now (its inputs give both costs), never shown as a zero. A high band above zero
    where the expected is not (the model's most favourable bound, e.g. every unallocated GPU released
    as if nodes came one GPU at a time) is named with what it assumes, so that the exports' high
    figure and the report's "no saving" agree: an option is ranked on its expected saving (METHOD §7)."""
    if modelled and saving["expected"] + run_cost < 0:
        return (f"the model finds the change would cost more than now ({saving['expected']:.2f} a month "
                "expected): what is in place already costs less (see the inputs)")
    if saving["expected"] <= 0 < saving["high"]:
        _, said, assumes = bands.rpartition("high: ")
        return (f"the expected saving is {saving['expected']:.2f} a month and the low {saving['low']:.2f}; only "
                f"the high band saves, {saving['high']:.2f} a month"
                + (f", on its most favourable assumption ({assumes})" if said else "")
                + ": not a saving to plan on, and an option with no expected saving is not ranked")
    if saving["expected"] <= 0:
        return "the saving is zero (or below the run cost)"
    return (f"the low band's saving is {saving['low']:.2f} a month (zero or below the run cost): the "
            "option does not pay in every band")


def _who(option: Option, given: PlanInput) -> dict:
    part = plan_part(option.acts_on)
    return {"plan_part": part, "plan_part_monthly": given.part_monthly.get(part),
            "owners": given.owners.get(part, ()), "next_step": given.next_steps.get(option.id),
            "depends_on": given.depends_on.get(option.id, ())}


def _deferral_notes(deferral: Deferral) -> tuple[str, ...]:
    if not deferral.share:
        return ()
    share = f"{deferral.share:.0%}" + (f" ({deferral.share_source})" if deferral.share_source else "")
    if deferral.months is None:
        return (f"{share} of the saving lies on committed capacity whose end date is not known: "
                "that part (s₁) is not measured, and the option is priced on the saving available now (s₀) alone",)
    source = f" ({deferral.source})" if deferral.source else ""
    return (f"{share} of the saving lies on committed capacity: it starts when the commitment "
            f"ends, {deferral.months:.1f} months after the window{source} (payback counts it from then)",)


def sensitivity(option: Option, gross: Mapping[str, Decimal], run: Decimal, deferral: Deferral,
                given: PlanInput) -> tuple[Sensitivity, ...]:
    """The expected payback under the low and high of each input (METHOD §7)."""
    cost, expected = option.cost["expected"], gross["expected"]

    def at(c: Decimal, g: Decimal) -> Decimal | None:
        return payback_of(c, g, run, deferral)

    rows = [Sensitivity("saving (recoverable share or model inputs)", _money(option.saving, "low"),
                        _money(option.saving, "high"), at(cost, gross["low"]), at(cost, gross["high"])),
            Sensitivity("effort (hours)", f"{option.effort['low']}", f"{option.effort['high']}",
                        at(option.cost["low"], expected), at(option.cost["high"], expected))]
    rate = given.loaded_rate
    lo, hi = given.loaded_rate_range or (rate * (1 - DEFAULT_RATE_SPREAD), rate * (1 + DEFAULT_RATE_SPREAD))
    if rate > 0:
        rows.append(Sensitivity("loaded rate (per hour)", f"{cents(lo)}", f"{cents(hi)}",
                                at(cost * lo / rate, expected), at(cost * hi / rate, expected)))
    scale = given.target_scale.get(option.id)
    if scale is not None:
        u_lo, u_hi = target_range(given)
        rows.append(Sensitivity("target utilisation", f"{u_lo}", f"{u_hi}",
                                at(cost, expected * scale[0]), at(cost, expected * scale[1])))
    return tuple(rows)


def target_range(given: PlanInput) -> tuple[Decimal, Decimal]:
    """The case's target-utilisation range, or the target ± 0.1 kept within (0, 1]."""
    if given.target_range is not None:
        return given.target_range
    u = given.target_utilisation
    return max(Decimal("0.01"), u - DEFAULT_TARGET_SPREAD), min(ONE, u + DEFAULT_TARGET_SPREAD)


def _slashed(bands: Mapping[str, Decimal]) -> str:
    """Three bands as ``low / expected / high`` to the cent."""
    return " / ".join(f"{bands[b]:.2f}" for b in BANDS)


def _money(bands: Bands | None, band: str) -> str:
    return "" if bands is None else f"{cents(bands[band])}"


def ranked(options: Iterable[Option]) -> list[Option]:
    """Ranked options by expected payback (then id), then the empty ones, then the unmeasured: only
    the first have a rank."""
    options = list(options)
    priced = sorted((o for o in options if o.status == "priced"), key=_key)
    empty = sorted((o for o in options if o.status == "no_saving"), key=lambda o: o.title)
    rest = sorted((o for o in options if o.status not in ("priced", "no_saving")), key=lambda o: (o.status, o.title))
    return [replace(o, rank=i) for i, o in enumerate(priced, 1)] + [replace(o, rank=None) for o in empty + rest]


def _key(option: Option) -> tuple[Decimal, str]:
    assert option.payback is not None and option.payback["expected"] is not None, option.id
    return option.payback["expected"], option.id


def fractions(options: Sequence[Option], part_monthly: Decimal, band: str) -> list[Decimal]:
    """fᵢ = gross savingᵢ / part, clamped to [0, 1], in the order given."""
    if part_monthly <= 0:
        return [ZERO for _ in options]
    return [min(ONE, max(ZERO, ((o.saving or {}).get(band, ZERO) + o.run_cost) / part_monthly)) for o in options]


def marginals(part_monthly: Decimal, fs: Sequence[Decimal], keys: Sequence[str]) -> tuple[dict[str, Decimal], Decimal]:
    """Each option's gross marginal saving to the cent and the combined saving part · (1 − Π(1 − fᵢ))
    they add up to exactly. The first option on the part takes its own gross saving's cents (its
    marginal is part · f₁, its gross saving: the two never read a cent apart); the others share
    what is left of the combined saving by largest remainder."""
    left, raw = ONE, {}
    for key, f in zip(keys, fs):
        raw[key] = part_monthly * f * left
        left *= ONE - f
    combined = cents(part_monthly * (ONE - left))
    if not raw:
        return {}, combined
    first, *rest = raw
    taken = cents(raw[first])
    out = {first: taken}
    if rest:
        out.update(largest_remainder({k: raw[k] for k in rest}, combined - taken))
    return out, combined


def marginal_note(marginal: Mapping[str, Decimal] | None, part: str | None) -> str | None:
    """A plain word where an option's marginal bands do not read low ≤ expected ≤ high (METHOD §7:
    each band is computed in its own case, where the options ranked above it take their own band's
    share of the part first); None where they do."""
    if not marginal:
        return None
    low, expected, high = (cents(marginal[b]) for b in ("low", "expected", "high"))
    if low <= expected <= high:
        return None
    which = [f"{a} {x} < {b} {y}" for a, x, b, y in (("high", high, "expected", expected),
                                                       ("expected", expected, "low", low)) if x < y]
    return (f"marginal saving {'; '.join(which)}: not an error. Each band is its own case: in the higher band "
            f"the options ranked above this one on {part or 'its part'} save more of the part first, so less "
            "is left for this one. Its own saving (monthly_saving) runs low ≤ expected ≤ high.")


def combine(options: Sequence[Option]) -> list[Option]:
    """Give each ranked option its marginal saving on its part, in rank order; run costs after."""
    by_part: dict[str, list[Option]] = {}
    for o in options:
        if o.rank is not None:
            by_part.setdefault(o.plan_part or plan_part(o.acts_on), []).append(o)
    margins: dict[str, dict[str, Decimal]] = {}
    for members in by_part.values():
        part = _part_amount(members)
        ids = [o.id for o in members]
        for band in BANDS:
            shares, _ = marginals(part, fractions(members, part, band), ids)
            for key, value in shares.items():
                margins.setdefault(key, {})[band] = value
    return [replace(o, marginal_saving={b: v - cents(o.run_cost) for b, v in margins[o.id].items()})
            if o.id in margins else o for o in options]


def _part_amount(members: Sequence[Option]) -> Decimal:
    """The part's amount a month: as ranking measured it, else the largest base an option was priced on."""
    known = [o.plan_part_monthly for o in members if o.plan_part_monthly is not None]
    return max(known) if known else max((o.part_monthly or ZERO for o in members), default=ZERO)


def combined(options: Sequence[Option]) -> tuple[list[PartPlan], PartPlan]:
    """The combined saving per part (parts in order of their first-ranked option) and for the plan."""
    parts: dict[str, list[Option]] = {}
    for o in sorted((o for o in options if o.rank is not None), key=lambda o: o.rank or 0):
        parts.setdefault(o.plan_part or plan_part(o.acts_on), []).append(o)
    rows = []
    for name, members in parts.items():
        amount = _part_amount(members)
        gross = {b: marginals(amount, fractions(members, amount, b), [o.id for o in members])[1] for b in BANDS}
        run = cents(sum((o.run_cost for o in members), ZERO))
        rows.append(PartPlan(name, amount, tuple(o.id for o in members), gross, run,
                             {b: gross[b] - run for b in BANDS}))
    return rows, _total(rows)


def _total(rows: Sequence[PartPlan]) -> PartPlan:
    def add(get: Callable[[PartPlan], Decimal]) -> Decimal:
        return sum((get(r) for r in rows), ZERO)
    gross = {b: sum((r.gross[b] for r in rows), ZERO) for b in BANDS}
    saving = {b: sum((r.saving[b] for r in rows), ZERO) for b in BANDS}
    return PartPlan("total", add(lambda r: r.part_monthly), tuple(i for r in rows for i in r.options),
                    gross, add(lambda r: r.run_cost), saving)


def plan(options: Sequence[Option], given: PlanInput) -> list[Option]:
    """Price, rank and combine: the options as the report lists them."""
    return combine(ranked(price(o, given) for o in options))


def owners_by_part(parts: Iterable[tuple[str, str | None, Decimal]], owner_of: Mapping[str, str | None],
                   tag_values: Mapping[str, Mapping[str, Decimal]]) -> dict[str, tuple[str, ...]]:
    """Who can act on each part (METHOD §7): the ``owner`` of each service with money in it (largest
    first), then the values of the case's ``owner_tag`` on the part's lines (largest amount first).

    ``parts``: (bucket.part, service or None, amount); ``tag_values``: part -> tag value -> amount.
    """
    money: dict[str, dict[str, Decimal]] = {}
    for part, service, amount in parts:
        owner = owner_of.get(service or "")
        if owner and amount > 0:
            money.setdefault(part, {}).setdefault(owner, ZERO)
            money[part][owner] += amount
    out = {}
    for part in set(money) | set(tag_values):
        named = sorted(money.get(part, {}).items(), key=lambda kv: (-kv[1], kv[0]))
        tagged = sorted(tag_values.get(part, {}).items(), key=lambda kv: (-kv[1], kv[0]))
        out[part] = tuple(dict.fromkeys(name for name, _ in named + tagged))
    return out
