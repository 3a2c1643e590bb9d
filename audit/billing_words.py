"""How a figure names the billing data that measured it: the export's own format and fields.

Every billing source is read into FOCUS-named lines, but a figure's source names what was read (rule
5: every figure names the source that measured it): a GCP billing export's lines are "GCP billing
export lines", not "FOCUS lines", and an unused commitment is what that export's own rows say.
"""
from __future__ import annotations

import re
from typing import Iterable

#: billing format (case ``format``) → what its lines are called
NOUNS = {"focus": "FOCUS", "cur": "CUR", "athena": "CUR", "azure": "Azure cost details",
         "gcp_billing": "GCP billing export"}
#: a regular expression matching what :func:`noun` returns (one noun, or several joined by " / ")
_ONE = "(?:" + "|".join(re.escape(n) for n in sorted(set(NOUNS.values()), key=len, reverse=True)) + ")"
NOUN_PATTERN = f"{_ONE}(?: / {_ONE})*"

#: the shipped rule's words for an unused commitment (audit/data/rules.toml), said of FOCUS data
FOCUS_UNUSED = "FOCUS CommitmentDiscountStatus = Unused"
#: billing format → the export's own field(s) an unused-commitment line comes from (the connectors
#: set CommitmentDiscountStatus Unused from them)
UNUSED_FIELDS = {
    "focus": FOCUS_UNUSED,
    "cur": "CUR RIFee / SavingsPlanRecurringFee lines' unused part",
    "athena": "CUR RIFee / SavingsPlanRecurringFee lines' unused part",
    "azure": "Azure ChargeType UnusedReservation / UnusedSavingsPlan",
    "gcp_billing": "GCP commitment fee rows less the usage their COMMITTED_USAGE_DISCOUNT credits cover",
}

#: billing format → why it has no ContractedCost at all (a format not named here spells the column)
NO_CONTRACTED = {
    "gcp_billing": "the GCP billing export carries no contracted price (its cost columns are cost and "
                   "cost_at_list, the list price)",
}

#: the FOCUS cost column of each cost basis
FOCUS_COLUMNS = {"effective": "EffectiveCost", "billed": "BilledCost", "list": "ListCost",
                 "contracted": "ContractedCost"}
_CUR = {  # connectors/billing/cur_sql.py COSTS: the CUR columns each FOCUS cost column is read from
    "billed": "CUR line_item_unblended_cost, Savings Plan covered usage and its negation 0",
    "effective": "CUR line_item_unblended_cost, reservation-covered usage at reservation_effective_cost, Savings "
                 "Plan covered usage at savings_plan_savings_plan_effective_cost, commitment fees 0 and their "
                 "unused part as lines of its own",
    "list": "CUR pricing_public_on_demand_cost, tax, credits and refunds at line_item_unblended_cost",
    "contracted": "CUR line_item_unblended_cost, reservation-covered usage at pricing_public_on_demand_cost",
}
#: billing format → cost basis → the export's own column(s) its connector reads that basis from
#: (a format not named here is read from the FOCUS column itself)
BASIS_FIELDS = {
    "cur": _CUR,
    "athena": _CUR,
    "azure": {  # connectors/billing/azure.py mapped_sql, azure_contracted.py
        "billed": "Azure costInBillingCurrency (EA: CostInBillingCurrency or Cost), covered usage and Unused* lines 0 in an "
                  "AmortizedCost export",
        "effective": "Azure costInBillingCurrency (EA: CostInBillingCurrency or Cost), commitment purchases and refunds 0",
        "list": "Azure PaygCostInBillingCurrency, else PayGPrice × Quantity (MCA: × ExchangeRatePricingToBilling), "
                "Unused* lines 0",
        "contracted": "Azure UnitPrice × Quantity, Unused* lines 0",
    },
    "gcp_billing": {  # connectors/billing/gcp_billing.py, gcp_commitments.py charge_columns
        "billed": "GCP billing export cost + credits",
        "effective": "GCP billing export cost + credits, committed use discount fees spread over the usage "
                     "their credits cover",
        "list": "GCP billing export cost_at_list, credits 0",
        "contracted": f"none: {NO_CONTRACTED['gcp_billing']}",
    },
}


def basis_fields(basis: str, formats: Iterable[str]) -> str:
    """The columns the lines of these billing formats give ``basis`` from, in first-seen order
    ("FOCUS EffectiveCost"; "CUR line_item_unblended_cost, …"), joined by "; "."""
    focus = f"FOCUS {FOCUS_COLUMNS.get(basis, basis)}"
    found = [BASIS_FIELDS.get(f, {}).get(basis, focus) for f in formats]
    return "; ".join(dict.fromkeys(found)) or focus


def noun(formats: Iterable[str]) -> str:
    """What lines of these billing formats are called, in first-seen order ("CUR / FOCUS")."""
    return " / ".join(dict.fromkeys(NOUNS.get(f, f) for f in formats)) or "billing"


def billing_formats(sources: Iterable[dict]) -> list[str]:
    """The formats of an audit.json ``sources`` list's billing sources, in its order."""
    return [str(s.get("format") or "") for s in sources if s.get("kind") == "billing"]


def formats_named(nouns: str) -> list[str]:
    """The billing formats a :func:`noun` names, in its order ("CUR / FOCUS" → cur, focus): the first
    format of each noun (a CUR and an Athena CUR read the same columns); an unknown noun as given."""
    first: dict[str, str] = {}
    for fmt, name in NOUNS.items():
        first.setdefault(name, fmt)
    return [first.get(name, name) for name in nouns.split(" / ")]


def lines_of(formats: Iterable[str], names: str) -> str:
    """``<noun> lines (<source names>)``: the lines a figure was measured on."""
    return f"{noun(formats)} lines ({names})"


def unused_reason(reason: str, formats: Iterable[str]) -> str:
    """A rule's reason with the FOCUS unused-commitment field replaced by the formats' own fields."""
    fields = " / ".join(dict.fromkeys(UNUSED_FIELDS.get(f, FOCUS_UNUSED) for f in formats))
    return reason.replace(FOCUS_UNUSED, fields) if fields else reason
