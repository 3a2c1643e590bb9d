"""The bridge between the four cost bases (METHOD §1), from the in-scope lines, in exact Decimal.

list total → negotiated discounts → contracted total → commitment-covered usage and commitment
purchases and fees → billed total → amortisation of commitments → unused commitments → effective
total. Every step is the sum, over one named group of lines, of the difference between two of the
line's cost columns, so the steps between two totals add up to their difference by construction
and no plug is needed. The groups:

* ``purchases``: commitment purchases and fees (a Purchase naming a CommitmentDiscountId). They are
  no part of the list and contracted totals (:func:`audit.lines.basis_amount`): those bases price the
  covered usage itself, before commitments;
* ``covered``: usage a commitment covered (CommitmentDiscountStatus ``Used``);
* ``unused``: the unused part of a commitment (status ``Unused``). One billed at its own price (the
  GCP billing export's fee rest, connectors/billing/gcp_commitments.py) is read as FOCUS writes it,
  a purchase of that price and an unused commitment billed 0 (:func:`split_billed_unused`), so that
  the bridge equals that of a FOCUS export of the same fees;
* ``negotiated``: negotiated discounts billed as lines of their own (a CUR's ``EdpDiscount``,
  ``PrivateRateDiscount``, ``BundledDiscount``): a credit, refund or adjustment that lists at 0 and is
  contracted at its cost (:func:`negotiated_discounts`). They lie between the list and the contracted
  total (METHOD §1), so they are a part of the negotiated discounts step, not of the credits;
* ``adjustments``: tax, credits, refunds and adjustments (the negotiated discounts aside);
* ``other``: every other line (on-demand usage, other purchases).

A difference a group other than the named commitment groups carries (``other`` and ``adjustments``
lines whose BilledCost differs from their ContractedCost or EffectiveCost) is a step of its own,
with the lines that carry it. A step that needs a column the lines lack (ListCost, ContractedCost
missing on some in-scope line) is not measured: None, with the reason. So is the amortisation of
commitments where a purchase leaves the effective basis (EffectiveCost 0, its price billed) and no
in-scope line of its commitment carries any amortisation (:func:`unamortised_reason`), unless other
commitments' lines carry theirs: then it is measured and its ``lacks`` names that purchase: an export of
the billed view (Azure ActualCost) shows the purchase but not its amortisation, which would
otherwise leave the effective total without a word. Its mirror, for an audit on the billed basis:
commitment-covered or unused lines billed 0 against their amortisation whose commitment has no
priced purchase in scope (:func:`unpurchased`). Their billed total lacks the purchase: an export of
the amortised view (Azure AmortizedCost, Microsoft's FOCUS export) shows a commitment's amortisation
but not its purchase, and a purchase paid upfront was billed in the month it was bought. So is
covered usage costing 0 on both bases whose commitment no in-scope line prices or amortises: an
export of the billed view (Azure ActualCost) without the purchase (bought upfront in an earlier
month, or in another subscription), where that usage's amortised cost is in no line; it is named at
its contracted price, the nearest figure the lines hold. The bridge measures what the lines say
(``commitment_purchases`` 0); the billed audit says what that leaves out. Likewise usage without a
list price (ListCost 0 and no ListUnitPrice, as AWS writes Spot usage) at a ContractedCost: the list
total counts it 0 and the negotiated discounts step holds its ContractedCost, no discount; both stay
sums of lines and their ``lacks`` says so, with the lines and the step on the others (:func:`_unlisted`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Mapping

import pandas as pd

from audit.billing_words import NO_CONTRACTED
from audit.block_ties import block_lines
from audit.fit_quantities import unlisted_usage
from audit.lines import CREDIT_CATEGORIES, commitment_purchases
from audit.misfit import text
from audit.money import ZERO, cents, dsum, largest_remainder
from schemas.billing import line_total

ADJUSTMENTS = ("Tax", "Credit", "Refund", "Adjustment")
COLUMNS = {"L": "list_cost", "C": "contracted_cost", "B": "billed_cost", "E": "effective_cost"}
NAMES = {"L": "ListCost", "C": "ContractedCost", "B": "BilledCost", "E": "EffectiveCost"}
#: the columns the bridge reads (a narrow copy of the lines, split by :func:`split_billed_unused`);
#: ``extra`` and ``resource_id`` tie a Capacity Block's fee to its usage (audit/block_ties.py)
READ = ("charge_category", "commitment_discount_id", "commitment_discount_status", *COLUMNS.values(), "line_id",
        "line_count", "source", "extra", "resource_id", "list_unit_price")
EXAMPLES = 3  # line ids named for a step carried by lines outside the commitment groups

#: (key, label, groups, to-column, from-column); a total sums its column over its groups
TOTAL, STEP = "total", "step"
PLAN = (
    (TOTAL, "list", "List (public on-demand)", ("covered", "unused", "negotiated", "adjustments", "other"), "L", None),
    (STEP, "negotiated_discounts", "Negotiated discounts", ("covered", "unused", "negotiated", "other"), "C", "L"),
    (STEP, "adjustments_list_to_contracted", "Tax, credits and adjustments: contracted vs list",
     ("adjustments",), "C", "L"),
    (TOTAL, "contracted", "Contracted (negotiated rates)", ("covered", "unused", "negotiated", "adjustments", "other"),
     "C", None),
    (STEP, "covered_usage", "Commitment-covered usage (0 on the invoice)", ("covered",), "B", "C"),
    (STEP, "commitment_purchases", "Commitment purchases and fees", ("purchases",), "B", None),
    (STEP, "unused_commitment_billed", "Unused commitment: billed vs contracted", ("unused",), "B", "C"),
    (STEP, "other_contracted_to_billed", "Other lines: billed vs contracted", ("negotiated", "adjustments", "other"),
     "B", "C"),
    (TOTAL, "billed", "Billed (invoiced)", ("purchases", "covered", "unused", "negotiated", "adjustments", "other"), "B",
     None),
    (STEP, "amortised_commitment", "Amortised commitment on covered usage", ("covered",), "E", "B"),
    (STEP, "unused_commitment", "Unused commitment", ("unused",), "E", "B"),
    (STEP, "purchases_amortised", "Purchases and fees, replaced by their amortisation", ("purchases",), "E", "B"),
    (STEP, "other_billed_to_effective", "Other lines: effective vs billed", ("negotiated", "adjustments", "other"),
     "E", "B"),
    (TOTAL, "effective", "Effective (commitments amortised)", ("purchases", "covered", "unused", "negotiated",
                                                                "adjustments", "other"), "E", None),
)
#: steps carried by lines outside the commitment groups: their lines are named
NAMED_LINES = ("adjustments_list_to_contracted", "other_contracted_to_billed", "other_billed_to_effective")


@dataclass(frozen=True)
class Step:
    """One row of the bridge: a total or a step, exact (None when not measured)."""

    key: str
    label: str
    kind: str
    amount: Decimal | None
    lines: int = 0  # invoice lines whose difference is not zero (steps only)
    examples: tuple[str, ...] = ()  # their first line ids, for the steps in NAMED_LINES
    reason: str | None = None  # why it is not measured
    lacks: str | None = None  # what a measured step leaves out, and why


@dataclass(frozen=True)
class Bridge:
    """The bridge, in order; ``rounded`` gives each measured row at the cent, footing."""

    steps: tuple[Step, ...]

    def rounded(self, fixed: Mapping[Decimal, Decimal] | None = None) -> dict[str, Decimal | None]:
        """Every row at the cent: totals rounded each, a total whose exact amount ``fixed`` holds as
        that figure rounds it (the audit's total in scope, rounded with the total outside it: on
        every basis of the same exact amount); the steps between two measured totals rounded by
        largest remainder so that they add up to the rounded difference (each stays within a cent of
        its exact sum); a step beside an unmeasured total rounded on its own."""
        fixed = fixed or {}
        out: dict[str, Decimal | None] = {}
        segment: list[Step] = []
        start: Decimal | None = None
        for step in self.steps:
            if step.kind == STEP:
                segment.append(step)
                continue
            end = None if step.amount is None else fixed.get(step.amount, cents(step.amount))
            out.update(_segment(segment, start, end))
            out[step.key] = start = end
            segment = []
        return out


def bridge(lines: pd.DataFrame, sources: Mapping[str, tuple[str, str]] | None = None) -> Bridge:
    """The bridge of ``lines`` (the in-scope lines); ``sources``: billing source name → (its path
    relative to the case folder, its format), which a step not measured names (METHOD §9: the same
    case gives the same bytes wherever its folder lies)."""
    read = split_billed_unused(lines[[c for c in READ if c in lines.columns]])
    groups = _groups(read)
    missing = {c: _missing(read, groups, COLUMNS[c], sources or {}) for c in ("L", "C")}
    steps = tuple(_row(read, groups, missing, *plan) for plan in PLAN)
    unamortised = unamortised_reason(lines)
    if unamortised:
        steps = tuple(_unamortised(s, unamortised) if s.key == "amortised_commitment" else s for s in steps)
    return Bridge(_unlisted(steps, read, groups))


#: the rows a usage line without a list price moves: the list total counts it 0, the step to contracted holds it
UNLISTED_ROWS = ("list", "negotiated_discounts")


def _unlisted(steps: tuple[Step, ...], read: pd.DataFrame, groups: dict[str, pd.Series]) -> tuple[Step, ...]:
    """``steps`` with the list total and the negotiated discounts step saying what they hold where some
    usage line the list total counts has no list price (ListCost 0, no ListUnitPrice: AWS Spot usage)
    at a ContractedCost: the list total counts it 0 and the step adds its ContractedCost, no discount.
    The rows stay sums of lines (METHOD §1); ``lacks`` names the lines and the money on each side."""
    found = read[unlisted_usage(read) & ~groups["purchases"].to_numpy(dtype=bool)]
    by_key = {s.key: s for s in steps}
    if found.empty or any(by_key[k].amount is None for k in UNLISTED_ROWS):
        return steps
    held = dsum(found["contracted_cost"])
    ids = ", ".join([*map(str, found["line_id"].head(EXAMPLES))] + ["…"] * (line_total(found) > EXAMPLES))
    said = (f"{line_total(found):,} usage line(s) carry no list price (ListCost 0 and no ListUnitPrice, as AWS writes "
            f"Spot usage; ContractedCost {cents(held):,}; lines {ids}): the list total counts them 0, so it is "
            f"understated by {cents(held):,}, and negotiated_discounts includes that {cents(held):+,} (on the other "
            f"lines: {cents(by_key['negotiated_discounts'].amount - held):,})")  # type: ignore[operator]
    return tuple(replace(s, lacks=said) if s.key in UNLISTED_ROWS else s for s in steps)


def _unamortised(step: Step, reason: str) -> Step:
    """The amortisation step where some purchase's amortisation is in no line (``reason``): still
    measured where other commitments' covered lines carry theirs (it sums what those lines say, and
    ``lacks`` names the purchases it leaves out), else not measured (None, with the reason)."""
    if step.lines:
        return replace(step, lacks=reason)
    return replace(step, amount=None, lines=0, reason=reason)


def billed_unused(lines: pd.DataFrame) -> pd.Series:
    """Whether each line is an unused commitment billed at its own price (status ``Unused``, not a
    purchase, BilledCost other than 0): a fee's unused rest invoiced as a line of its own, as the GCP
    billing export's commitment fees are read (connectors/billing/gcp_commitments.py: per pool a
    Purchase of the part used and an Unused row of the rest, on both bases)."""
    status = lines["commitment_discount_status"].fillna("").str.lower()
    billed = pd.Series([b is not None and b != 0 for b in lines["billed_cost"]], index=lines.index,
                       dtype=bool)
    return (status == "unused") & ~commitment_purchases(lines) & billed


def split_billed_unused(lines: pd.DataFrame) -> pd.DataFrame:
    """``lines`` with each :func:`billed_unused` line read as the two lines FOCUS writes for it: the
    purchase of that rest (a Purchase, BilledCost its price, EffectiveCost 0) and the unused
    commitment (BilledCost 0, EffectiveCost its amount). The bridge then counts its price among the
    commitment purchases and its amount as unused commitment, as it does a FOCUS export of the same
    fees, and every total is the same (the two lines add up to the one)."""
    split = billed_unused(lines).to_numpy(dtype=bool)
    if not split.any():
        return lines
    fees = lines[split].assign(charge_category="Purchase", effective_cost=ZERO)
    rest = lines[split].assign(billed_cost=ZERO)
    return pd.concat([lines[~split], fees, rest], ignore_index=True)


def _carries(lines: pd.DataFrame) -> bool:
    """Whether some line of a commitment (its id, or one under it) carries amortisation (Effective ≠ Billed)."""
    return any(e is not None and b is not None and e != b for e, b in zip(lines["effective_cost"], lines["billed_cost"]))


def unamortised_reason(lines: pd.DataFrame) -> str | None:
    """Why the amortisation of commitments is not measured (None: it is, or there is none to measure).

    A commitment purchase whose EffectiveCost is 0 while its BilledCost is not leaves the effective
    basis, FOCUS assuming its amortisation sits on the usage it covers and on its unused share. Where
    no in-scope line under that commitment (its CommitmentDiscountId or one under it) carries any
    (EffectiveCost − BilledCost 0 on every one, or no such line), the export is of the billed view:
    the purchase's price is in the billed total and in no line of the effective one.
    """
    purchases = commitment_purchases(lines)
    read = lines.loc[purchases, [c for c in ("commitment_discount_id", "billed_cost", "effective_cost", "line_id",
                                             "line_count") if c in lines.columns]]
    leaving = read[[b is not None and b != 0 and e == 0 for b, e in zip(read["billed_cost"], read["effective_cost"])]]
    if leaving.empty:
        return None
    others = lines.loc[~purchases, ["commitment_discount_id", "billed_cost", "effective_cost"]]
    ids = others["commitment_discount_id"].fillna("")
    carried = {c: _carries(others.loc[((ids == c) | ids.str.startswith(c.rstrip("/") + "/")).to_numpy(dtype=bool)])
               for c in set(leaving["commitment_discount_id"])}
    alone = leaving[[not carried[c] for c in leaving["commitment_discount_id"]]]
    if alone.empty:
        return None
    ids = list(alone["line_id"].head(EXAMPLES))
    ids += ["…"] * (line_total(alone) > len(ids))
    return (f"{line_total(alone)} commitment purchase line(s) ({', '.join(ids)}), billed "
            f"{cents(dsum(alone['billed_cost']))}, leave the effective basis (EffectiveCost 0) and no in-scope "
            "line carries their amortisation, so the effective total lacks these commitments: an export of the "
            "billed view (Azure's ActualCost export, in which covered usage costs 0) shows a purchase but not its "
            "amortisation. Read the amortised view as well (Azure: the AmortizedCost export), or audit on the "
            "billed basis")


@dataclass(frozen=True)
class Unpurchased:
    """Commitment-covered and unused lines billed 0 whose commitment has no priced purchase in scope:
    their amortisation (EffectiveCost − BilledCost) where a line shows it, the pre-commitment price
    (ContractedCost) of the covered lines that show none (0 on both bases), and the commitments."""

    covered: Decimal  # amortisation of commitment-covered usage
    unused: Decimal  # amortisation of unused commitment
    commitments: tuple[str, ...]
    lines: int  # the lines that show their amortisation
    unshown: Decimal = ZERO  # ContractedCost of the covered lines that show none
    unshown_lines: int = 0
    basis: str = "billed"  # the basis whose total lacks them

    def lacks(self) -> str:
        """What the basis's total lacks, with the amounts and the commitments, as a clause."""
        ids = ", ".join(text(c, 200) for c in self.commitments[:EXAMPLES])
        ids += ", …" if len(self.commitments) > EXAMPLES else ""
        behind = []
        if self.lines:
            behind.append(f"{cents(self.covered)} of commitment-covered usage and {cents(self.unused)} of unused "
                          "commitment")
        if self.unshown_lines:
            behind.append(f"commitment-covered usage of {cents(self.unshown)} at its contracted price, whose "
                          "amortised cost no line shows")
        return f"the {self.basis} total lacks the purchases behind {' and '.join(behind)} (commitment(s) {ids})"


