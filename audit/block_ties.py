"""Which lines are an EC2 Capacity Block's fee and which ran in the capacity reservation it buys
(audit/capacity_blocks.py says what AWS writes and how the fee moves). Apart from that module so that
audit/lines.py (the bases: a block's fee counts 0 before commitments) and audit/bridge.py read the
ties without the spreading; and the home of :func:`json_object`, the ``extra`` reader they share.
"""
from __future__ import annotations

import json
import re

import pandas as pd

#: a Capacity Block's usage type (the verifier's ``USE1-CapacityBlock:p5.48xlarge`` spelling too)
BLOCK_USAGE = re.compile(r"(?i)(^|-)capacityblock(fee)?:")
RESERVATION = re.compile(r"(?i)\bcr-[0-9a-z]+")
#: the extra keys that may hold what this module reads (FOCUS keeps a header's own spelling)
KEYS = ("capacityreservationid", "x_usagetype")


def reservation_key(value) -> str:
    """A capacity reservation named by its id or its ARN, as its id in lower case (``cr-…``); ""
    when the value names none."""
    found = RESERVATION.search(str(value or ""))
    return found.group(0).lower() if found else ""


def _named(extra: str) -> dict[str, str]:
    """The values of :data:`KEYS` a line's ``extra`` holds, keyed in lower case."""
    return {k.lower(): str(v or "") for k, v in json_object(extra).items() if k.lower() in KEYS}


def block_ties(lines: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(whether each line is a Capacity Block's fee: a Purchase of a Capacity Block usage type, the
    capacity reservation each line names, "" where none). A fee names its CapacityReservationId,
    else its resource; any other line its CapacityReservationId. Only the Purchase lines are looked
    at unless one of them is a fee (a bill without a Capacity Block reads no other line's ``extra``),
    and then only the lines whose ``extra`` mentions a capacity reservation."""
    fee = pd.Series(False, index=lines.index)
    reservation = pd.Series("", index=lines.index, dtype=object)
    if "extra" not in lines.columns or not len(lines):
        return fee, reservation
    text = lines["extra"].fillna("").astype(str)
    purchases = lines.index[(lines["charge_category"] == "Purchase").to_numpy(dtype=bool)]
    for idx in purchases[text[purchases].str.contains("capacityblock", case=False, regex=False).to_numpy(dtype=bool)]:
        named = _named(text[idx])
        if BLOCK_USAGE.search(named.get("x_usagetype", "")):
            fee[idx] = True
            reservation[idx] = reservation_key(named.get("capacityreservationid")) or reservation_key(
                lines.at[idx, "resource_id"])
    if not fee.any():
        return fee, reservation
    others = ~fee & text.str.contains("capacityreservation", case=False, regex=False)
    for idx in lines.index[others.to_numpy(dtype=bool)]:
        reservation[idx] = reservation_key(_named(text[idx]).get("capacityreservationid"))
    return fee, reservation


def block_lines(lines: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(whether each line is a Capacity Block's fee, whether it ran in a block a fee among ``lines``
    buys): the purchase and its covered usage, as the bridge and the pre-commitment bases read them."""
    fee, reservation = block_ties(lines)
    bought = set(reservation[fee]) - {""}
    return fee, ~fee & reservation.isin(bought) if bought else pd.Series(False, index=lines.index)


def json_object(text) -> dict:
    """A JSON object's text (a line's ``extra``) as a dict; {} for empty, unreadable or other JSON."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
