"""Scope, cost basis, and the spreading of commitments, credits and tax (METHOD §1–§2).

Tax follows the charges it taxes, credits are netted into the charges they apply to, and a
commitment purchase is handled as its basis says (METHOD §1):

* ``billed``: the purchase or fee is what was invoiced; it is spread over the lines that used (or
  left unused) that commitment, whose own BilledCost is 0 where the commitment covered them;
* ``effective``: the purchase carries EffectiveCost 0 (its amortisation already sits in the covered
  and unused lines), so spreading it moves nothing;
* ``list`` and ``contracted``: the purchase is no part of the basis (:func:`audit.lines.basis_amount`
  counts it 0): these bases price the covered usage itself, at the public on-demand or the
  negotiated rate, before any commitment. The purchase lines leave the charges.

Nothing is rounded here.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any, Mapping

import numpy as np
import pandas as pd

from audit.capacity_blocks import Block, block_spreads, has_block_fee, idle_reason
from audit.ledger import Leftover
from audit.lines import (
    ADJUSTING_CATEGORIES,
    CLASSIFICATION_ONLY,
    CREDIT_CATEGORIES,
    PRE_COMMITMENT,
    accounts_in,
    adjustments_in_tag_scope,
    basis_amount,
    commitment_purchases,
    lines_where,
    names_no_service,
    prepaid,
    purchase_spreads,
    tags_of,
)
from audit.money import ZERO, dsum, split_evenly
from schemas.billing import line_total


def in_scope(lines: pd.DataFrame, scope: Mapping[str, Any]) -> tuple[pd.Series, list[str]]:
    """Boolean mask of in-scope lines and the reasons lines fell outside.

    Tax, credit, refund and adjustment lines follow the charges they apply to (METHOD §2): under
    ``services``, one that names a service is in scope with that service; under ``tags``, one that
    names a resource with charges is in scope where some in-scope charge bills that resource, else one
    that carries tags of its own is in scope by them. One that names neither (an account's tax, a
    credit on the whole account) cannot be told apart and is kept by its account, as ``accounts``
    keeps every line.

    Each reason names what its rule left out of the lines the rules before it kept (the accounts,
    services or tag values), beside what the scope names (rule 5: a misfit names the nearest thing
    the data holds); a rule that left nothing out gives no reason.
    """
    mask = pd.Series(True, index=lines.index)
    reasons = []
    accounts = set(scope.get("accounts") or [])
    if accounts:
        kept = accounts_in(lines["sub_account_id"], accounts) | accounts_in(lines["billing_account_id"], accounts)
        reasons += _left_out_accounts(lines[mask & ~kept], accounts)
        mask &= kept
    adjustments = lines["charge_category"].isin(ADJUSTING_CATEGORIES)
    services = set(scope.get("services") or [])
    if services:
        kept = lines["service_name"].isin(services) | names_no_service(lines)
        left = sorted({str(s or "") or "(no service)" for s in lines.loc[mask & ~kept, "service_name"]})
        if left:
            reasons.append(f"{_named('service', left)} not in [scope].services ({', '.join(sorted(services))})")
        mask &= kept
    wanted = dict(scope.get("tags") or {})
    if wanted:
        # Tags, with a FOCUS 1.3 split row's AllocatedTags over them (audit.lines.line_tags)
        tagged = tags_of(lines)
        carries = pd.Series(True, index=lines.index)
        for key, value in wanted.items():
            carries &= tagged.map(lambda t, key=key, value=value: str(t.get(key, "")) == value)
        kept = (carries & ~adjustments) | adjustments_in_tag_scope(lines, carries, tagged)
        reasons += _left_out_tags(tagged[mask & ~kept], wanted, lines[mask & ~kept])
        mask &= kept
    return mask, reasons


def _named(kind: str, names: list[str]) -> str:
    """``service a`` / ``services a, b``."""
    return f"{kind}{'s' if len(names) > 1 else ''} {', '.join(names)}"


def _left_out_accounts(left: pd.DataFrame, accounts: set) -> list[str]:
    """The accounts of the lines ``[scope].accounts`` left out: each line's SubAccountId, else its
    BillingAccountId (as ``outside_scope.by_account`` names them)."""
    subs = sorted({str(s) for s in left["sub_account_id"] if s})
    billing = sorted({str(b) for s, b in zip(left["sub_account_id"], left["billing_account_id"]) if not s and b})
    named = [_named(kind, ids) for kind, ids in (("sub account", subs), ("billing account", billing)) if ids]
    if not named and len(left):
        named = [f"{line_total(left)} line(s) naming no account"]
    return [f"{' and '.join(named)} not in [scope].accounts ({', '.join(sorted(accounts))})"] if named else []


def _left_out_tags(tagged: pd.Series, wanted: Mapping[str, str], left: pd.DataFrame) -> list[str]:
    """The tag values of the lines ``[scope].tags`` left out (``left``, its tags ``tagged``; ``no KEY
    tag`` where a line lacks one); tax and credits that carry the wanted tags but apply to charges
    outside the scope are counted, as invoice lines."""
    found = []
    for key, value in wanted.items():
        values = {str(t.get(key, "")) for t in tagged} - {value}
        found += sorted(f"{key}={v}" if v else f"no {key} tag" for v in values)
    scope_text = ", ".join(f"{k}={v}" for k, v in wanted.items())
    reasons = [f"{', '.join(found)} not in [scope].tags ({scope_text})"] if found else []
    following = line_total(left[tagged.map(lambda t: all(str(t.get(k, "")) == v for k, v in wanted.items()))])
    if following:
        reasons.append(f"{following} tax / credit line(s) tagged {scope_text} that apply to charges outside "
                       f"[scope].tags")
    return reasons


def charges_in_scope(lines: pd.DataFrame, mask: pd.Series) -> int:
    """How many in-scope lines are charges (not tax, credits, refunds or adjustments, which follow
    the charges they apply to, or their account: :func:`in_scope`)."""
    return int((mask & ~lines["charge_category"].isin(ADJUSTING_CATEGORIES)).sum())


#: the columns the spreading reads: it works on these, and the whole lines are taken once, at the end
#: (every row take of the full table copies each of its text columns)
WORK_COLUMNS = ["commitment_discount_id", "effective_cost", "list_cost", "pricing_quantity", "resource_id",
                "sub_account_id", "billing_account_id", "charge_category", "service_name", "sku_id", "start", "end"]


def spread(lines: pd.DataFrame, basis: str) -> tuple[pd.DataFrame, list[Leftover]]:
    """Charges with gross, commitment, credit, tax and net columns; adjustments folded in."""
    amount = basis_amount(lines, basis)
    is_tax = lines["charge_category"] == "Tax"
    is_credit = lines["charge_category"].isin(CREDIT_CATEGORIES)
    is_purchase = commitment_purchases(lines)
    is_charge = ~(is_tax | is_credit)
    work = lines.loc[is_charge, WORK_COLUMNS]
    work["gross"] = amount[work.index]
    work["commitment"] = [ZERO] * len(work)
    leftovers: list[Leftover] = []
    blocks: list[Block] = []
    if basis in PRE_COMMITMENT:  # priced before commitments: the purchases (a Capacity Block's fee too) count 0
        spent = list(lines.index[prepaid(lines)])
    else:
        spent = _spread_purchases(work, purchase_spreads(work, lines[is_purchase]), amount)
        # an EC2 Capacity Block's fee: AWS bills its instance-hours 0 and the block up front (only a
        # bill with a fee takes the charges' rows, every column, for it)
        rest = is_charge & ~lines.index.isin(spent)
        blocks = block_spreads(lines[rest]) if has_block_fee(lines, rest) else []
        spent += _spread_blocks(work, blocks, amount)
    if spent:
        is_charge &= ~lines.index.isin(spent)
        work = work[~work.index.isin(spent)]
    targets = _Targets(work)
    credits = _spread_adjustments(work, lines[is_credit], amount, targets, targets.of_credit, leftovers)
    tax = _spread_adjustments(work, lines[is_tax], amount, targets, targets.of_tax, leftovers)
    charges = lines_where(lines.drop(columns=[c for c in CLASSIFICATION_ONLY if c in lines.columns]), is_charge)
    charges["gross"] = work["gross"].to_numpy()
    charges["commitment"] = work["commitment"].to_numpy()
    charges["credits"] = credits
    charges["tax"] = tax
    charges["net"] = [g + c + k + t for g, c, k, t in zip(charges["gross"], charges["commitment"], credits, tax)]
    return _idle_blocks(charges, blocks), leftovers


def _spread_purchases(charges, spreads, amount) -> list:
    """A commitment purchase moves onto the lines that used (or left unused) that commitment, a
    Capacity Block's fee onto the lines that ran in it (``spreads``: :func:`audit.lines.purchase_spreads`,
    :func:`audit.capacity_blocks.block_spreads`, which say which, and their weights). Returns the
    purchase lines whose amount moved; they leave the charges (their money is in the ``commitment``
    column of the lines they paid for)."""
    added: dict = {}
    spent = []
    for own, targets, weights in spreads:
        spent += own
        for t, share in zip(targets, split_evenly(dsum(amount[i] for i in own), weights)):
            added[t] = added.get(t, ZERO) + share
    if added:
        charges["commitment"] = [c + added.get(t, ZERO) for t, c in zip(charges.index, charges["commitment"])]
    return spent


def _spread_blocks(work: pd.DataFrame, blocks: list[Block], amount: pd.Series) -> list:
    """An EC2 Capacity Block's fee moves onto the lines that ran in it in the share of its
    instance-hours they ran (:func:`_spread_purchases`); the share no instance ran stays on the fee
    line, its ``gross`` (:func:`_idle_blocks` classes it). Returns the fee lines that moved whole."""
    moving = amount.copy()
    for block in blocks:
        if block.idle():
            for i in block.own:
                moving[i], work.at[i, "gross"] = split_evenly(amount[i], [block.ran, block.idle()])
    spent = _spread_purchases(work, [(b.own, b.targets, b.weights) for b in blocks], moving)
    kept = {i for b in blocks if b.idle() for i in b.own}
    return [i for i in spent if i not in kept]


def _idle_blocks(charges: pd.DataFrame, blocks: list[Block]) -> pd.DataFrame:
    """The charges with each fee line that keeps its block's idle share classed ``commitment_unused``
    (paid GPU capacity no instance ran is platform overhead, never model compute: METHOD §2, §4), its
    reason naming the reservation and its hours (:func:`audit.capacity_blocks.idle_reason`)."""
    idle = {i: idle_reason(b) for b in blocks if b.idle() for i in b.own}
    if not idle:
        return charges
    charges = charges.copy()
    at = list(idle)
    charges.loc[at, "resource_class"] = "commitment_unused"
    charges.loc[at, "rule_reason"] = list(idle.values())
    return charges


class _Targets:
    """Which charges an adjustment applies to, looked up once per resource / service, narrowest first.

    One rule for tax and credits (:data:`audit.lines.SCOPE_RULE`). A line naming a resource that has charges
    applies to that resource's charges of its SKU during its charge period (a GCP or CUR credit rides
    on the charge and hour it discounts), else to the resource's charges its period holds (billed
    within it: an hour's credit with no SKU goes to that hour's instance line, not to the day's data
    transfer line that merely overlaps the hour), else to the resource's charges whose period
    overlaps it, else to all that resource's charges. A line naming no such resource applies to the charges of its account
    and service of its SKU during its period (a GCP export row's credit on a row with no resource, such
    as internet egress, keeps that row's SKU and hour), else of its SKU, else of its service (CUR and
    FOCUS tax and credit lines name the service they apply to), else to every charge of its account
    (a credit: the account's usage). The account is the line's SubAccountId, else its
    BillingAccountId.
    """

    def __init__(self, charges: pd.DataFrame):
        self.resource = charges.groupby("resource_id", sort=False).indices
        self.account = {"sub": charges.groupby("sub_account_id", sort=False).indices,
                        "billing": charges.groupby("billing_account_id", sort=False).indices}
        self.usage = (charges["charge_category"] == "Usage").to_numpy()
        self.charges = charges
        self.services: dict[tuple, dict] = {}  # (account kind, with SKU) -> keys -> positions, when asked
        self.sku = charges["sku_id"].to_numpy(dtype=object)
        self.start = charges["start"].to_numpy(dtype="datetime64[ns]")
        self.end = charges["end"].to_numpy(dtype="datetime64[ns]")

    def of_credit(self, line) -> tuple:
        return self._key(line, usage_only=True)

    def of_tax(self, line) -> tuple:
        return self._key(line, usage_only=False)

    def _key(self, line, usage_only: bool) -> tuple:
        when = (_utc(line["start"]), _utc(line["end"]), line["sku_id"])
        if line["resource_id"] and line["resource_id"] in self.resource:
            return ("resource", line["resource_id"], *when)
        kind = "sub" if line["sub_account_id"] else "billing"
        account = line["sub_account_id"] if kind == "sub" else line["billing_account_id"]
        return (kind, account, line["service_name"], *when, usage_only)

    def candidates(self, key: tuple):
        """Row positions (in ``charges``) of the charges a key names: the narrowest set first."""
        if key[0] == "resource":
            found = self.resource[key[1]]
            during = self._during(found, key[2], key[3])
            if key[4]:
                yield during[self.sku[during] == key[4]]
            yield self._held(found, key[2], key[3])
            yield during
            yield found
            return
        kind, account, service, start, end, sku, usage_only = key
        if sku:
            same = self._of_service(kind, True).get((account, service, sku), _NONE)
            yield self._during(same, start, end)
            yield same
        yield self._of_service(kind, False).get((account, service), _NONE)
        found = self.account[kind].get(account, _NONE)
        yield found[self.usage[found]] if usage_only else found

    def _during(self, found: np.ndarray, start, end) -> np.ndarray:
        return found[(self.start[found] < end) & (self.end[found] > start)]

    def _held(self, found: np.ndarray, start, end) -> np.ndarray:
        """The charges of ``found`` whose whole period lies in ``start``..``end``: billed in it."""
        return found[(self.start[found] >= start) & (self.end[found] <= end)]

    def _of_service(self, kind: str, with_sku: bool) -> dict:
        if (kind, with_sku) not in self.services:
            account = "sub_account_id" if kind == "sub" else "billing_account_id"
            keys = [account, "service_name"] + ["sku_id"] * with_sku
            self.services[(kind, with_sku)] = self.charges.groupby(keys, sort=False).indices
        return self.services[(kind, with_sku)]


_NONE = np.array([], dtype=int)


def _utc(value) -> np.datetime64:
    """A line's period bound as the naive UTC datetime64 the charges' bounds are held in."""
    return np.datetime64(pd.Timestamp(value).value, "ns")


def _spread_adjustments(charges, adjustments, amount, targets: _Targets, key_of, leftovers) -> list[Decimal]:
    """Each adjustment spread over its charges pro rata to gross + commitment (exact Decimal).

    Adjustments naming the same charges are summed first and split once: the split is linear, so
    every charge gets what splitting them one by one would give it (to Decimal's 28 digits). An
    adjustment with no charge to apply to is a leftover (unattributed), in line order.
    """
    ordered = [(key_of(line), line, amount[idx])
               for idx, line in zip(adjustments.index, adjustments.to_dict("records")) if amount[idx] != 0]
    totals: dict[tuple, Decimal] = {}
    for key, _, value in ordered:
        totals[key] = totals.get(key, ZERO) + value
    added = [ZERO] * len(charges)
    gross, commitment = list(charges["gross"]), list(charges["commitment"])
    spread_over: set[tuple] = set()
    for key, total in totals.items():
        for where in targets.candidates(key):  # the narrowest set the adjustment can be spread over
            weights = [gross[p] + commitment[p] for p in where]
            if weights and dsum(weights) != 0:
                break
        else:
            continue
        spread_over.add(key)
        for p, share in zip(where, split_evenly(total, weights)):
            added[p] += share
    leftovers += [Leftover(line["line_id"], value, f"{line['charge_category'].lower()} line with no charge to apply to")
                  for key, line, value in ordered if key not in spread_over]
    return added