def unpurchased(lines: pd.DataFrame, basis: str = "billed") -> Unpurchased | None:
    """The commitment-covered and unused lines (status Used / Unused) billed through a purchase whose
    commitment (their CommitmentDiscountId or one it lies under) has no in-scope purchase with a
    BilledCost; None when there is none. Such a purchase is nowhere on the billed basis. On the
    effective basis (``basis``) only covered lines costing 0 on both bases lack it (the others carry
    their amortisation there): None where there is none.

    A line is billed through a purchase when its BilledCost differs from its EffectiveCost (an
    amortised view: its amortisation on the effective basis), or when it is covered usage costing 0
    on both bases (Azure's ActualCost export, whose covered usage costs 0 and whose purchase alone
    carries the price: without the purchase, its amortised cost is in no line)."""
    purchases = commitment_purchases(lines).to_numpy(dtype=bool)
    status = lines["commitment_discount_status"].fillna("").str.lower()
    where = status.isin(("used", "unused")).to_numpy(dtype=bool) & ~purchases
    used = (status == "used").to_numpy(dtype=bool)[where].tolist()
    billed, effective = _values(lines, "billed_cost", where), _values(lines, "effective_cost", where)
    amortised = [None if b is None or e is None else e - b for b, e in zip(billed, effective)]
    unshown = [u and b == 0 and e == 0 for u, b, e in zip(used, billed, effective)]
    ids = lines["commitment_discount_id"].fillna("").to_numpy(dtype=object)[where].tolist()
    bought = _bought(lines, purchases)
    apart = {c: not related(c, bought) for c in set(ids)}
    blind = {c for c, u in zip(ids, unshown) if u and apart[c]}
    costed = _costed(lines) if blind else set()
    seen = {c: _in_view(c, costed) for c in blind}
    keep = [((a is not None and a != 0) or u) and apart[c] and not (u and seen[c])
            for a, u, c in zip(amortised, unshown, ids)]
    if not any(keep):
        return None
    counts = _values(lines, "line_count", where) if "line_count" in lines.columns else [1] * len(ids)
    prices = _values(lines, "contracted_cost", where) if "contracted_cost" in lines.columns else [None] * len(ids)
    rows = [(c, u, a, s, p, n) for c, u, a, s, p, n, k in zip(ids, used, amortised, unshown, prices, counts, keep) if k]
    unseen = [r for r in rows if r[3]]
    priced_at = dsum(r[4] for r in unseen if r[4] is not None)
    unseen_lines = sum(int(r[5]) for r in unseen)
    if basis == "effective":
        return Unpurchased(ZERO, ZERO, tuple(sorted({r[0] for r in unseen})), 0, priced_at, unseen_lines,
                           basis) if unseen else None
    shown = [r for r in rows if not r[3]]
    return Unpurchased(dsum(r[2] for r in shown if r[1]), dsum(r[2] for r in shown if not r[1]),
                       tuple(sorted({r[0] for r in rows})), sum(int(r[5]) for r in shown), priced_at, unseen_lines)


