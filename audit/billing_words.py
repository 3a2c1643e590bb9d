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


def noun(formats: Iterable[str]) -> str:
    """What lines of these billing formats are called, in first-seen order ("CUR / FOCUS")."""
    return " / ".join(dict.fromkeys(NOUNS.get(f, f) for f in formats)) or "billing"


def lines_of(formats: Iterable[str], names: str) -> str:
    """``<noun> lines (<source names>)``: the lines a figure was measured on."""
    return f"{noun(formats)} lines ({names})"


def unused_reason(reason: str, formats: Iterable[str]) -> str:
    """A rule's reason with the FOCUS unused-commitment field replaced by the formats' own fields."""
    fields = " / ".join(dict.fromkeys(UNUSED_FIELDS.get(f, FOCUS_UNUSED) for f in formats))
    return reason.replace(FOCUS_UNUSED, fields) if fields else reason