def _values(lines: pd.DataFrame, column: str, where) -> list:
    """The values of ``column`` on the rows ``where`` selects, as a list (no per-row pandas access)."""
    return lines[column].to_numpy(dtype=object)[where].tolist()


def _bought(lines: pd.DataFrame, purchases) -> set[str]:
    """The commitments (without a trailing ``/``) some in-scope purchase line with a BilledCost buys."""
    return {c.rstrip("/") for c, b in zip(_values(lines, "commitment_discount_id", purchases),
                                          _values(lines, "billed_cost", purchases)) if b}


def related(commitment: str, others: set[str]) -> bool:
    """Whether ``commitment`` is one of ``others`` or lies under one (``…/reservationOrders/O`` holds
    ``…/reservationOrders/O/reservations/R``)."""
    return any(commitment == o or commitment.startswith(o + "/") for o in others)


def _in_view(commitment: str, costed: set[str]) -> bool:
    """Whether ``commitment``, one it lies under or one under it is among the ``costed`` ones."""
    own = commitment.rstrip("/")
    return related(own, costed) or any(o.startswith(own + "/") for o in costed)


def _costed(lines: pd.DataFrame) -> set[str]:
    """The commitments some line of which carries a cost on either basis: where one does, a covered
    line of that commitment costing 0 on both still has its commitment's cost in view."""
    read = lines[["commitment_discount_id", "billed_cost", "effective_cost"]]
    return {c.rstrip("/") for c, billed, effective in zip(read["commitment_discount_id"].fillna("").tolist(),
                                                         read["billed_cost"].tolist(), read["effective_cost"].tolist())
            if c.strip("/") and (billed or effective)}


#: why lines that show their amortisation lack their purchase, and where to read it
AMORTISED_VIEW = ("{n} commitment-covered or unused line(s) are billed 0 (invoiced through their commitment's "
                  "purchase) and no in-scope purchase line of their commitment carries a price, so on the billed "
                  "basis that usage costs 0. An export of the amortised view (Azure's AmortizedCost export, "
                  "Microsoft's FOCUS export) shows a commitment's amortisation but not its purchase, and a purchase "
                  "paid upfront was billed in the month it was bought. Read the billed view with its purchases "
                  "(Azure: the ActualCost export, whose purchase lines carry the price), or audit on the effective "
                  "basis")
#: why covered lines costing 0 on both bases lack their purchase, and where to read it
BILLED_VIEW = ("{n} commitment-covered line(s) cost 0 on both the billed and the effective basis and no in-scope "
               "line of their commitment carries a price or an amortisation (no purchase, no unused commitment), so "
               "that usage costs 0 and what it cost is in no line. An export of the billed view (Azure's ActualCost "
               "export) bills covered usage 0 and its commitment through the purchase, and a purchase paid upfront "
               "in an earlier month or bought in another subscription is not in it. Read the purchase with this "
               "export (the month's or the subscription's export that holds it), or the amortised view (Azure: the "
               "AmortizedCost export) on the effective basis")


def unpurchased_reason(lines: pd.DataFrame, basis: str = "billed") -> str | None:
    """What the basis (billed or effective) lacks and why, and where to find it (:func:`unpurchased`;
    None: nothing)."""
    found = unpurchased(lines, basis)
    if found is None:
        return None
    why = [AMORTISED_VIEW.format(n=found.lines)] if found.lines else []
    why += [BILLED_VIEW.format(n=found.unshown_lines)] if found.unshown_lines else []
    return f"{found.lacks()}: {'. '.join(why)}"


def negotiated_discounts(lines: pd.DataFrame) -> pd.Series:
    """Whether each line is a negotiated discount billed as a line of its own: a credit, refund or
    adjustment with ListCost 0 and a ContractedCost other than 0. FOCUS lists and contracts a credit at
    its BilledCost (ListCost, ContractedCost where the unit price is null), so a credit that takes
    nothing off the list price but its cost off the contracted one is the gap between list and
    contracted prices: a CUR's ``*Discount`` line (EdpDiscount, PrivateRateDiscount, BundledDiscount),
    read so (connectors/billing/cur_sql.py)."""
    credits = lines["charge_category"].isin(CREDIT_CATEGORIES)
    listed, contracted = lines["list_cost"], lines["contracted_cost"]
    known = listed.notna() & contracted.notna()
    return credits & known & pd.Series([bool(k) and lc == 0 and c != 0 for k, lc, c in zip(known, listed, contracted)],
                                       index=lines.index, dtype=bool)


def _groups(lines: pd.DataFrame) -> dict[str, pd.Series]:
    """The bridge's groups of lines; an EC2 Capacity Block's fee is a purchase (of reserved capacity)
    and the usage run in it covered usage (audit/capacity_blocks.py)."""
    fee, ran = block_lines(lines)
    purchases = commitment_purchases(lines) | fee
    status = lines["commitment_discount_status"].fillna("").str.lower()
    covered = ((status == "used") | ran) & ~purchases
    unused = (status == "unused") & ~purchases
    adjusting = lines["charge_category"].isin(ADJUSTMENTS) & ~purchases & ~covered & ~unused
    negotiated = adjusting & negotiated_discounts(lines)
    adjustments = adjusting & ~negotiated
    other = ~(purchases | covered | unused | adjusting)
    return {"purchases": purchases, "covered": covered, "unused": unused, "negotiated": negotiated,
            "adjustments": adjustments, "other": other}


def _missing(lines: pd.DataFrame, groups: dict[str, pd.Series], column: str,
             sources: Mapping[str, tuple[str, str]]) -> str | None:
    """Why ``column`` cannot be summed over the lines the list / contracted totals count (None: it
    can): per billing source, how many lines lack it, of which file (case-relative); a format that
    has no such price at all says so in its own words (:data:`audit.billing_words.NO_CONTRACTED`)."""
    counted = ~groups["purchases"]
    absent = lines[counted & lines[column].isna()]
    if absent.empty:
        return None
    name = NAMES[next(k for k, v in COLUMNS.items() if v == column)]
    if "source" not in absent.columns:
        return f"{name} is missing on {line_total(absent)} in-scope line(s)"
    parts = []
    for source, group in absent.groupby(absent["source"].astype(str), sort=True):
        path, fmt = sources.get(source, (source, ""))
        text = f"{name} is missing on {line_total(group)} in-scope line(s) of {path}"
        lacks = NO_CONTRACTED.get(fmt) if column == "contracted_cost" else None
        parts.append(f"{lacks} ({text})" if lacks else text)
    return "; ".join(parts)


def _row(lines, groups, missing, kind, key, label, names, to, frm) -> Step:
    reasons = [missing[c] for c in (to, frm) if c in missing and missing[c]]
    if reasons:
        return Step(key, label, kind, None, reason=" and ".join(reasons))
    mask = groups[names[0]].copy()
    for name in names[1:]:
        mask |= groups[name]
    read = [c for c in dict.fromkeys([COLUMNS[to], *([COLUMNS[frm]] if frm is not None else []), "line_id",
                                      "line_count"]) if c in lines.columns]
    chosen = lines.loc[mask, read]  # a row take copies each column taken: only those read
    values = list(chosen[COLUMNS[to]])
    if frm is not None:
        values = [a - b for a, b in zip(values, chosen[COLUMNS[frm]])]
    total = ZERO
    for v in values:
        total += v
    if kind == TOTAL:
        return Step(key, label, kind, total)
    moved = chosen[pd.Series([v != 0 for v in values], index=chosen.index, dtype=bool)]
    examples = tuple(moved["line_id"].head(EXAMPLES)) if key in NAMED_LINES else ()
    return Step(key, label, kind, total, line_total(moved), examples)


def _segment(segment: list[Step], start: Decimal | None, end: Decimal | None) -> dict[str, Decimal | None]:
    """The steps between two totals at the cent, ``start`` and ``end`` (None: not measured), footing
    to their difference where both totals and every step are measured."""
    amounts = {s.key: s.amount for s in segment if s.amount is not None}
    if segment and start is not None and end is not None and len(amounts) == len(segment):
        return dict(largest_remainder(amounts, end - start))
    return {s.key: None if s.amount is None else cents(s.amount) for s in segment}
